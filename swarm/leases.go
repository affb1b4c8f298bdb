package swarm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/proc"
)

// ThisHolder names this process in the agents' leases: the host's name and
// the pid.
func ThisHolder() mailbox.Holder {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return mailbox.Holder{Host: host, PID: os.Getpid()}
}

// leaseTTL is how long a lease lives without a renewal, where the store
// cannot tell by itself that its holder died: three missed heartbeats.
func (s *Supervisor) leaseTTL() time.Duration { return 3 * s.cfg.Liveness.Heartbeat }

// Claim makes this supervisor the one that runs its agents (DESIGN §12),
// before anything of theirs is touched. A live supervisor elsewhere
// holding one of them refuses the start and is named; one that is gone is
// taken over. On this host, a holder whose pid no longer runs is gone.
// Run claims if the caller did not; Release (or Run's end) gives them up.
func (s *Supervisor) Claim(ctx context.Context) error {
	if s.leases != nil {
		return nil
	}
	me := s.opts.Holder
	var l mailbox.Leases
	err := s.whileAway(ctx, "claim leases", func() (err error) {
		l, err = s.store.ClaimLeases(ctx, mailbox.LeaseClaim{
			Holder: me, Agents: s.AgentNames(), TTL: s.leaseTTL(),
			Gone: func(h mailbox.Holder) bool { return h.Host == me.Host && !proc.Alive(h.PID) },
		})
		return err
	})
	var he *mailbox.HeldError
	if errors.As(err, &he) {
		return fmt.Errorf("cannot run these agents here: %w; stop that supervisor ('swarm down' in its clone), or choose other agents with --agents", he)
	}
	if err != nil {
		return err
	}
	s.leases = l
	for _, a := range s.AgentNames() {
		s.log.Info("lease taken", "agent", a, "holder", me.String())
	}
	return nil
}

// claimMore claims the lease of an agent spawned while Run runs, beside
// the claim Claim made; renewLeases and Release keep it with the others.
func (s *Supervisor) claimMore(ctx context.Context, agent string) error {
	if s.leases == nil {
		return nil
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if slices.Contains(s.claimed, agent) {
		return nil
	}
	me := s.opts.Holder
	l, err := s.store.ClaimLeases(ctx, mailbox.LeaseClaim{
		Holder: me, Agents: []string{agent}, TTL: s.leaseTTL(),
		Gone: func(h mailbox.Holder) bool { return h.Host == me.Host && !proc.Alive(h.PID) },
	})
	var he *mailbox.HeldError
	if errors.As(err, &he) {
		return fmt.Errorf("cannot run %s here: %w", agent, he)
	}
	if err != nil {
		return err
	}
	s.more = append(s.more, l)
	s.claimed = append(s.claimed, agent)
	s.log.Info("lease taken", "agent", agent, "holder", me.String())
	return nil
}

// allLeases is the first claim and the spawned agents' claims.
func (s *Supervisor) allLeases() []mailbox.Leases {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return append([]mailbox.Leases{s.leases}, s.more...)
}

// renewLeases is the leases service: it renews them every heartbeat. A
// lease another supervisor took over stops the swarm, since two runners
// for one agent would corrupt its sessions; a renewal that merely failed
// (the database away for a moment) is retried at the next beat.
func (s *Supervisor) renewLeases(ctx context.Context) error {
	if s.leases == nil {
		return nil
	}
	t := time.NewTicker(s.cfg.Liveness.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var err error
		for _, l := range s.allLeases() {
			if e := l.Renew(ctx); e != nil && err == nil {
				err = e
			}
		}
		switch {
		case errors.Is(err, mailbox.ErrLeaseLost):
			return fmt.Errorf("%w; this supervisor stops so that only one runs each agent", err)
		case err != nil && ctx.Err() == nil:
			s.log.Warn("renew leases", "err", err)
		}
	}
}

// Release gives the agents up; Run calls it once every runner stopped.
func (s *Supervisor) Release() {
	if s.leases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range s.allLeases() {
		if err := l.Release(ctx); err != nil {
			s.log.Warn("release leases", "err", err)
		}
	}
}
