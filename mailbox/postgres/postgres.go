// Package postgres is the Store for several hosts: one PostgreSQL database
// per swarm, through pgx v5 (pure Go, no cgo, so the static binary stays
// static) and its connection pool.
//
// The store's rules are mailbox/sqlstore's, shared with mailbox/sqlite;
// this package is their PostgreSQL adapter (conn.go) and keeps their
// semantics with PostgreSQL's means:
//   - the same schema (migrations/postgres mirrors migrations/sqlite
//     number for number), times in BIGINT nanoseconds;
//   - each migration in its own transaction under an advisory lock, so
//     concurrent openers apply each once;
//   - compare-and-set transitions as UPDATE … WHERE state = $from; a
//     fenced write holds its lease row FOR SHARE until commit;
//   - every statement bounded by statement_timeout and lock_timeout, so a
//     stuck server or a held lock fails a write instead of hanging it;
//   - a message stored by one statement (INSERT … RETURNING). Message
//     inserts are serialised by a transaction-scoped advisory lock taken in
//     that statement, so ids become visible in id order: the change feed's
//     reader keeps "the newest id I read", and an id committed after a
//     higher one would be skipped for ever;
//   - the change feed hears other connections' commits through
//     LISTEN/NOTIFY (a statement trigger on every table), polls the newest
//     message id while its listening connection is down, and reports a
//     change after reconnecting so the reader re-reads.
//
// The URL never carries a password: it comes from PGPASSWORD or ~/.pgpass,
// which pgx reads itself.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/swarmhq/swarm/mailbox/dburl"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlstore"
	"github.com/swarmhq/swarm/migrations"
)

// Advisory lock keys (pg_advisory_xact_lock), in swarm's own range.
const (
	lockMigrate  int64 = 0x5357_4152_4d00_0001 // "SWARM" 1: applying migrations
	lockMessages int64 = 0x5357_4152_4d00_0002 // "SWARM" 2: one message insert at a time
)

// Channel is the LISTEN/NOTIFY channel the tables' triggers notify.
const Channel = "swarm_changes"

// Options configure a Store.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxConns caps the pool; zero means 8.
	MaxConns int32
	// OpenTimeout is how long Open keeps trying while the server is
	// restarting (starting up, shutting down, its socket not there yet);
	// zero means 5 s.
	OpenTimeout time.Duration
	// StatementTimeout is every connection's statement_timeout: a
	// statement running longer fails (SQLSTATE 57014) instead of holding
	// a caller, a shutdown included, for ever. Zero means 30 s; negative,
	// none. A statement_timeout in the URL wins.
	StatementTimeout time.Duration
	// LockTimeout is every connection's lock_timeout: a statement waiting
	// longer for a row or advisory lock fails (SQLSTATE 55P03). Zero
	// means 10 s; negative, none. A lock_timeout in the URL wins.
	LockTimeout time.Duration
	// PingIdle is how long a pooled connection may sit idle before it is
	// pinged when taken: a connection the server ended while it was idle
	// (a restart, pg_terminate_backend) is then found by the ping and
	// replaced, never by a post whose commit would be unknown. Zero means
	// 100 ms; negative, never.
	PingIdle time.Duration
}

// Default bounds of one statement (Options.StatementTimeout, LockTimeout).
const (
	DefaultStatementTimeout = 30 * time.Second
	DefaultLockTimeout      = 10 * time.Second
	DefaultPingIdle         = 100 * time.Millisecond
)

// bound sets a timeout runtime parameter on every connection, unless the
// URL set it already; d zero means def, negative means none.
func bound(params map[string]string, name string, d, def time.Duration) {
	if _, set := params[name]; set || d < 0 {
		return
	}
	if d == 0 {
		d = def
	}
	params[name] = fmt.Sprint(max(d.Milliseconds(), 1)) // milliseconds, PostgreSQL's unit
}

// Store is an open PostgreSQL swarm database.
type Store struct {
	*sqlstore.Store // the rules, over conn and dialect
	pool            *pgxpool.Pool
	cfg             *pgxpool.Config
	loc             string
	wait            time.Duration // Options.OpenTimeout: how long a restarting server is waited for

	mu   sync.Mutex
	pids map[uint32]bool  // backends of this store's pool: their NOTIFYs are not news
	held map[*leases]bool // granted lease claims: Close drops their lock connections
}

var _ mailbox.Store = (*Store)(nil)

