package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPushThenFetchOnAnotherClone: an agent's branch pushed from one clone
// is created in another by Fetch, fast-forwarded when the remote moves on,
// and left alone when the local branch has work the remote lacks.
func TestPushThenFetchOnAnotherClone(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	origin := filepath.Join(t.TempDir(), "origin.git")
	f.git(".", "init", "-q", "--bare", origin)
	f.git(".", "remote", "add", "origin", origin)

	wt := f.ensure("backend")
	f.commitAs("swarm/backend", wt.Path, "api.go", "package api\n", "backend: api")
	if err := f.m.Push(ctx, "origin", "backend"); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Push(ctx, "origin", "nobody"); err != nil {
		t.Fatalf("Push of an agent without a branch = %v, want nothing done", err)
	}

	// The other host: a clone of the same origin, its own Manager.
	g := &fixture{t: t, root: filepath.Join(t.TempDir(), "other"), env: f.env, meta: &memMeta{}}
	f.git(".", "clone", "-q", f.root, g.root)
	g.git(".", "remote", "set-url", "origin", origin)
	g.m = g.manager(Options{})
	got, err := g.m.Fetch(ctx, "origin", []string{"backend", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	tip := f.git(".", "rev-parse", "swarm/backend")
	if len(got) != 2 || got[0].What != "created" || got[0].New != tip || got[1].What != "absent" {
		t.Fatalf("first Fetch = %+v, want backend created at %s and nobody absent", got, tip)
	}
	if g.git(".", "rev-parse", "swarm/backend") != tip {
		t.Fatal("the fetched branch is not at the pushed commit")
	}

	f.commitAs("swarm/backend", wt.Path, "api.go", "package api // v2\n", "backend: v2")
	if err := f.m.Push(ctx, "origin", "backend"); err != nil {
		t.Fatal(err)
	}
	got, err = g.m.Fetch(ctx, "origin", []string{"backend"})
	if err != nil || got[0].What != "fast-forwarded" || got[0].Old != tip {
		t.Fatalf("second Fetch = %+v, %v, want a fast-forward from %s", got, err, tip)
	}
	// Work here the remote lacks: kept.
	g.git(".", "commit", "-q", "--allow-empty", "-m", "work only here")
	g.git(".", "branch", "-f", "swarm/backend", "HEAD")
	local := g.git(".", "rev-parse", "swarm/backend")
	if got, err = g.m.Fetch(ctx, "origin", []string{"backend"}); err != nil || got[0].What != "kept" || g.git(".", "rev-parse", "swarm/backend") != local {
		t.Fatalf("Fetch onto a diverged branch = %+v, %v, want it kept", got, err)
	}
}

// TestPushAndFetchGetTheUsersCredentials: git push and fetch act as the
// user towards the remote, so the credentials swarm removes from every
// other git it runs reach them (DESIGN §6).
func TestPushAndFetchGetTheUsersCredentials(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.env = append(f.env, "MY_SERVICE_TOKEN=tok-for-the-remote")
	f.m = f.manager(Options{})
	origin := filepath.Join(t.TempDir(), "origin.git")
	f.git(".", "init", "-q", "--bare", origin)
	f.git(".", "remote", "add", "origin", origin)
	// The remote's side runs through a script that records the
	// environment it was given: what a credential helper or ssh would see.
	seen := filepath.Join(t.TempDir(), "env")
	for key, prog := range map[string]string{"receivepack": "git-receive-pack", "uploadpack": "git-upload-pack"} {
		script := filepath.Join(t.TempDir(), key+".sh")
		body := "#!/bin/sh\nenv >> '" + seen + "'\nexec " + prog + " \"$@\"\n"
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		f.git(".", "config", "remote.origin."+key, script)
	}
	wt := f.ensure("backend")
	f.commitAs("swarm/backend", wt.Path, "api.go", "package api\n", "backend: api")
	if err := f.m.Push(ctx, "origin", "backend"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Fetch(ctx, "origin", []string{"backend"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "MY_SERVICE_TOKEN=tok-for-the-remote"); n != 2 {
		t.Fatalf("the credential reached %d of push and fetch, want both", n)
	}
}
