package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/proc"
)

// One door per session (DESIGN §13.2). Before a session starts its runner
// opens a control socket for that session alone; a connection to it is
// that session, and the supervisor builds the session's identity.Caller
// from the door, never from what a request says. The door offers what a
// session may ask of the swarm: run a swarm command as itself (OpRun) and
// ping. Every other operation, and any request that names an identity,
// is refused with the rule. The door closes when the session ends, so a
// leftover process of an earlier session finds it gone.

// ErrDoorClosed is a request that reached the door of a session that ended.
var ErrDoorClosed = errors.New("this session has ended and its door is closed")

// door is one session's control socket, served while the session runs.
type door struct {
	srv    *control.Server
	caller identity.Caller
	closed atomic.Bool
	stop   context.CancelFunc
	done   chan struct{}
}

// identityVars are the variables a request might use to claim who it is.
var identityVars = []string{"SWARM_AGENT", "SWARM_SESSION_ID", "SWARM_SESSION_SEQ"}

// openDoor opens and serves the door of the runner's next session. The
// runner owns it: closeDoor ends its goroutine and waits for it.
func (r *runner) openDoor(ctx context.Context, caller identity.Caller) (*door, error) {
	srv, err := r.sup.opts.ListenDoor(r.sup.opts.Layout, caller.SessionID())
	if err != nil {
		return nil, fmt.Errorf("open the door of session %s: %w", caller.SessionID(), err)
	}
	d := &door{srv: srv, caller: caller, done: make(chan struct{})}
	// Commands a session runs through its door answer while the supervisor
	// stops its agents; the door ends with its session.
	dctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = stop
	go func() {
		defer close(d.done)
		if err := srv.Serve(dctx, func(ctx context.Context, req control.Request, send func(any) error) control.Response {
			return r.sup.handleDoor(ctx, d, req)
		}); err != nil {
			r.sup.log.Warn("session door", "agent", caller.Agent(), "session", caller.SessionID(), "err", err)
		}
	}()
	return d, nil
}

// close refuses further requests, ends the door's server and waits for it
// (and for any command it was running).
func (d *door) close() {
	if d == nil {
		return
	}
	d.closed.Store(true)
	d.stop()
	<-d.done
}

// path is the door's socket, "" for none.
func (d *door) path() string {
	if d == nil {
		return ""
	}
	return d.srv.Path()
}

// refused answers a request the door does not take, naming the rule.
func refused(c identity.Caller, what, why, hint string) control.Response {
	return control.Response{Error: (&identity.Refusal{Rule: identity.RuleDoor, Caller: c, What: what, Why: why, Hint: hint}).Error()}
}

// handleDoor answers one request on a session's door, as that session.
func (s *Supervisor) handleDoor(ctx context.Context, d *door, req control.Request) control.Response {
	if d.closed.Load() {
		return control.Response{Error: fmt.Sprintf("session %s: %v; a process left over from it cannot act for the agent", d.caller.SessionID(), ErrDoorClosed)}
	}
	if why := s.otherSession(ctx, d.caller); why != "" {
		return control.Response{Error: why}
	}
	return HandleDoorCall(ctx, d.caller, req, s.opts.RunCommand, s.opts.Verbs.Call)
}

// RunFunc runs a swarm command as caller (Options.RunCommand).
type RunFunc func(ctx context.Context, caller identity.Caller, req control.RunRequest) control.RunResult

// CallFunc runs one verb with its typed request as caller (Verbs.Call): an
// error is a verb the door does not know, refused by its name.
type CallFunc func(ctx context.Context, caller identity.Caller, req control.CallRequest) (control.RunResult, error)

// identityArgs are the fields a typed request might use to claim who is
// asking; the door knows, so a request with one is refused.
var identityArgs = []string{"from", "agent", "caller", "session", "session_id", "session_seq", "env"}

// HandleDoor answers one request that came through session c's door: the
// door's rules, whatever the request says. run runs the commands (nil
// refuses them); it takes no typed verb calls (HandleDoorCall does).
func HandleDoor(ctx context.Context, c identity.Caller, req control.Request, run RunFunc) control.Response {
	return HandleDoorCall(ctx, c, req, run, nil)
}

