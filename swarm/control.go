package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"os"
	"strings"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/lifecycle"
)

// command is what the control API asks a runner to do.
type command int

const (
	cmdPause command = iota + 1
	cmdResume
)

// ErrAgentStopped means a command reached an agent whose runner ended.
var ErrAgentStopped = errors.New("agent is stopped")

// ErrNotPaused means a resume reached an agent that is not paused and has
// no pause pending.
var ErrNotPaused = errors.New("not paused")

// What a pause or resume does, as Pause and Resume report it.
const (
	PauseNow          = "now"           // between sessions: it pauses at once
	PauseAfterSession = "after_session" // its session finishes first
	PauseAlready      = "already"       // it was paused already
	Resumed           = "resumed"       // it was paused and carries on
	PauseCancelled    = "cancelled"     // the pause had not taken effect yet
)

// Pause asks the agent to pause: a running session finishes first. It
// reports which of PauseNow, PauseAfterSession or PauseAlready applies.
func (s *Supervisor) Pause(ctx context.Context, agent string) (string, error) {
	r, err := s.runner(agent)
	if err != nil {
		return "", err
	}
	effect := PauseNow
	switch st := r.liveState(); {
	case st == lifecycle.Paused:
		effect = PauseAlready
	case st.Active() || st == lifecycle.SessionComplete:
		effect = PauseAfterSession
	}
	r.wantPause.Store(true)
	return effect, s.command(ctx, r, cmdPause)
}

// Resume asks a paused agent to carry on, or cancels a pause that has not
// taken effect. It reports Resumed or PauseCancelled, and fails with
// ErrNotPaused for an agent that is neither paused nor pausing.
func (s *Supervisor) Resume(ctx context.Context, agent string) (string, error) {
	r, err := s.runner(agent)
	if err != nil {
		return "", err
	}
	st := r.liveState()
	if st != lifecycle.Paused && !r.wantPause.Load() {
		return "", fmt.Errorf("%s is %w (it is %s)", agent, ErrNotPaused, st)
	}
	effect := Resumed
	if st != lifecycle.Paused {
		effect = PauseCancelled
	}
	r.wantPause.Store(false)
	return effect, s.command(ctx, r, cmdResume)
}

func (s *Supervisor) runner(agent string) (*runner, error) {
	r, ok := s.lookup(agent)
	if !ok {
		return nil, fmt.Errorf("unknown agent %q (running: %s)", agent, strings.Join(s.AgentNames(), ", "))
	}
	return r, nil
}

func (s *Supervisor) command(ctx context.Context, r *runner, c command) error {
	agent := r.agent.Name
	stopped := fmt.Errorf("%w: %s; a new 'swarm up' starts it again", ErrAgentStopped, agent)
	select {
	case <-r.done: // checked first: the buffered ctl would take the request
		return stopped
	default:
	}
	select {
	case r.ctl <- c:
		return nil
	case <-r.done:
		return stopped
	case <-ctx.Done():
		return errors.New("shutting down")
	}
}

// handle answers control socket requests: each wire operation becomes one
// typed call.
func (s *Supervisor) handle(ctx context.Context, req control.Request, send func(any) error) control.Response {
	if req.Op != control.OpPing {
		if why := s.fromSession(ctx, req.Op); why != "" {
			return control.Response{Error: why}
		}
	}
	switch req.Op {
	case control.OpPoke:
		if len(req.Mail) > 0 {
			s.Wake(ctx, req.Mail)
		} else {
			s.wakeAll()
			if err := s.catchUp(ctx); err != nil {
				s.log.Warn("read new mail", "err", err)
			}
		}
		return control.Response{OK: true}
	case control.OpMail:
		// What the recipients were doing is read first, the wake comes
		// next (an urgent interrupt waits for nothing else), the answer
		// last.
		ds := s.deliveries(req.Mail)
		for i := range ds {
			if d, ok := s.mail.recall(ds[i].ID); ok {
				ds[i] = d // the change feed saw it first
			}
		}
		s.Wake(ctx, req.Mail)
		return answer(ds)
	case control.OpPing:
		d, err := json.Marshal(map[string]any{"pid": os.Getpid(), "agents": s.AgentNames(), "engine": s.opts.EngineOverride, "watchers": s.bus.count()})
		if err != nil {
			return control.Response{Error: err.Error()}
		}
		return control.Response{OK: true, Data: d}
	case control.OpStop:
		if err := s.opts.Verbs.Stop(ctx, identity.Operator(), s.RequestStop); err != nil {
			return control.Response{Error: err.Error()}
		}
		return control.Response{OK: true}
	case control.OpPause:
		return effect(s.opts.Verbs.Pause(ctx, identity.Operator(), s, req.Agent))
	case control.OpResume:
		return effect(s.opts.Verbs.Resume(ctx, identity.Operator(), s, req.Agent))
	case control.OpWatch:
		return s.serveWatch(ctx, send)
	case control.OpEscalation:
		s.EscalationChanged()
		return control.Response{OK: true}
	case control.OpSpawn:
		if err := s.StartSpawned(ctx, req.Agent); err != nil {
			return control.Response{Error: err.Error()}
		}
		return control.Response{OK: true}
	case control.OpRetire:
		if err := s.RetireRunner(ctx, req.Agent); err != nil {
			return control.Response{Error: err.Error()}
		}
		return control.Response{OK: true}
	case control.OpReload:
		return reloaded(s.opts.Verbs.Reload(ctx, identity.Operator(), s))
	case control.OpRun:
		if s.opts.RunCommand == nil || req.Run == nil {
			return control.Response{Error: control.RunUnsupported}
		}
		// The operator's door: the operator's authority, and no request
		// field can claim another.
		for _, k := range identityVars {
			if v := req.Run.Env[k]; v != "" {
				return refused(identity.Operator(), "a run naming "+k+"="+v, "the operator's door takes no identity", "a session sends its commands to its own door ($"+control.DoorEnv+")")
			}
		}
		return answer(s.opts.RunCommand(ctx, identity.Operator(), *req.Run))
	}
	return control.Response{Error: fmt.Sprintf("unknown operation %q", req.Op)}
}

// answer is a successful response carrying v as its data.
func answer(v any) control.Response {
	d, err := json.Marshal(v)
	if err != nil {
		return control.Response{Error: err.Error()}
	}
	return control.Response{OK: true, Data: d}
}

// effect answers a pause or resume: {"effect": ...}.
func effect(what string, err error) control.Response {
	if err != nil {
		return control.Response{Error: err.Error()}
	}
	return answer(map[string]string{"effect": what})
}

func (s *Supervisor) serveWatch(ctx context.Context, send func(any) error) control.Response {
	s.bus.watching.Add(1)
	defer s.bus.watching.Done()
	ch := s.bus.watch(ctx)
	s.log.Debug("watcher attached")
	if err := send(control.Response{OK: true}); err != nil {
		return control.Response{OK: true}
	}
	sent := 0
	for n := range ch {
		if err := send(n); err != nil {
			s.log.Debug("watcher gone", "notices", sent, "err", err)
			return control.Response{OK: true}
		}
		sent++
	}
	s.log.Debug("watcher detached", "notices", sent, "ctx_err", ctx.Err())
	return control.Response{OK: true}
}
