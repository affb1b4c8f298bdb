// Package sqlstore is the swarm's store written once: every business rule
// of mailbox.Store and mailbox.Tx (reply threading, ACK closing,
// compare-and-set transitions, recovery, lease fences) as SQL over a small
// seam, Conn and Dialect, that mailbox/sqlite and mailbox/postgres fill in.
// A backend keeps only what truly differs: its connection, its error
// mapping, its migrations runner, its change feed and its leases.
//
// Statements are written in SQLite's spelling: parameters as ? (or ?N,
// the N-th), booleans stored as 0/1 integers and read back as `col <> 0`,
// IN lists spelled out (In). mailbox/postgres rebinds them to $N and
// passes booleans and named string types as PostgreSQL expects.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mailbox"
)

// Result is what a statement changed.
type Result interface {
	RowsAffected() (int64, error)
}

// Rows is a query's result set, read as database/sql reads it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Row is one row of a query; Scan returns an error that is
// sql.ErrNoRows when there is none.
type Row interface {
	Scan(dest ...any) error
}

// Querier runs statements, alone or inside a transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) Row
}

// Conn is a backend's database: statements alone (the Querier), and
// transactions.
type Conn interface {
	Querier
	// InTx runs fn in one transaction and commits it when fn returns nil.
	// SQLite's take the write lock at BEGIN; PostgreSQL's are read
	// committed, their writes serialised by row locks (Dialect.ShareLock).
	InTx(ctx context.Context, fn func(q Querier) error) error
}

// Dialect is what the SQL of the two backends cannot say alike.
type Dialect struct {
	// Unique reports whether err is a unique violation and, if so, what
	// it names (the index or the columns), for telling them apart.
	Unique func(err error) (string, bool)
	// ForeignKey reports whether err is a foreign key violation.
	ForeignKey func(err error) bool
	// ShareLock ends the fence's read of a lease row: PostgreSQL's
	// " FOR SHARE" makes a takeover wait for the fenced write; SQLite
	// needs none, its transaction holds the write lock from BEGIN.
	ShareLock string
	// Contains is the condition that text column col contains the
	// parameter (a plain substring, no patterns).
	Contains func(col string) string
	// AppendInt is the expression that appends the parameter, an
	// integer, to the JSON array in text column col.
	AppendInt func(col string) string
	// LockTable, when set, is the statement that makes a transaction's
	// writes to table wait for another's (readers go on): PostgreSQL's
	// LOCK TABLE. SQLite's transactions are serial already.
	LockTable func(table string) string
	// AfterPrune, when set, runs after Prune deleted mail: SQLite
	// truncates its WAL; PostgreSQL leaves the space to autovacuum.
	AfterPrune string
	// InsertMessage runs the statement that stores m and returns its
	// row, read as MessageCols: SQLite's prepared statement; PostgreSQL's
	// under the advisory lock that makes ids commit in order.
	InsertMessage func(ctx context.Context, q Querier, m NewMessage) Row
}

// Store is mailbox.Store's rules over a backend's Conn. A backend embeds
// it and adds its own Open, Close, Feed and leases.
type Store struct {
	db      Conn // unexported: no caller outside mailbox runs SQL through a store
	dialect Dialect
	Now     func() time.Time
	// Fences are the leases this process claimed: its writes about their
	// agents are fenced (see Tx.fence).
	Fences mailbox.Fences
}

// New returns the store over db; now nil means time.Now.
func New(db Conn, d Dialect, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, dialect: d, Now: now}
}

// Tx is a transaction: mailbox.Tx over one Querier.
type Tx struct {
	q   Querier
	ctx context.Context // the InTx context: operations inside use it
	s   *Store

	checked map[string]bool // agents whose fence this transaction checked
}

var _ mailbox.Tx = (*Tx)(nil)

