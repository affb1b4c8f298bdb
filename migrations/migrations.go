// Package migrations holds swarm's database schema as numbered .sql files
// embedded in the binary, and applies them in order.
//
// Each migration runs in its own BEGIN IMMEDIATE transaction that also
// records its number, so when several processes open a fresh database at
// once, exactly one of them applies each migration and the others see it
// done. The caller's DSN must use _txlock=immediate.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed *.sql
var files embed.FS

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded migrations in order.
func All() ([]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		num, rest, ok := strings.Cut(n, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", n)
		}
		body, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql"), SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %d is missing (found %d)", i+1, m.Version)
		}
	}
	return out, nil
}

// Apply brings the database up to the newest migration and returns the
// versions it applied (none when another process got there first).
func Apply(ctx context.Context, db *sql.DB) ([]int, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	var applied []int
	for _, m := range all {
		did, err := apply(ctx, db, m)
		if err != nil {
			return applied, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if did {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

// Current returns the newest applied version, 0 for an empty database.
func Current(ctx context.Context, db *sql.DB) (int, error) {
	var v sql.NullInt64
	err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return 0, nil
	}
	return int(v.Int64), err
}

func apply(ctx context.Context, db *sql.DB, m Migration) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		return false, err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixNano()); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