// IsURL reports whether s names a PostgreSQL database.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// CheckURL refuses a URL that is not PostgreSQL's or that carries a
// password: swarm.toml and the command line are no place for one.
func CheckURL(raw string) error {
	if !IsURL(raw) {
		return fmt.Errorf("database URL %q: want postgres://[user@]host[:port]/dbname[?sslmode=...]", dburl.Redact(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("database URL %q: %w", dburl.Redact(raw), err)
	}
	if _, ok := u.User.Password(); ok || u.Query().Has("password") {
		return fmt.Errorf("database URL %s carries a password: remove it, and put the password in PGPASSWORD or ~/.pgpass instead", dburl.Redact(raw))
	}
	return nil
}

// Open connects to the database at rawURL and migrates it. The URL must
// not carry a password (CheckURL).
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	if err := CheckURL(rawURL); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("database URL %s: %w", dburl.Redact(rawURL), err)
	}
	cfg.MaxConns = 8
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "swarm"
	}
	bound(cfg.ConnConfig.RuntimeParams, "statement_timeout", opts.StatementTimeout, DefaultStatementTimeout)
	bound(cfg.ConnConfig.RuntimeParams, "lock_timeout", opts.LockTimeout, DefaultLockTimeout)
	if idle := cmp.Or(opts.PingIdle, DefaultPingIdle); idle > 0 {
		cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration >= idle }
	} else {
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}
	s := &Store{cfg: cfg, loc: dburl.Redact(rawURL), pids: map[uint32]bool{}}
	s.Store = sqlstore.New(conn{s}, dialect, opts.Now)
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		s.mu.Lock()
		s.pids[c.PgConn().PID()] = true
		s.mu.Unlock()
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) {
		s.mu.Lock()
		delete(s.pids, c.PgConn().PID())
		s.mu.Unlock()
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, s.explain(err)
	}
	// A command run while the server restarts (pg_ctl restart, a
	// failover) waits for it rather than failing: the mail it carries
	// must not be lost to a moment's outage. That includes a connection
	// the shutting-down server ends under it (57P01): each migration is
	// its own transaction, so trying again is safe.
	wait := opts.OpenTimeout
	if wait == 0 {
		wait = 5 * time.Second
	}
	s.wait = wait
	deadline, pause := time.Now().Add(wait), 50*time.Millisecond
	for {
		err = s.migrate(ctx)
		if err == nil || !s.Unavailable(err) || time.Now().Add(pause).After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		if ctx.Err() != nil {
			break
		}
		pause = min(2*pause, time.Second)
	}
	if err != nil {
		s.pool.Close()
		return nil, s.explain(err)
	}
	return s, nil
}

// Unavailable reports whether err means the server could not be reached
// for a moment: a connection that failed or was cut (SQLSTATE class 08),
// a server shutting down or restarting (57P01-57P03), or a dial error. A
// connection cut during COMMIT leaves it unknown whether the transaction
// committed: a retried compare-and-set then fails as a conflict instead
// of applying twice.
func (s *Store) Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err) || restarting(err) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// restarting reports whether err is what a server in the middle of a
// restart answers: not accepting connections yet (57P03), no socket or
// port to connect to, or a connection cut as it shuts down.
func restarting(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P03"
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// explain names the database and says what to do about a failed open.
func (s *Store) explain(err error) error {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "28P01":
		return fmt.Errorf("open database %s: %w; set the password in PGPASSWORD or ~/.pgpass", s.loc, err)
	case errors.As(err, &pe) && pe.Code == "3D000":
		return fmt.Errorf("open database %s: %w; create it first (createdb)", s.loc, err)
	case errors.As(err, &pe) && (pe.Code == "XX001" || pe.Code == "XX002"): // data_corrupted, index_corrupted
		return fmt.Errorf("open database %s: %w: %w", s.loc, mailbox.ErrDamaged, err)
	case errors.As(err, &pe):
		return fmt.Errorf("open database %s: %w", s.loc, err)
	}
	return fmt.Errorf("open database %s: %w; is the server running and reachable? (try psql with the same URL)", s.loc, err)
}

// migrate brings the database up to the newest migration, each in its own
// transaction that first takes the migration advisory lock, so concurrent
// openers queue and each migration is applied once.
func (s *Store) migrate(ctx context.Context) error {
	all, err := migrations.For("postgres")
	if err != nil {
		return err
	}
	for _, m := range all {
		err := s.applyMigration(ctx, m)
		switch {
		case err == nil:
		case s.Unavailable(err):
			// No connection (refused, cut, or a failed login): no
			// migration is at fault, so none is named.
			return err
		default:
			return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, m migrations.Migration) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockMigrate); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    BIGINT PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at BIGINT NOT NULL)`); err != nil {
			return err
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		// No arguments: the simple protocol, which runs several statements.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.Version, m.Name, time.Now().UnixNano())
		return err
	})
}

// SchemaVersion returns the newest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return int(*v), nil
}

// ServerVersion is the server's version string ("15.18 (Debian …)").
func (s *Store) ServerVersion(ctx context.Context) (string, error) {
	var v string
	if err := s.pool.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return "", fmt.Errorf("read the server version: %w", err)
	}
	return v, nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for l := range held {
		l.drop()
	}
	s.pool.Close()
	return nil
}

// Location is the URL, without a password.
func (s *Store) Location() string { return s.loc }

// Check verifies that the server answers and the schema is the newest
// this binary knows.
func (s *Store) Check(ctx context.Context) (string, error) {
	if err := s.pool.Ping(ctx); err != nil {
		return "", fmt.Errorf("reach %s: %w", s.loc, err)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return "", err
	}
	all, err := migrations.For("postgres")
	if err != nil {
		return "", err
	}
	switch {
	case v < len(all):
		return fmt.Sprintf("schema at migration %d of %d: open it with this swarm to migrate", v, len(all)), nil
	case v > len(all):
		return fmt.Sprintf("schema at migration %d, newer than this swarm (%d): upgrade swarm", v, len(all)), nil
	}
	return "ok", nil
}

// ownPID reports whether pid is one of this store's pooled backends.
func (s *Store) ownPID(pid uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pids[pid]
}

func nanos(t time.Time) int64 { return t.UTC().UnixNano() }

// pgCode returns the SQLSTATE of err, "" when it is not a server error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

const (
	codeForeignKey = "23503"
	codeUnique     = "23505"
)
