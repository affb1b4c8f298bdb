package open

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/internal/pgtest"
	"github.com/swarmhq/swarm/mailbox/postgres"
	"github.com/swarmhq/swarm/mailbox/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestChoose(t *testing.T) {
	path := "/r/.swarm/swarm.db"
	for _, tc := range []struct {
		env, cfg, want string
	}{
		{"", "", "sqlite"},
		{"", "postgres://h/db", "postgres"},
		{"postgres://e/db", "", "postgres"},
	} {
		got := Choose(env(map[string]string{EnvURL: tc.env}), tc.cfg, path)
		if got.Backend() != tc.want {
			t.Errorf("env %q config %q: %s, want %s", tc.env, tc.cfg, got.Backend(), tc.want)
		}
	}
	if got := Choose(env(map[string]string{EnvURL: "postgres://env/db"}), "postgres://cfg/db", path); got.URL != "postgres://env/db" {
		t.Errorf("SWARM_DB_URL does not win: %+v", got)
	}
}

func TestOpensSQLite(t *testing.T) {
	ctx := context.Background()
	st, err := Choose(env(nil), "", filepath.Join(t.TempDir(), "swarm.db")).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.(*sqlite.Store); !ok {
		t.Fatalf("opened %T", st)
	}
	d, err := Diagnose(ctx, st)
	if err != nil || d.Backend != "sqlite" || d.Schema != d.Want || d.Check != "ok" {
		t.Fatalf("Diagnose = %+v, %v", d, err)
	}
}

func TestOpensPostgres(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := context.Background()
	st, err := Choose(env(map[string]string{EnvURL: url}), "", "/nonexistent/swarm.db").Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.(*postgres.Store); !ok {
		t.Fatalf("opened %T", st)
	}
	d, err := Diagnose(ctx, st)
	if err != nil || d.Backend != "postgres" || d.Server == "" || d.Schema != d.Want || d.Check != "ok" {
		t.Fatalf("Diagnose = %+v, %v", d, err)
	}
}

func TestRefusesAPassword(t *testing.T) {
	_, err := Target{URL: "postgres://u:hunter2@h/db"}.Open(context.Background())
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "PGPASSWORD") {
		t.Fatalf("Open = %v", err)
	}
	if s := (Target{URL: "postgres://u:hunter2@h/db"}).String(); strings.Contains(s, "hunter2") {
		t.Fatalf("String = %s", s)
	}
}

// TestNoCreate: with NoCreate, a missing SQLite file is refused, not
// created; an existing one opens.
func TestNoCreate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "swarm.db")
	_, err := Target{Path: path, NoCreate: true}.Open(ctx)
	if !errors.Is(err, ErrNoDatabase) || !strings.Contains(err.Error(), path) {
		t.Fatalf("NoCreate on a missing file = %v, want ErrNoDatabase naming it", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused open created %s: %v", path, err)
	}
	st, err := Target{Path: path}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = Target{Path: path, NoCreate: true}.Open(ctx)
	if err != nil {
		t.Fatalf("NoCreate on an existing file: %v", err)
	}
	st.Close()
}
