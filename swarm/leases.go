package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
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

// LiveHolders maps each agent to the supervisor whose lease holds it,
// leaving out the leases of supervisors on this host that are gone (a
// kill -9 leaves its lease behind until the next claim).
func LiveHolders(ctx context.Context, st mailbox.Store) (map[string]mailbox.Holder, error) {
	leases, err := st.AgentLeases(ctx)
	if err != nil {
		return nil, err
	}
	host := ThisHolder().Host
	out := make(map[string]mailbox.Holder, len(leases))
	for _, le := range leases {
		if le.Holder.Host == host && proc.Exited(le.Holder.PID) {
			continue
		}
		out[le.Agent] = le.Holder
	}
	return out, nil
}

// leaseKeeper holds this supervisor's agents' leases (DESIGN §12): claimed
// before anything is touched, renewed every heartbeat, released at the end.
type leaseKeeper struct {
	d leaseDeps

	mu      sync.Mutex
	first   mailbox.Leases   // the agents Claim took; nil until then
	more    []mailbox.Leases // the leases of agents spawned while Run runs
	claimed []string         // their agents
}

// leaseDeps is what the leases need of the supervisor.
type leaseDeps struct {
	Store     mailbox.Store
	Holder    mailbox.Holder
	Heartbeat time.Duration
	Agents    func() []string // the agents Claim takes
	Log       *slog.Logger
	// WhileAway retries a step while the database is away for a moment.
	WhileAway func(ctx context.Context, what string, fn func() error) error
}

// ttl is how long a lease lives without a renewal, where the store cannot
// tell by itself that its holder died: three missed heartbeats.
func (k *leaseKeeper) ttl() time.Duration { return 3 * k.d.Heartbeat }

// claim is one claim of agents' leases, taking over a holder on this host
// whose pid no longer runs.
func (k *leaseKeeper) claim(ctx context.Context, agents []string) (mailbox.Leases, error) {
	me := k.d.Holder
	return k.d.Store.ClaimLeases(ctx, mailbox.LeaseClaim{
		Holder: me, Agents: agents, TTL: k.ttl(),
		Gone: func(h mailbox.Holder) bool { return h.Host == me.Host && proc.Exited(h.PID) },
	})
}

// Claim makes this supervisor the one that runs its agents (DESIGN §12),
// before anything of theirs is touched. A live supervisor elsewhere
// holding one of them refuses the start and is named; one that is gone is
// taken over. On this host, a holder whose pid no longer runs is gone.
// Run claims if the caller did not; Release (or Run's end) gives them up.
func (s *Supervisor) Claim(ctx context.Context) error { return s.leases.Claim(ctx) }

// Claim takes the leases of every agent; a second call does nothing.
func (k *leaseKeeper) Claim(ctx context.Context) error {
	if k.held() {
		return nil
	}
	agents := k.d.Agents()
	var l mailbox.Leases
	err := k.d.WhileAway(ctx, "claim leases", func() (err error) {
		l, err = k.claim(ctx, agents)
		return err
	})
	var he *mailbox.HeldError
	if errors.As(err, &he) {
		return fmt.Errorf("cannot run these agents here: %w; stop that supervisor ('swarm down' in its clone), or choose other agents with --agents", he)
	}
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.first = l
	k.mu.Unlock()
	for _, a := range agents {
		k.d.Log.Info("lease taken", "agent", a, "holder", k.d.Holder.String())
	}
	return nil
}

// held reports whether Claim took the leases.
func (k *leaseKeeper) held() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.first != nil
}

// claimMore claims the lease of an agent spawned while Run runs, beside
// the claim Claim made; the leases service and Release keep it with the
// others.
func (s *Supervisor) claimMore(ctx context.Context, agent string) error {
	return s.leases.claimMore(ctx, agent)
}

func (k *leaseKeeper) claimMore(ctx context.Context, agent string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.first == nil || slices.Contains(k.claimed, agent) {
		return nil
	}
	l, err := k.claim(ctx, []string{agent})
	var he *mailbox.HeldError
	if errors.As(err, &he) {
		return fmt.Errorf("cannot run %s here: %w", agent, he)
	}
	if err != nil {
		return err
	}
	k.more = append(k.more, l)
	k.claimed = append(k.claimed, agent)
	k.d.Log.Info("lease taken", "agent", agent, "holder", k.d.Holder.String())
	return nil
}

// all is the first claim and the spawned agents' claims.
func (k *leaseKeeper) all() []mailbox.Leases {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.first == nil {
		return nil
	}
	return append([]mailbox.Leases{k.first}, k.more...)
}

// run is the leases service: it renews them every heartbeat. A lease
// another supervisor took over stops the swarm, since two runners for one
// agent would corrupt its sessions; a renewal that merely failed (the
// database away for a moment) is retried at the next beat.
func (k *leaseKeeper) run(ctx context.Context) error {
	if !k.held() {
		return nil
	}
	t := time.NewTicker(k.d.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var err error
		for _, l := range k.all() {
			if e := l.Renew(ctx); e != nil && err == nil {
				err = e
			}
		}
		switch {
		case errors.Is(err, mailbox.ErrLeaseLost):
			return fmt.Errorf("%w; this supervisor stops so that only one runs each agent", err)
		case err != nil && ctx.Err() == nil:
			k.d.Log.Warn("renew leases", "err", err)
		}
	}
}

// Release gives the agents up; Run calls it once every runner stopped.
func (s *Supervisor) Release() { s.leases.Release() }

func (k *leaseKeeper) Release() {
	ls := k.all()
	if ls == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range ls {
		if err := l.Release(ctx); err != nil {
			k.d.Log.Warn("release leases", "err", err)
		}
	}
}
