package mailbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Holder is a supervisor that runs agents: the host it runs on and its
// pid there. Several supervisors share one database when the swarm spans
// hosts (PostgreSQL); each agent is run by at most one of them.
type Holder struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

// String is the holder as status prints it: <hostname>:<pid>.
func (h Holder) String() string { return fmt.Sprintf("%s:%d", h.Host, h.PID) }

// Lease is an agent's ownership by a supervisor: who holds it, since when,
// when it last renewed it, and its epoch (bumped by every claim).
type Lease struct {
	Agent       string    `json:"agent"`
	Holder      Holder    `json:"holder"`
	Epoch       int64     `json:"epoch"`
	AcquiredAt  time.Time `json:"acquired_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
}

// LeaseClaim asks for the leases of Agents for Holder.
type LeaseClaim struct {
	Holder Holder
	Agents []string
	// TTL is how long a lease stays valid without a heartbeat. A backend
	// that cannot tell a live holder from a dead one by itself (SQLite)
	// takes a lease over once its heartbeat is older than this.
	TTL time.Duration
	// Gone reports what the caller knows for sure: that a holder is gone
	// (a pid on its own host that no longer runs). Nil knows nothing.
	Gone func(Holder) bool
}

// Leases is a claim that was granted: the holder keeps it by renewing it
// well within its TTL and gives it up with Release. A crash gives it up
// too: PostgreSQL drops the holder's advisory locks with its connection,
// and elsewhere the heartbeat goes stale.
type Leases interface {
	// Renew records a heartbeat for every lease of the claim. It returns
	// ErrLeaseLost (wrapped, naming the agents) when another holder took
	// one over: the caller must stop running those agents.
	Renew(ctx context.Context) error
	// Release deletes the claim's leases and frees what holds them. It is
	// safe to call more than once.
	Release(ctx context.Context) error
}

// ErrLeaseLost means a lease renewed by its holder belongs to someone else
// now: the holder was taken for gone. A write the store refused because
// its fence is stale (see Fences) wraps it too: nothing was written, and
// the caller must stop running the agent without touching its rows.
var ErrLeaseLost = errors.New("lease taken over by another supervisor")

// Fence is the lease a holder's writes about an agent are made under: the
// holder and the epoch its claim got. The store compares it with the
// lease's row in the same transaction as the write.
type Fence struct {
	Holder Holder
	Epoch  int64
}

// Fences is a store's record of the leases it granted to this process, by
// agent. While a claim is held, every write the store makes about one of
// its agents is fenced with it; a process that claimed nothing (a CLI
// command) writes unfenced. Both backends keep one.
type Fences struct {
	mu sync.Mutex
	m  map[string]Fence
}

// Set records the fence of agent's newest claim.
func (f *Fences) Set(agent string, fe Fence) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]Fence{}
	}
	f.m[agent] = fe
}

// Drop forgets agent's fence if it is still fe (a later claim keeps its
// own).
func (f *Fences) Drop(agent string, fe Fence) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[agent] == fe {
		delete(f.m, agent)
	}
}

// Of returns the fence of agent, if this process claimed it.
func (f *Fences) Of(agent string) (Fence, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fe, ok := f.m[agent]
	return fe, ok
}

// CheckFence compares a fence with the lease row found for agent (found
// false: there is none) and returns the ErrLeaseLost a stale fence means.
func CheckFence(agent string, fe Fence, row Lease, found bool) error {
	switch {
	case !found:
		return fmt.Errorf("%w: %s has no lease any more; nothing was written", ErrLeaseLost, agent)
	case row.Holder != fe.Holder || row.Epoch != fe.Epoch:
		return fmt.Errorf("%w: %s is run by the supervisor %s now (lease epoch %d, this one had %d); nothing was written",
			ErrLeaseLost, agent, row.Holder, row.Epoch, fe.Epoch)
	}
	return nil
}

// HeldError is a claim refused because live supervisors hold some of the
// agents. It names each one, so the user knows where to stop them.
type HeldError struct {
	Held []Lease
}

func (e *HeldError) Error() string {
	parts := make([]string, len(e.Held))
	for i, l := range e.Held {
		parts[i] = fmt.Sprintf("%s is run by the supervisor %s (since %s)", l.Agent, l.Holder, l.AcquiredAt.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, "; ")
}
