package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

// Request is one call to the supervisor.
type Request struct {
	Op    string `json:"op"`
	Agent string `json:"agent,omitempty"`
	// Mail is what a poke announces: the messages just stored, so the
	// supervisor wakes their recipients without reading them back.
	Mail []message.Message `json:"mail,omitempty"`
	// Escalation is the escalation an OpEscalation is about.
	Escalation int64 `json:"escalation,omitempty"`
	// Run is the command an OpRun asks the supervisor to run.
	Run *RunRequest `json:"run,omitempty"`
	// Call is the verb an OpCall asks a session's door to run.
	Call *CallRequest `json:"call,omitempty"`
}

// CallRequest is one verb with its typed request, as JSON (OpCall): what
// `swarm mcp`'s tools send through the session's door, with no argv round
// trip. The door decides who calls; Args names nobody.
type CallRequest struct {
	Verb string          `json:"verb"`
	Args json.RawMessage `json:"args,omitempty"`
	// Dir is the caller's working directory (the agent's worktree).
	Dir string `json:"dir,omitempty"`
}

// RunRequest is a swarm command run inside an agent's session that the
// supervisor runs for it (OpRun): on a PostgreSQL swarm the session holds
// no database credential, so its commands reach the store through the
// supervisor, which has one.
type RunRequest struct {
	Args []string `json:"args"`
	// Dir is the command's working directory (the agent's worktree).
	Dir string `json:"dir"`
	// Env holds the session's identity: SWARM_AGENT, SWARM_SESSION_ID,
	// SWARM_SESSION_SEQ and SWARM_ROOT.
	Env map[string]string `json:"env"`
	// Stdin is the command's input (a --payload @- or a message body).
	Stdin []byte `json:"stdin,omitempty"`
	// Target names the database the caller would open (the operator's
	// commands); a supervisor on another one declines. Empty for sessions.
	Target string `json:"target,omitempty"`
}

// RunResult is what the command printed and its exit code.
type RunResult struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Code   int    `json:"code"`
	// Declined says the supervisor did not run the command (it is not
	// its database): the caller runs it itself.
	Declined bool `json:"declined,omitempty"`
}

// ErrRunDeclined means the supervisor did not run the command (OpRun): it
// runs none for others, or not on the caller's database. Nothing was done.
var ErrRunDeclined = errors.New("the supervisor does not run this command")

// RunRefused is a supervisor's refusal of an OpRun before it ran anything
// (at its connection cap, or a caller the door does not take): unlike a
// lost answer, it says for sure that nothing was done.
type RunRefused struct{ Reason string }

func (e *RunRefused) Error() string { return "control " + OpRun + ": " + e.Reason }

