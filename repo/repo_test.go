package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type mapEnv map[string]string

func (m mapEnv) Getenv(k string) string { return m[k] }

func TestFind(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "my repo") // a space on purpose
	other := filepath.Join(base, "other")
	for _, d := range []string{
		filepath.Join(root, "sub", "deeper"),
		filepath.Join(root, ".swarm", "worktrees", "backend", "api"),
		filepath.Join(other),
		filepath.Join(base, "plain"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, ConfigName))
	// A worktree is a checkout, so it holds its own copy of swarm.toml; the
	// walk must not stop there.
	write(t, filepath.Join(root, ".swarm", "worktrees", "backend", ConfigName))

	tests := []struct {
		name    string
		dir     string
		cwd     string
		env     mapEnv
		want    string
		wantDB  string
		wantErr error
	}{
		{name: "cwd at root", cwd: root, want: root},
		{name: "cwd below root", cwd: filepath.Join(root, "sub", "deeper"), want: root},
		{name: "cwd in agent worktree", cwd: filepath.Join(root, ".swarm", "worktrees", "backend"), want: root},
		{name: "cwd deep in agent worktree", cwd: filepath.Join(root, ".swarm", "worktrees", "backend", "api"), want: root},
		{name: "dir flag wins", dir: other, cwd: root, env: mapEnv{"SWARM_ROOT": root}, want: other},
		{name: "relative dir flag", dir: "other", cwd: base, want: other},
		{name: "SWARM_ROOT beats cwd", cwd: filepath.Join(base, "plain"), env: mapEnv{"SWARM_ROOT": root}, want: root},
		{name: "SWARM_DB overrides db only", cwd: root, env: mapEnv{"SWARM_DB": "/tmp/x.db"}, want: root, wantDB: "/tmp/x.db"},
		{name: "nothing found", cwd: filepath.Join(base, "plain"), wantErr: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = mapEnv{}
			}
			got, err := Find(tt.dir, tt.cwd, env)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Root != tt.want {
				t.Errorf("root = %q, want %q", got.Root, tt.want)
			}
			wantDB := tt.wantDB
			if wantDB == "" {
				wantDB = filepath.Join(tt.want, ".swarm", "swarm.db")
			}
			if got.DB != wantDB {
				t.Errorf("db = %q, want %q", got.DB, wantDB)
			}
		})
	}
}

func TestFindMissingDir(t *testing.T) {
	if _, err := Find("/does/not/exist", t.TempDir(), mapEnv{}); err == nil {
		t.Fatal("want an error for a missing --dir")
	}
}

func TestWorktreeOwner(t *testing.T) {
	tests := []struct {
		path string
		want string
		ok   bool
	}{
		{"/r/.swarm/worktrees/a", "/r", true},
		{"/r/.swarm/worktrees/a/b/c", "/r", true},
		{"/r/.swarm/worktrees", "", false},
		{"/r/src/worktrees/a", "", false},
		{"/", "", false},
	}
	for _, tt := range tests {
		got, ok := WorktreeOwner(tt.path)
		if got != tt.want || ok != tt.ok {
			t.Errorf("WorktreeOwner(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