// HandleDoorCall is HandleDoor with call running the typed verb calls
// (control.OpCall; nil refuses them).
func HandleDoorCall(ctx context.Context, c identity.Caller, req control.Request, run RunFunc, call CallFunc) control.Response {
	if req.Agent != "" || req.Escalation != 0 || len(req.Mail) > 0 {
		return refused(c, "a request naming "+namedIn(req), "a session's door is that session: a request names no agent, escalation or mail", "send only the command")
	}
	switch req.Op {
	case control.OpPing:
		return answer(map[string]any{"session": c.SessionID(), "agent": c.Agent()})
	case control.OpRun:
		if req.Run == nil {
			return control.Response{Error: "bad request: run without a command"}
		}
		if err := checkDoorRun(*req.Run); err != "" {
			return refused(c, "'swarm "+strings.Join(req.Run.Args, " ")+"'", err, "run swarm commands unchanged from your session")
		}
		if run == nil {
			return control.Response{Error: control.RunUnsupported}
		}
		return answer(run(ctx, c, *req.Run))
	case control.OpCall:
		if req.Call == nil || req.Call.Verb == "" {
			return control.Response{Error: "bad request: call without a verb"}
		}
		if k := namesIdentity(req.Call.Args); k != "" {
			return refused(c, "the verb "+req.Call.Verb+" with "+k, "the request names an identity ("+k+"); the door knows who the session is", "call the verb without "+k)
		}
		if call == nil {
			return control.Response{Error: "this supervisor runs no verbs for its sessions' doors"}
		}
		res, err := call(ctx, c, *req.Call)
		if err != nil {
			return control.Response{Error: err.Error()}
		}
		return answer(res)
	case control.OpStop, control.OpPause, control.OpResume, control.OpRetire, control.OpSpawn, control.OpEscalation, control.OpReload,
		control.OpMail, control.OpPoke, control.OpWatch:
		return refused(c, "the control operation "+req.Op, "it is not offered on a session's door",
			"run the swarm command instead (swarm spawn, swarm escalate ...); the operator's commands are the operator's")
	}
	return control.Response{Error: fmt.Sprintf("unknown operation %q on a session's door (it offers %s, %s and %s)", req.Op, control.OpRun, control.OpCall, control.OpPing)}
}

// namesIdentity is the identity field a typed request's arguments name,
// "" for none (or arguments that are not an object: the verb refuses them).
func namesIdentity(args json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(args, &fields) != nil {
		return ""
	}
	for _, k := range identityArgs {
		if v, ok := fields[k]; ok && string(v) != "null" && string(v) != `""` {
			return k
		}
	}
	return ""
}

// checkDoorRun says why a command request does not fit a session's door,
// "" when it does: the door decides who runs it, so the request may not
// name an identity, another database or another repository.
func checkDoorRun(r control.RunRequest) string {
	for _, k := range identityVars {
		if v := r.Env[k]; v != "" {
			return fmt.Sprintf("the request names an identity (%s=%s); the door knows who the session is", k, v)
		}
	}
	if r.Target != "" {
		return "the request names a database (" + r.Target + "); a session uses its swarm's"
	}
	if slices.ContainsFunc(r.Args, func(a string) bool { return a == "--dir" || strings.HasPrefix(a, "--dir=") }) {
		return "--dir names another repository; a session works in its own"
	}
	return ""
}

// namedIn lists what a request names that a door refuses.
func namedIn(req control.Request) string {
	var what []string
	if req.Agent != "" {
		what = append(what, "agent "+req.Agent)
	}
	if req.Escalation != 0 {
		what = append(what, fmt.Sprintf("escalation %d", req.Escalation))
	}
	if len(req.Mail) > 0 {
		what = append(what, "mail")
	}
	return strings.Join(what, ", ")
}

// otherSession refuses a request on c's door from a process started inside
// another session of this swarm (the kernel names the process; its own
// environment and its ancestors' say which sessions it runs in): a session
// uses only its own door. "" when the request may go on; a process no
// session marks (a double-forked one that cleared its environment) cannot
// be told apart without the sandbox, which hides other sessions' doors.
func (s *Supervisor) otherSession(ctx context.Context, c identity.Caller) string {
	pid, ok := control.PeerPID(ctx)
	if !ok {
		return ""
	}
	for _, m := range proc.SessionMarks(pid, s.opts.Layout.Root) {
		if m.Session != "" && m.Session != c.SessionID() {
			return (&identity.Refusal{Rule: identity.RuleDoor, Caller: c, What: "a request on the door of session " + c.SessionID(),
				Why:  fmt.Sprintf("it came from process %d, which runs inside session %s", pid, m.Session),
				Hint: "a session uses only its own door ($" + control.DoorEnv + ")"}).Error()
		}
	}
	return ""
}

// fromSession refuses an operator's-door request from a process of one of
// this swarm's sessions (the kernel names the connecting process; its
// ancestry carries the session's door): sessions use their own door. ""
// when the request may go on.
func (s *Supervisor) fromSession(ctx context.Context, op string) string {
	pid, ok := control.PeerPID(ctx)
	if !ok {
		return ""
	}
	m, in := proc.InSession(pid, s.opts.Layout.Root)
	if !in {
		return ""
	}
	return (&identity.Refusal{Rule: identity.RuleDoor, What: "the control operation " + op,
		Why:  fmt.Sprintf("it came from process %d of session %s, and the operator's door is the operator's", pid, orNone(m.Session)),
		Hint: "a session reaches the swarm through its own door ($" + control.DoorEnv + ")"}).Error()
}