// Response is the supervisor's answer.
type Response struct {
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Operations.
const (
	OpPoke   = "poke"   // new mail or work: look now
	OpPing   = "ping"   // is anyone there; returns the pid
	OpStop   = "stop"   // stop gracefully
	OpPause  = "pause"  // pause Agent
	OpResume = "resume" // resume Agent
	OpWatch  = "watch"  // stream notices until the connection closes
	// OpEscalation says escalation Escalation was raised or decided: the
	// supervisor applies its hold or releases it now, and notifies.
	OpEscalation = "escalation"
	// OpMail announces mail just stored, like OpPoke, and is answered:
	// the recipients are woken first, then Data is a []Delivery.
	OpMail = "mail"
	// OpRun runs a session's swarm command in the supervisor (Run); Data
	// is a RunResult.
	OpRun = "run"
	// OpCall runs one verb with a typed request (Call) as the door's
	// session; Data is a RunResult, what the verb's command would print.
	OpCall = "call"
	// OpSpawn starts the spawned agent Agent that `swarm spawn` stored.
	OpSpawn = "spawn"
	// OpRetire stops the spawned agent Agent, retired; answered once its
	// runner ended.
	OpRetire = "retire"
	// OpReload reads swarm.toml again and applies what can change while
	// the swarm runs; Data is the supervisor's swarm.ReloadReport.
	// Operator only.
	OpReload = "reload"
)

// RunUnsupported is a supervisor's answer to an OpRun it does not take.
const RunUnsupported = "this supervisor does not run swarm commands for others"

// Run asks the running supervisor to run a session's swarm command and
// returns what it printed. ctx bounds the wait.
func Run(ctx context.Context, l repo.Layout, req RunRequest) (RunResult, error) {
	return runOn(ctx, SocketPath(l), req)
}

func runOn(ctx context.Context, path string, req RunRequest) (RunResult, error) {
	var res RunResult
	resp, err := callPath(ctx, path, Request{Op: OpRun, Run: &req})
	if err != nil {
		// An older supervisor, or one that runs no commands (SQLite):
		// it answered at once and did nothing.
		if !resp.OK && (resp.Error == RunUnsupported || strings.HasPrefix(resp.Error, "unknown operation")) {
			return res, fmt.Errorf("%w: %s", ErrRunDeclined, resp.Error)
		}
		if !resp.OK && resp.Error != "" {
			return res, &RunRefused{Reason: resp.Error}
		}
		return res, err
	}
	if err := json.Unmarshal(resp.Data, &res); err != nil {
		return res, fmt.Errorf("control %s: bad answer: %w", OpRun, err)
	}
	if res.Declined {
		return res, ErrRunDeclined
	}
	return res, nil
}

// Delivery is what the supervisor says about one message of an OpMail:
// what its recipient was doing when the message came.
type Delivery struct {
	ID int64  `json:"id"`
	To string `json:"to"`
	// Started is true when the supervisor runs the recipient; false for
	// operator, and for an agent it did not start (one added to swarm.toml
	// after it started).
	Started bool `json:"started"`
	// State is the recipient's lifecycle state when the message came.
	State string `json:"state,omitempty"`
	// Interrupted is true when the message is urgent and cuts the
	// recipient's running session short (interrupt = "cancel").
	Interrupted bool `json:"interrupted"`
	// Joins is true when the message is urgent and joins the running
	// session at its next tool call instead (interrupt = "boundary").
	Joins bool `json:"joins,omitempty"`
}

// ErrNoSupervisor means nothing listens on the control socket.
var ErrNoSupervisor = errors.New("no supervisor is running")

// pokeBodyCap bounds each body a poke carries: the supervisor only needs
// the head of a message for its notices, and the wire stays small.
const pokeBodyCap = 1 << 10

// announceBatch bounds the messages of one OpMail request, so a broadcast
// to thousands of agents stays well under the server's line limit.
const announceBatch = 200

// Announce tells a running supervisor that mail was just stored and
// returns its answer, one Delivery per message, in order. The supervisor
// wakes the recipients before it answers. With no supervisor it fails
// with ErrNoSupervisor (wrapped): the mail waits in the database. ctx
// bounds the wait.
func Announce(ctx context.Context, l repo.Layout, mail []message.Message) ([]Delivery, error) {
	var out []Delivery
	cut := cutBodies(mail)
	for len(cut) > 0 {
		n := min(len(cut), announceBatch)
		resp, err := Call(ctx, l, Request{Op: OpMail, Mail: cut[:n]})
		if err != nil {
			return out, err
		}
		var ds []Delivery
		if err := json.Unmarshal(resp.Data, &ds); err != nil {
			return out, fmt.Errorf("control %s: bad answer: %w", OpMail, err)
		}
		out = append(out, ds...)
		cut = cut[n:]
	}
	return out, nil
}

// cutBodies copies mail with each body cut to pokeBodyCap and no payload:
// the supervisor needs only the head of a message for its notices.
func cutBodies(mail []message.Message) []message.Message {
	cut := make([]message.Message, len(mail))
	for i, m := range mail {
		if len(m.Body) > pokeBodyCap {
			m.Body = strings.ToValidUTF8(m.Body[:pokeBodyCap], "") + "…"
		}
		m.Payload = nil
		cut[i] = m
	}
	return cut
}

// Poke tells a running supervisor that mail was just stored. It does not
// wait for an answer and reports only whether the poke was delivered:
// with no supervisor the mail waits in the database, and a supervisor
// that misses the poke finds the mail through its change feed.
func Poke(l repo.Layout, mail []message.Message) bool {
	c, err := net.DialTimeout("unix", SocketPath(l), 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	b, err := json.Marshal(Request{Op: OpPoke, Mail: cutBodies(mail)})
	if err != nil {
		return false
	}
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = c.Write(append(b, '\n'))
	return err == nil
}

// Call sends one request and waits for the answer.
func Call(ctx context.Context, l repo.Layout, req Request) (Response, error) {
	return callPath(ctx, SocketPath(l), req)
}

func callPath(ctx context.Context, path string, req Request) (Response, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Response{}, fmt.Errorf("%w (%v)", ErrNoSupervisor, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	b, _ := json.Marshal(req)
	_, werr := c.Write(append(b, '\n'))
	// A supervisor that refuses the connection (at its connection limit)
	// answers why and closes at once, maybe before the request was
	// written: the answer is still there to read.
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		if werr != nil {
			err = werr
		}
		return Response{}, fmt.Errorf("control %s: %w", req.Op, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("control %s: bad answer: %w", req.Op, err)
	}
	if !resp.OK {
		return resp, fmt.Errorf("control %s: %s", req.Op, resp.Error)
	}
	return resp, nil
}
