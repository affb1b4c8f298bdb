// Package mailbox is swarm's SQLite store: messages with their delivery
// records, and the agents, sessions and events tables the supervisor keeps.
//
// Delivery semantics: a message is queued until the recipient's next
// BuildingPrompt delivers it into session N. If session N completes, the
// message is done; if it is interrupted, crashes or fails, the message is
// queued again and counts as shown once more. Nothing is lost, and nothing is
// shown twice to a session that completed.
//
// Every process opens the database with the same DSN: WAL, busy_timeout 5000,
// synchronous NORMAL, foreign keys on and _txlock=immediate. Without
// immediate transactions, writers in different processes hit SQLITE_BUSY
// despite the busy timeout, because a deferred transaction that upgrades to
// a write lock cannot wait. One connection per process keeps writes serial
// inside the process and lets PRAGMA data_version see other processes' writes.
package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/swarmhq/swarm/migrations"
)

// Options configure a Store.
type Options struct {
	// Agents are the names in swarm.toml. Mail can be addressed to them and
	// to operator.
	Agents []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OpenTimeout bounds the retries of SQLITE_BUSY while the database is
	// switched to WAL by several processes at once. Zero means 5 s.
	OpenTimeout time.Duration
}

// Store is an open swarm database.
type Store struct {
	db     *sql.DB
	insert *sql.Stmt // prepared once: parsing the insert costs as much as running it
	path   string
	agents []string
	now    func() time.Time
}

// DSN returns the connection string for path with swarm's pragmas.
func DSN(path string) string {
	u := url.URL{Scheme: "file", Path: path}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	u.RawQuery = q.Encode()
	return u.String()
}

// Open opens (creating if needed) and migrates the database at path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)

	timeout := opts.OpenTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	if err := retryBusy(ctx, timeout, func() error {
		_, err := migrations.Apply(ctx, db)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	insert, err := db.PrepareContext(ctx, insertSQL)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, insert: insert, path: path, agents: opts.Agents, now: now}, nil
}

// retryBusy runs fn until it succeeds, fails with something other than
// SQLITE_BUSY, or timeout passes. The WAL switch on a fresh database takes
// an exclusive lock that busy_timeout does not cover, so a few of many
// simultaneous opens fail without this.
func retryBusy(ctx context.Context, timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		err := fn()
		if err == nil || !IsBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// IsBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED.
func IsBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}

func isForeignKey(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// Close closes the database.
func (s *Store) Close() error {
	s.insert.Close()
	return s.db.Close()
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// DB exposes the handle for the packages' own tests and benchmarks.
func (s *Store) DB() *sql.DB { return s.db }

// SetAgents replaces the names mail may be addressed to.
func (s *Store) SetAgents(names []string) { s.agents = append([]string(nil), names...) }

// AgentNames returns the names mail may be addressed to, besides operator.
func (s *Store) AgentNames() []string { return append([]string(nil), s.agents...) }

// DataVersion returns SQLite's data_version for this connection. It changes
// when another process commits, which is the supervisor's fallback wake-up.
// It is a single statement, so no read transaction stays open.
func (s *Store) DataVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	return v, err
}

// IntegrityCheck runs PRAGMA integrity_check and returns its first line.
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	var res string
	err := s.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res)
	return res, err
}

// tx runs fn in one immediate transaction.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback() //nolint:errcheck // the fn error matters more
		return err
	}
	return tx.Commit()
}

func nanos(t time.Time) int64 { return t.UTC().UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }
