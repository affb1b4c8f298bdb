package postgres

import (
	"slices"
	"testing"

	"github.com/swarmhq/swarm/escalation"
)

// sqlstore's statements are written with SQLite's ? and ?N; PostgreSQL
// gets $N, and text in quotes is left alone.
func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT 1`: `SELECT 1`,
		`UPDATE t SET a = ?, b = ? WHERE c IN (?,?)`:  `UPDATE t SET a = $1, b = $2 WHERE c IN ($3,$4)`,
		`SELECT ?9::bigint, ?10, ?1`:                  `SELECT $9::bigint, $10, $1`,
		`SELECT '?', "a?b", ? FROM t WHERE x = '''?'`: `SELECT '?', "a?b", $1 FROM t WHERE x = '''?'`,
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%s) = %s, want %s", in, got, want)
		}
		if got := rebind(in); got != want {
			t.Errorf("rebind(%s) again (cached) = %s, want %s", in, got, want)
		}
	}
}

// Flags go to PostgreSQL as the 0/1 integers both schemas store, named
// types as their plain values, and the caller's arguments stay as they
// were.
func TestFixArgs(t *testing.T) {
	type seq int32
	args := []any{true, false, escalation.Open, seq(7), "x", int64(3), nil}
	got := fix(args)
	want := []any{int64(1), int64(0), "open", int64(7), "x", int64(3), nil}
	if !slices.Equal(got, want) {
		t.Fatalf("fix = %#v, want %#v", got, want)
	}
	if args[0] != true || args[2] != escalation.Open {
		t.Fatalf("fix changed the caller's arguments: %#v", args)
	}
	plain := []any{"a", int64(1)}
	if got := fix(plain); &got[0] != &plain[0] {
		t.Fatal("fix copied arguments it did not need to change")
	}
}
