package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/swarmhq/swarm/mailbox"
)

// lockKey is the advisory-lock key of an agent's lease, computed by the
// server so every host agrees on it.
const lockKey = `hashtextextended('swarm-lease:' || $1, 0)`

// ClaimLeases takes the agents' leases for c.Holder. Liveness is the
// holder's session-level advisory lock on each agent, held on a connection
// of its own for as long as it runs: PostgreSQL frees the lock when that
// connection ends, so a killed supervisor's agents can be taken over at
// once, and a live one's cannot, however late its heartbeat. c.TTL and
// c.Gone are not needed here.
func (s *Store) ClaimLeases(ctx context.Context, c mailbox.LeaseClaim) (mailbox.Leases, error) {
	agents := slices.Clone(c.Agents)
	slices.Sort(agents)
	agents = slices.Compact(agents)
	l := &leases{s: s, holder: c.Holder, agents: agents}
	conn, held, err := s.lockAgents(ctx, agents)
	if err != nil {
		return nil, fmt.Errorf("claim leases: %w", err)
	}
	if len(held) > 0 {
		conn.Close(context.WithoutCancel(ctx))
		rows, err := s.AgentLeases(ctx)
		if err != nil {
			return nil, err
		}
		he := &mailbox.HeldError{}
		for _, a := range held {
			i := slices.IndexFunc(rows, func(r mailbox.Lease) bool { return r.Agent == a })
			if i < 0 {
				// Locked, but its row is not written yet (or no longer):
				// a claim or a release in flight.
				he.Held = append(he.Held, mailbox.Lease{Agent: a, Holder: mailbox.Holder{Host: "another supervisor (starting or stopping)"}, AcquiredAt: s.Now()})
				continue
			}
			he.Held = append(he.Held, rows[i])
		}
		return nil, he
	}
	l.conn = conn
	s.mu.Lock()
	if s.held == nil {
		s.held = map[*leases]bool{}
	}
	s.held[l] = true
	s.mu.Unlock()
	now := nanos(s.Now())
	epochs := map[string]int64{}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// A holder frozen in the middle of a write keeps its row locked
		// for as long as its connection lives: give up after a while
		// rather than hang (the claim can be made again).
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
			return err
		}
		for _, a := range agents {
			// The lock is ours: whoever the row names is gone, or is us.
			// A claim that changes hands is a new epoch: writes fenced
			// with an older one are refused from now on. The holder's own
			// claim keeps its epoch, so its earlier claims stay valid. A
			// write of the old holder still in flight holds the row (FOR
			// SHARE), so this waits for it.
			var epoch int64
			if err := tx.QueryRow(ctx, `INSERT INTO leases (agent, holder_host, holder_pid, acquired_at, heartbeat_at, epoch)
				VALUES ($1, $2, $3, $4, $4, 1)
				ON CONFLICT (agent) DO UPDATE SET holder_host = excluded.holder_host, holder_pid = excluded.holder_pid,
					heartbeat_at = excluded.heartbeat_at,
					epoch = CASE WHEN leases.holder_host = excluded.holder_host AND leases.holder_pid = excluded.holder_pid
						THEN leases.epoch ELSE leases.epoch + 1 END,
					acquired_at = CASE WHEN leases.holder_host = excluded.holder_host AND leases.holder_pid = excluded.holder_pid
						THEN leases.acquired_at ELSE excluded.acquired_at END
				RETURNING epoch`,
				a, c.Holder.Host, c.Holder.PID, now).Scan(&epoch); err != nil {
				return err
			}
			epochs[a] = epoch
		}
		return nil
	})
	if err != nil {
		l.drop()
		return nil, fmt.Errorf("claim leases: %w", err)
	}
	l.epochs = epochs
	for _, a := range agents {
		s.Fences.Set(a, mailbox.Fence{Holder: c.Holder, Epoch: epochs[a]})
	}
	return l, nil
}

