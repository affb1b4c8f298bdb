package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlstore"
)

// ClaimLeases takes the agents' leases for c.Holder in one transaction.
// SQLite has no session locks that die with a process, so a lease is alive
// while its heartbeat is younger than c.TTL and c.Gone does not say
// otherwise.
func (s *Store) ClaimLeases(ctx context.Context, c mailbox.LeaseClaim) (mailbox.Leases, error) {
	agents := slices.Clone(c.Agents)
	slices.Sort(agents)
	agents = slices.Compact(agents)
	var held []mailbox.Lease
	epochs := map[string]int64{}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		held = nil
		now := s.Now()
		for _, a := range agents {
			l, ok, err := leaseRow(ctx, tx, a)
			if err != nil {
				return err
			}
			if ok && l.Holder != c.Holder {
				stale := c.TTL > 0 && now.Sub(l.HeartbeatAt) > c.TTL
				gone := c.Gone != nil && c.Gone(l.Holder)
				if !stale && !gone {
					held = append(held, l)
					continue
				}
			}
			acquired := now
			if ok && l.Holder == c.Holder {
				acquired = l.AcquiredAt
			}
			// A claim that changes hands is a new epoch: writes fenced
			// with an older one are refused from now on. The holder's own
			// claim keeps its epoch, so its earlier claims stay valid.
			var epoch int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO leases (agent, holder_host, holder_pid, acquired_at, heartbeat_at, epoch)
				VALUES (?, ?, ?, ?, ?, 1)
				ON CONFLICT (agent) DO UPDATE SET holder_host = excluded.holder_host, holder_pid = excluded.holder_pid,
					acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at,
					epoch = CASE WHEN leases.holder_host = excluded.holder_host AND leases.holder_pid = excluded.holder_pid
						THEN leases.epoch ELSE leases.epoch + 1 END
				RETURNING epoch`,
				a, c.Holder.Host, c.Holder.PID, nanos(acquired), nanos(now)).Scan(&epoch); err != nil {
				return err
			}
			epochs[a] = epoch
		}
		if len(held) > 0 {
			return errHeld
		}
		return nil
	})
	if len(held) > 0 {
		return nil, &mailbox.HeldError{Held: held}
	}
	if err != nil {
		return nil, fmt.Errorf("claim leases: %w", err)
	}
	for _, a := range agents {
		s.Fences.Set(a, mailbox.Fence{Holder: c.Holder, Epoch: epochs[a]})
	}
	return &leases{s: s, holder: c.Holder, agents: agents, epochs: epochs}, nil
}

// errHeld rolls a refused claim back; ClaimLeases turns it into a
// HeldError.
var errHeld = fmt.Errorf("held")

func leaseRow(ctx context.Context, tx *sql.Tx, agent string) (mailbox.Lease, bool, error) {
	return sqlstore.LeaseRow(ctx, txq{tx}, agent, "")
}

// leases is a granted claim.
type leases struct {
	s      *Store
	holder mailbox.Holder
	agents []string
	epochs map[string]int64 // the epoch the claim got, by agent

	mu       sync.Mutex
	released bool
}

// Renew moves the heartbeat of the claim's leases; a lease whose row names
// another holder now was taken over.
func (l *leases) Renew(ctx context.Context) error {
	var lost []string
	err := l.s.tx(ctx, func(tx *sql.Tx) error {
		lost = nil
		for _, a := range l.agents {
			res, err := tx.ExecContext(ctx, `UPDATE leases SET heartbeat_at = ? WHERE agent = ? AND holder_host = ? AND holder_pid = ? AND epoch = ?`,
				nanos(l.s.Now()), a, l.holder.Host, l.holder.PID, l.epochs[a])
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				lost = append(lost, a)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("renew leases: %w", err)
	}
	if len(lost) > 0 {
		return fmt.Errorf("%w: %s", mailbox.ErrLeaseLost, strings.Join(lost, ", "))
	}
	return nil
}

// Release deletes the claim's rows that still name its holder.
func (l *leases) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	err := l.s.tx(ctx, func(tx *sql.Tx) error {
		for _, a := range l.agents {
			if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE agent = ? AND holder_host = ? AND holder_pid = ? AND epoch = ?`,
				a, l.holder.Host, l.holder.PID, l.epochs[a]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	l.released = true
	for _, a := range l.agents {
		l.s.Fences.Drop(a, mailbox.Fence{Holder: l.holder, Epoch: l.epochs[a]})
	}
	return nil
}
