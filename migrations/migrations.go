// Package migrations holds swarm's database schema as numbered .sql files
// per dialect (sqlite/, and postgres/ for several hosts), embedded in the
// binary. It is data only: each store implementation applies its dialect's
// files in order, each in its own transaction that also records its
// number, so several processes opening a fresh database at once apply each
// migration exactly once.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed sqlite/*.sql
var files embed.FS

// Dialects lists the SQL dialects there are migrations for.
var Dialects = []string{"sqlite"}

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// For returns the dialect's migrations in order. Versions are dense from 1.
func For(dialect string) ([]Migration, error) {
	if !slices.Contains(Dialects, dialect) {
		return nil, fmt.Errorf("no migrations for dialect %q (have %s)", dialect, strings.Join(Dialects, ", "))
	}
	names, err := fs.Glob(files, dialect+"/*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		base := path.Base(n)
		num, rest, ok := strings.Cut(base, "_")
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
			return nil, fmt.Errorf("%s migration %d is missing (found %d)", dialect, i+1, m.Version)
		}
	}
	return out, nil
}
