package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/swarmhq/swarm/control"
)

// command is what the control API asks a runner to do.
type command int

const (
	cmdPause command = iota + 1
	cmdResume
)

// ErrAgentStopped means a command reached an agent whose runner ended.
var ErrAgentStopped = errors.New("agent is stopped")

// Pause asks the agent to pause: a running session finishes first.
func (s *Supervisor) Pause(ctx context.Context, agent string) error {
	return s.command(ctx, agent, cmdPause)
}

// Resume asks a paused agent to carry on.
func (s *Supervisor) Resume(ctx context.Context, agent string) error {
	return s.command(ctx, agent, cmdResume)
}

func (s *Supervisor) command(ctx context.Context, agent string, c command) error {
	r, ok := s.runners[agent]
	if !ok {
		return fmt.Errorf("unknown agent %q (running: %s)", agent, strings.Join(s.order, ", "))
	}
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
	case control.OpPing:
		d, err := json.Marshal(map[string]any{"pid": os.Getpid(), "agents": s.order, "watchers": s.bus.count()})
		if err != nil {
			return control.Response{Error: err.Error()}
		}
		return control.Response{OK: true, Data: d}
	case control.OpStop:
		s.RequestStop()
		return control.Response{OK: true}
	case control.OpPause:
		return result(s.Pause(ctx, req.Agent))
	case control.OpResume:
		return result(s.Resume(ctx, req.Agent))
	case control.OpWatch:
		return s.serveWatch(ctx, send)
	case control.OpEscalation:
		s.EscalationChanged()
		return control.Response{OK: true}
	}
	return control.Response{Error: fmt.Sprintf("unknown operation %q", req.Op)}
}

func result(err error) control.Response {
	if err != nil {
		return control.Response{Error: err.Error()}
	}
	return control.Response{OK: true}
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
