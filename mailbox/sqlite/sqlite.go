// Package sqlite is the embedded Store: one SQLite database file per swarm
// (.swarm/swarm.db), through the pure-Go modernc.org/sqlite driver. The
// store's rules are mailbox/sqlstore's; this package is their SQLite
// adapter (conn.go), the migrations runner, the data_version change feed,
// heartbeat leases and the guard against a busy, full or vanished file.
//
// Every process opens the database with the same DSN: WAL, busy_timeout
// 5000, synchronous NORMAL, foreign keys on and _txlock=immediate. Without
// immediate transactions, writers in different processes hit SQLITE_BUSY
// despite the busy timeout, because a deferred transaction that upgrades to
// a write lock cannot wait. One connection per process keeps writes serial
// inside the process and lets PRAGMA data_version see other processes'
// writes, which is what the change feed polls.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlstore"
	"github.com/swarmhq/swarm/migrations"
)

// Options configure a Store.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OpenTimeout bounds the retries of SQLITE_BUSY while the database is
	// switched to WAL by several processes at once. Zero means 5 s.
	OpenTimeout time.Duration
	// BusyTimeout is SQLite's busy_timeout: how long one statement waits
	// for another process's write lock. Zero means 5 s.
	BusyTimeout time.Duration
	// BusyWait is how long a write keeps retrying, with backoff, once a
	// wait of BusyTimeout found the database still busy. Zero means 1 min;
	// after it the error is one Unavailable reports, so a runner waits on.
	BusyWait time.Duration
	// Busy, when set, is called each time a write found the database busy
	// and is about to retry (tests wait on it).
	Busy func()
}

// Store is an open SQLite swarm database.
type Store struct {
	*sqlstore.Store // the rules, over conn and dialect
	db              *guarded
	insert          *sql.Stmt // prepared once: parsing the insert costs as much as running it
	path            string
	id              fileID // the database file's identity when opened
}

var _ mailbox.Store = (*Store)(nil)

// dsn returns the connection string for path with swarm's pragmas.
func dsn(path string, busy time.Duration) string {
	if busy <= 0 {
		busy = 5 * time.Second
	}
	u := url.URL{Scheme: "file", Path: path}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
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
	db, err := openDB(path, opts.BusyTimeout)
	if err != nil {
		return nil, err
	}
	timeout := opts.OpenTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	if err := retryBusy(ctx, timeout, func() error { return migrate(ctx, db) }); err != nil {
		db.Close()
		return nil, explain(path, err)
	}
	insert, err := db.PrepareContext(ctx, insertSQL)
	if err != nil {
		db.Close()
		return nil, explain(path, err)
	}
	id, err := identify(path)
	if err != nil {
		db.Close()
		return nil, explain(path, err)
	}
	wait := opts.BusyWait
	if wait == 0 {
		wait = time.Minute
	}
	g := &guarded{DB: db, path: path, wait: wait, busy: opts.Busy}
	s := &Store{db: g, insert: insert, path: path, id: id}
	s.Store = sqlstore.New(conn{s}, s.dialect(), opts.Now)
	return s, nil
}

func openDB(path string, busy time.Duration) (*sql.DB, error) {
	db := sql.OpenDB(damageConnector{dsn: dsn(path, busy)})
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// explain turns an open failure into advice: a corrupt file names itself
// and the way out.
func explain(path string, err error) error {
	var full *mailbox.DiskFullError
	if err = diskFull(path, err); errors.As(err, &full) {
		return fmt.Errorf("open database: %w", err)
	}
	if Damaged(err) {
		return fmt.Errorf("open database %s: %w; %s", path, err, DamagedAdvice(path))
	}
	return fmt.Errorf("open database %s: %w", path, err)
}

// Damaged reports whether err, anywhere in its chain, says the database
// file is damaged: mailbox.ErrDamaged, which every error of the driver
// with SQLITE_CORRUPT or SQLITE_NOTADB wraps (damage.go). Damage can show
// long after Open, in any read or write; callers add DamagedAdvice then.
func Damaged(err error) bool { return errors.Is(markDamage(err), mailbox.ErrDamaged) }

// DamagedAdvice says what to do about a damaged database file at path.
func DamagedAdvice(path string) string {
	return fmt.Sprintf("the file is damaged: run 'swarm doctor', and recover what it holds with 'sqlite3 %s .recover | sqlite3 recovered.db'", path)
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
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
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

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED.
func isBusy(err error) bool {
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

// migrate brings the database up to the newest migration. Each runs in its
// own immediate transaction that also records its number, so when several
// processes open a fresh database at once, exactly one applies it. Those
// already recorded are skipped after one plain read: every command opens
// the store, and an immediate transaction per migration took the write lock
// a dozen times per command, against the supervisor's writes.
func migrate(ctx context.Context, db *sql.DB) error {
	all, err := migrations.For("sqlite")
	if err != nil {
		return err
	}
	done, err := appliedMigrations(ctx, db)
	if err != nil {
		return err
	}
	for _, m := range all {
		if done[m.Version] {
			continue
		}
		if err := applyMigration(ctx, db, m); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// appliedMigrations reads the recorded migrations without a transaction; a
// database without the table has none. A migration recorded is never
// undone, so what it says stays true; the rest are checked again inside
// their transaction.
func appliedMigrations(ctx context.Context, db *sql.DB) (map[int]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		done[v] = true
	}
	return done, rows.Err()
}

func applyMigration(ctx context.Context, db *sql.DB, m migrations.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// SchemaVersion returns the newest applied migration, 0 for an empty
// database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return 0, nil
	}
	return int(v.Int64), err
}

// Close closes the database.
func (s *Store) Close() error {
	s.insert.Close()
	return s.db.Close()
}

// Location is the database file.
func (s *Store) Location() string { return s.path }

// Check runs PRAGMA integrity_check and returns its first line.
func (s *Store) Check(ctx context.Context) (string, error) {
	if err := s.checkFile(); err != nil {
		return "", err
	}
	var res string
	err := s.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res)
	return res, err
}

// Feed polls PRAGMA data_version every interval: it changes when another
// process commits. Each poll is a single statement, so no read transaction
// stays open (an open one would let the WAL grow without bound).
func (s *Store) Feed(ctx context.Context, every time.Duration) (mailbox.Feed, error) {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	f := &feed{s: s, every: every}
	v, err := s.dataVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("read data_version: %w", err)
	}
	f.last = v
	return f, nil
}

type feed struct {
	s     *Store
	every time.Duration
	last  int64
}

func (f *feed) Wait(ctx context.Context) error {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			// The supervisor's poll is where a deleted or replaced
			// database is noticed: it ends the watch, and the swarm.
			if err := f.s.checkFile(); err != nil {
				return err
			}
			v, err := f.s.dataVersion(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				return fmt.Errorf("read data_version: %w", err)
			}
			if v != f.last {
				f.last = v
				return nil
			}
		}
	}
}

func (f *feed) Close() error { return nil }

func (s *Store) dataVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	return v, err
}

// Unavailable reports a database still busy after the store's own
// retries (BusyWait): another process held the write lock all that time,
// nothing was committed, and the call may succeed later. A local file
// does not otherwise go away for a moment.
func (s *Store) Unavailable(err error) bool { return isBusy(err) }

// tx runs fn in one immediate transaction, once the database file is
// known to be the one opened. A full disk is said so, whether a statement
// or the commit found it.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := s.checkFile(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.db.explain(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback() //nolint:errcheck // the fn error matters more
		return s.db.explain(err)
	}
	return s.db.explain(tx.Commit())
}

func nanos(t time.Time) int64 { return t.UTC().UnixNano() }
