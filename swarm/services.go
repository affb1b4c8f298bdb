package swarm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/lifecycle"
)

// Service is a named background job that Run starts once recovery is
// done, cancels when the swarm stops, and waits for. A service that
// returns an error while the swarm runs stops the swarm with that error as
// the cause; one that returns nil simply ends. Deadline sweepers and
// budget watchers plug in here without touching Run.
type Service struct {
	Name string
	Run  func(ctx context.Context) error
}

// services are the built-in services plus the configured ones.
func (s *Supervisor) services() []Service {
	return append([]Service{
		{Name: "stop-request", Run: s.awaitStopRequest},
		{Name: "change-feed", Run: s.followFeed},
		{Name: "heartbeat", Run: func(ctx context.Context) error { return every(ctx, s.cfg.Liveness.Heartbeat, s.heartbeat) }},
		{Name: "leases", Run: s.leases.run},
		{Name: "prune", Run: func(ctx context.Context) error { return every(ctx, time.Hour, s.prune) }},
		{Name: "escalations", Run: s.desk.run},
		{Name: "stalled", Run: s.watchStalls},
		{Name: "ack-deadlines", Run: s.acks.run},
		{Name: "workflows", Run: s.flow.run},
		{Name: "merge-queue", Run: s.merges.run},
		{Name: "team-launch", Run: s.runLaunch},
		{Name: "reservations", Run: s.expireReservations},
	}, s.opts.Services...)
}

// startServices runs every service until ctx ends. A failing service
// cancels ctx through stop. The returned channel yields the joined
// failures once every service has returned.
func (s *Supervisor) startServices(ctx context.Context, stop context.CancelCauseFunc) <-chan error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, svc := range s.services() {
		wg.Go(func() {
			err := runService(ctx, svc)
			if err == nil || ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrShutdown) { // a graceful stop, not a failure
				stop(err)
				return
			}
			err = fmt.Errorf("service %s: %w", svc.Name, err)
			s.log.Error("service failed; stopping the swarm", "service", svc.Name, "err", err)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			stop(err)
		})
	}
	done := make(chan error, 1)
	go func() {
		wg.Wait()
		done <- errors.Join(errs...)
	}()
	return done
}

// runService runs one service, turning a panic into its error.
func runService(ctx context.Context, svc Service) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError("service "+svc.Name, p)
		}
	}()
	return svc.Run(ctx)
}

func (s *Supervisor) awaitStopRequest(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.requested:
		return errStopRequested
	}
	return nil
}

// errStopRequested ends the awaitStopRequest service; Run treats it as a
// graceful stop.
var errStopRequested = fmt.Errorf("%w: 'swarm down' asked to stop", ErrShutdown)

// every calls fn at once and then every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) error {
	fn(ctx)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			fn(ctx)
		}
	}
}

func (s *Supervisor) heartbeat(ctx context.Context) {
	if err := s.store.Heartbeat(ctx, s.AgentNames()); err != nil && ctx.Err() == nil {
		s.log.Warn("heartbeat", "err", err)
	}
}

// prune deletes done mail past the retention window, so a long-running
// swarm's database does not grow without bound.
func (s *Supervisor) prune(ctx context.Context) {
	if n, err := s.store.Prune(ctx, s.clock.Now().Add(-s.cfg.Mailbox.Retention)); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("prune mail", "err", err)
		}
	} else if n > 0 {
		s.log.Info("pruned done mail", "messages", n)
	}
}

// The services' dependencies: each service gets what it needs of the
// supervisor, not the supervisor.

func (s *Supervisor) flowDeps() flowDeps {
	d := flowDeps{Store: s.store, Poster: s.poster, Protocol: s.protocol, Raise: s.raise, Emit: s.bus.emit,
		Clock: s.clock, Log: s.log, Workflows: s.cfg.Workflows, AfterQA: s.cfg.Merge.AfterQA,
		Local: func(agent string) bool { _, ok := s.lookup(agent); return ok },
		Wake: func(agent string) {
			if r, ok := s.lookup(agent); ok {
				r.poke(false)
			}
		},
		PokeMerges: func() { s.merges.poke() }}
	d.Git, _ = s.opts.Worktrees.(WorkflowGit)
	d.Queue, _ = s.opts.Worktrees.(QueueGit)
	return d
}

func (s *Supervisor) ackDeps() ackDeps {
	return ackDeps{Store: s.store, Poster: s.poster, Raise: s.Raise, Clock: s.clock, Log: s.log, PingTimeout: s.opts.PingTimeout}
}

func (s *Supervisor) leaseDeps() leaseDeps {
	return leaseDeps{Store: s.store, Holder: s.opts.Holder, Heartbeat: s.cfg.Liveness.Heartbeat, Agents: s.AgentNames, Log: s.log, WhileAway: s.whileAway}
}

func (s *Supervisor) deskDeps() deskDeps {
	return deskDeps{Store: s.store, Clock: s.clock, Log: s.log, Notify: s.cfg.Notify, Root: s.cfg.Root, Emit: s.bus.emit,
		Escalated: func(agent string) {
			if r, ok := s.lookup(agent); ok {
				r.escalated()
			}
		},
		PokeTeam: func() { s.team.poke() }}
}

func (s *Supervisor) launchDeps() launchDeps {
	return launchDeps{Store: s.store, Protocol: s.protocol, Raise: s.Raise, Emit: s.bus.emit, Clock: s.clock, Log: s.log,
		Members: teamMembers(s.cfg), Agents: s.AgentNames,
		Local: func(agent string) bool { _, ok := s.lookup(agent); return ok },
		Stopped: func() bool {
			for _, r := range s.allRunners() {
				if r.state != lifecycle.Stopped {
					return false
				}
			}
			return true
		},
		Preflight: func(ctx context.Context) error {
			if s.probed {
				return nil
			}
			return s.Preflight(ctx)
		},
		Ensure: func(ctx context.Context, agent string) error {
			_, _, err := s.opts.Worktrees.Ensure(ctx, agent)
			return err
		},
		Stop: s.RequestStop}
}

func (s *Supervisor) budgetBook() budgetBook {
	return budgetBook{Store: s.store, Clock: s.clock, Log: s.log,
		Swarm:     func() config.Budget { return s.budgets().Swarm() },
		Prices:    s.prices,
		EngineFor: func(a config.Agent) (config.Engine, error) { return s.cfg.EngineFor(a, s.opts.EngineOverride) },
		Raise:     s.raise, Changed: s.EscalationChanged}
}