// newTx is the transaction over q, a Querier Conn.InTx handed out.
func (s *Store) newTx(ctx context.Context, q Querier) *Tx {
	return &Tx{q: q, ctx: ctx, s: s}
}

func (t *Tx) now() int64 { return nanos(t.s.Now()) }

// InTx runs fn in one transaction. fn must only use tx (SQLite's store
// has a single connection: a Store call inside fn would wait on itself).
func (s *Store) InTx(ctx context.Context, fn func(tx mailbox.Tx) error) error {
	return s.db.InTx(ctx, func(q Querier) error { return fn(s.newTx(ctx, q)) })
}

// Meta reads a swarm-wide setting.
func (s *Store) Meta(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read meta %s: %w", key, err)
	}
	return v, true, nil
}

// SetMeta writes a swarm-wide setting.
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return fmt.Errorf("write meta %s: %w", key, err)
	}
	return nil
}

// LeaseRow reads agent's lease row; found false when there is none.
// lock ends the statement (Dialect.ShareLock inside a fence).
func LeaseRow(ctx context.Context, q Querier, agent, lock string) (mailbox.Lease, bool, error) {
	l, err := scanLease(q.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases WHERE agent = ?`+lock, agent))
	if errors.Is(err, sql.ErrNoRows) {
		return l, false, nil
	}
	return l, err == nil, err
}

const leaseCols = `agent, holder_host, holder_pid, epoch, acquired_at, heartbeat_at`

func scanLease(sc Row) (mailbox.Lease, error) {
	var l mailbox.Lease
	var acq, hb int64
	err := sc.Scan(&l.Agent, &l.Holder.Host, &l.Holder.PID, &l.Epoch, &acq, &hb)
	l.AcquiredAt, l.HeartbeatAt = fromNanos(acq), fromNanos(hb)
	return l, err
}

// AgentLeases lists every lease, by agent.
func (s *Store) AgentLeases(ctx context.Context) ([]mailbox.Lease, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+leaseCols+` FROM leases ORDER BY agent`)
	out, err := list(rows, err, scanLease)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

// fence checks, inside the transaction, that the lease this process
// claimed for agent is still its own at the same epoch, and refuses the
// write with ErrLeaseLost otherwise. An agent this process did not claim
// is not fenced. No claim can slip in between the check and the write:
// SQLite's transaction holds the write lock from BEGIN, and PostgreSQL's
// FOR SHARE (Dialect.ShareLock) holds the lease row until commit.
func (t *Tx) fence(agent string) error {
	fe, ok := t.s.Fences.Of(agent)
	if !ok || t.checked[agent] {
		return nil
	}
	row, found, err := LeaseRow(t.ctx, t.q, agent, t.s.dialect.ShareLock)
	if err != nil {
		return fmt.Errorf("check the lease of %s: %w", agent, err)
	}
	if err := mailbox.CheckFence(agent, fe, row, found); err != nil {
		return err
	}
	if t.checked == nil {
		t.checked = map[string]bool{}
	}
	t.checked[agent] = true
	return nil
}

// fenced runs a write about agent: alone when this process holds no lease
// of it, else in a transaction behind the lease's fence.
func (s *Store) fenced(ctx context.Context, agent string, fn func(q Querier) error) error {
	if _, ok := s.Fences.Of(agent); !ok {
		return fn(s.db)
	}
	return s.db.InTx(ctx, func(q Querier) error {
		if err := s.newTx(ctx, q).fence(agent); err != nil {
			return err
		}
		return fn(q)
	})
}

func nanos(t time.Time) int64 { return t.UTC().UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// In is n comma-separated parameters, for an IN list.
func In(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// list reads every row of a query with scan, and closes the rows.
func list[T any](rows Rows, err error, scan func(Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// appendAll appends xs to a statement's arguments.
func appendAll[T any](args []any, xs []T) []any {
	for _, x := range xs {
		args = append(args, x)
	}
	return args
}

func optTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

func optNanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return nanos(*t)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