// lockAgents opens a connection of its own (out of the pool, so its locks
// never leak to another user of it) and takes each agent's advisory lock
// on it. It returns the agents whose lock another session holds; the
// caller closes the connection.
func (s *Store) lockAgents(ctx context.Context, agents []string) (*pgx.Conn, []string, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	conn := pc.Hijack()
	held, err := tryLocks(ctx, conn, agents)
	// A holder that has just stopped or died may keep its locks a moment
	// longer: its server process ends shortly after its connection closes.
	// Ask again for a little while before calling the agents held.
	for pause := 20 * time.Millisecond; err == nil && len(held) > 0 && pause <= 320*time.Millisecond; pause *= 2 {
		select {
		case <-ctx.Done():
			err = context.Cause(ctx)
		case <-time.After(pause):
			held, err = tryLocks(ctx, conn, held)
		}
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return conn, held, nil
}

// tryLocks takes each agent's lease lock on conn if it is free, and returns
// the agents whose lock another session holds.
func tryLocks(ctx context.Context, conn *pgx.Conn, agents []string) ([]string, error) {
	var held []string
	for _, a := range agents {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+lockKey+`)`, a).Scan(&ok); err != nil {
			return nil, err
		}
		if !ok {
			held = append(held, a)
		}
	}
	return held, nil
}

// leases is a granted claim and the connection that holds its locks.
type leases struct {
	s      *Store
	holder mailbox.Holder
	agents []string
	epochs map[string]int64 // the epoch the claim got, by agent

	mu       sync.Mutex
	conn     *pgx.Conn // nil after a lost connection, until Renew locks again
	released bool
}

// Renew moves the claim's heartbeats. When the lock connection was lost
// (a server restart, a network cut), it locks the agents again first: a
// lock someone else took in between, or a row naming someone else, means
// the lease was taken over.
func (l *leases) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return errors.New("renew leases: released")
	}
	if l.conn != nil && l.conn.Ping(ctx) != nil {
		l.conn.Close(context.WithoutCancel(ctx))
		l.conn = nil
	}
	if l.conn == nil {
		conn, held, err := l.s.lockAgents(ctx, l.agents)
		if err != nil {
			return fmt.Errorf("renew leases: lock again: %w", err)
		}
		if len(held) > 0 {
			conn.Close(context.WithoutCancel(ctx))
			return fmt.Errorf("%w: %s", mailbox.ErrLeaseLost, strings.Join(held, ", "))
		}
		l.conn = conn
	}
	rows, err := l.conn.Query(ctx, `UPDATE leases SET heartbeat_at = $1 WHERE agent = ANY($2) AND holder_host = $3 AND holder_pid = $4
		RETURNING agent, epoch`,
		nanos(l.s.Now()), l.agents, l.holder.Host, l.holder.PID)
	if err != nil {
		return fmt.Errorf("renew leases: %w", err)
	}
	type renewal struct {
		Agent string
		Epoch int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[renewal])
	if err != nil {
		return fmt.Errorf("renew leases: %w", err)
	}
	var renewed []string
	for _, r := range got {
		// A row of ours at another epoch is a later claim's, not this one's.
		if r.Epoch == l.epochs[r.Agent] {
			renewed = append(renewed, r.Agent)
		}
	}
	var lost []string
	for _, a := range l.agents {
		if !slices.Contains(renewed, a) {
			lost = append(lost, a)
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("%w: %s", mailbox.ErrLeaseLost, strings.Join(lost, ", "))
	}
	return nil
}

// Release deletes the claim's rows that still name its holder, then closes
// the lock connection, which frees the locks.
func (l *leases) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	var err error
	for _, a := range l.agents {
		if _, e := l.s.pool.Exec(ctx, `DELETE FROM leases WHERE agent = $1 AND holder_host = $2 AND holder_pid = $3 AND epoch = $4`,
			a, l.holder.Host, l.holder.PID, l.epochs[a]); e != nil && err == nil {
			err = e
		}
	}
	if l.conn != nil {
		l.conn.Close(context.WithoutCancel(ctx))
		l.conn = nil
	}
	if err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	l.released = true
	l.s.mu.Lock()
	delete(l.s.held, l)
	l.s.mu.Unlock()
	for _, a := range l.agents {
		l.s.Fences.Drop(a, mailbox.Fence{Holder: l.holder, Epoch: l.epochs[a]})
	}
	return nil
}

// drop closes the lock connection without deleting the rows, as a crash
// would: the locks are free, and the rows name a holder that is gone.
func (l *leases) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close(context.Background())
		l.conn = nil
	}
	l.released = true
}
