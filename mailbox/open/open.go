// Package open chooses and opens the swarm's store: PostgreSQL when a
// database URL is set (SWARM_DB_URL, else swarm.toml's [mailbox] url),
// else the SQLite file .swarm/swarm.db. It is the one place that knows
// every backend; commands call it, never a backend directly.
package open

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mailbox/dburl"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/postgres"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/migrations"
)

// EnvURL names the environment variable that chooses a PostgreSQL
// database over swarm.toml's [mailbox] url.
const EnvURL = dburl.EnvURL

// Target is the store to open.
type Target struct {
	URL  string // a PostgreSQL URL; empty means SQLite at Path
	Path string // the SQLite file
	Now  func() time.Time
	// NoCreate refuses a SQLite file that does not exist with
	// ErrNoDatabase instead of creating it: what a command does while a
	// supervisor runs, since a database missing then was deleted under it,
	// and a fresh one would take mail the supervisor never reads.
	NoCreate bool
}

// ErrNoDatabase is a SQLite database that does not exist, opened with
// NoCreate.
var ErrNoDatabase = errors.New("no swarm database")

// Choose picks the target: the environment's URL, else the configured
// one, else the SQLite file.
func Choose(getenv func(string) string, configURL, path string) Target {
	return Target{URL: dburl.Choose(getenv, configURL), Path: path}
}

// Backend is "postgres" or "sqlite".
func (t Target) Backend() string {
	if t.URL != "" {
		return "postgres"
	}
	return "sqlite"
}

// String names the database: the file, or the URL (which never has a
// password).
func (t Target) String() string {
	return dburl.Name(t.URL, t.Path)
}

// Open opens (creating or migrating as needed) the target's store.
func (t Target) Open(ctx context.Context) (mailbox.Store, error) {
	if t.URL != "" {
		if err := postgres.CheckURL(t.URL); err != nil {
			return nil, err
		}
		return postgres.Open(ctx, t.URL, postgres.Options{Now: t.Now})
	}
	if t.NoCreate {
		if _, err := os.Stat(t.Path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist; nothing was stored", ErrNoDatabase, t.Path)
		}
	}
	return sqlite.Open(ctx, t.Path, sqlite.Options{Now: t.Now})
}

// DamagedAdvice says what to do about a store whose errors wrap
// mailbox.ErrDamaged: db is the target's String, a SQLite file or a
// PostgreSQL URL.
func DamagedAdvice(db string) string {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		return "the database's data is damaged: run 'swarm doctor', and restore the database from a backup (pg_dump what still reads)"
	}
	return sqlite.DamagedAdvice(db)
}

// Diagnosis is what `swarm doctor` reports about an open store.
type Diagnosis struct {
	Backend string
	Server  string // the server's version; empty for SQLite
	Schema  int    // the newest applied migration
	Want    int    // the newest migration this binary has
	Check   string // the store's own verdict, "ok" when healthy
}

// Diagnose inspects an open store.
func Diagnose(ctx context.Context, st mailbox.Store) (Diagnosis, error) {
	var d Diagnosis
	switch s := st.(type) {
	case *postgres.Store:
		d.Backend = "postgres"
		v, err := s.ServerVersion(ctx)
		if err != nil {
			return d, err
		}
		d.Server = v
		if d.Schema, err = s.SchemaVersion(ctx); err != nil {
			return d, err
		}
	case *sqlite.Store:
		d.Backend = "sqlite"
		var err error
		if d.Schema, err = s.SchemaVersion(ctx); err != nil {
			return d, err
		}
	default:
		return d, fmt.Errorf("unknown store %T", st)
	}
	ms, err := migrations.For(d.Backend)
	if err != nil {
		return d, err
	}
	d.Want = len(ms)
	d.Check, err = st.Check(ctx)
	return d, err
}
