package migrations

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

func TestAllNumberedInOrder(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("no migrations embedded")
	}
	for i, m := range all {
		if m.Version != i+1 || m.SQL == "" {
			t.Errorf("migration %d = %+v", i, m.Version)
		}
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if v, _ := Current(ctx, db); v != 0 {
		t.Fatalf("fresh database at version %d", v)
	}
	applied, err := Apply(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := All()
	if len(applied) != len(all) {
		t.Fatalf("applied %v, want all %d", applied, len(all))
	}
	applied, err = Apply(ctx, db)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Apply = %v, %v", applied, err)
	}
	if v, _ := Current(ctx, db); v != len(all) {
		t.Fatalf("Current = %d", v)
	}
	for _, table := range []string{"agents", "messages", "sessions", "events", "meta"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s missing", table)
		}
	}
}
