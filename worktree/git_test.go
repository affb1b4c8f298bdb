package worktree

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Hooks and an fsmonitor program planted in the shared .git run for a git
// that does not opt out, and never for swarm's own git.
func TestSwarmsGitRunsNoHooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\necho \"$(basename \"$0\")\" >> '" + marker + "'\n"
	hooks := []string{
		"post-checkout", "post-merge", "pre-commit", "prepare-commit-msg", "commit-msg",
		"post-commit", "pre-merge-commit", "reference-transaction", "post-rewrite", "pre-auto-gc",
	}
	for _, h := range hooks {
		writeExec(t, filepath.Join(f.root, ".git", "hooks", h), script)
	}
	fsmon := filepath.Join(t.TempDir(), "fsmonitor")
	writeExec(t, fsmon, "#!/bin/sh\necho fsmonitor >> '"+marker+"'\nexit 1\n")
	f.git(".", "config", "core.fsmonitor", fsmon)

	// The planted code works: an ordinary git runs it.
	f.commitWith(".", nil, "sanity.txt", "sane\n", "sanity")
	f.git(".", "status", "--porcelain")
	ran := readFile(t, marker)
	for _, want := range []string{"pre-commit", "post-commit", "reference-transaction", "fsmonitor"} {
		if !strings.Contains(ran, want) {
			t.Fatalf("the planted %s did not run for plain git; ran:\n%s", want, ran)
		}
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}

	// swarm's git: create, dirty, auto-commit, merge; create, squash.
	alpha := f.ensure("alpha")
	writeFile(t, filepath.Join(alpha.Path, "a.txt"), "a\n")
	if dirty, err := f.m.Dirty(ctx, "alpha"); err != nil || !dirty {
		t.Fatalf("Dirty = %v, %v", dirty, err)
	}
	if ok, err := f.m.AutoCommit(ctx, "alpha", "save"); err != nil || !ok {
		t.Fatalf("AutoCommit = %v, %v", ok, err)
	}
	writeFile(t, filepath.Join(alpha.Path, "a2.txt"), "a\n")
	if _, err := f.m.Merge(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	bravo := f.ensure("bravo")
	writeFile(t, filepath.Join(bravo.Path, "b.txt"), "b\n")
	if _, err := f.m.Squash(ctx, "bravo"); err != nil {
		t.Fatal(err)
	}
	if err := f.m.CheckBase(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("planted code ran during swarm's git:\n%s", b)
	}
	if readFile(t, filepath.Join(f.root, "a2.txt")) != "a\n" || readFile(t, filepath.Join(f.root, "b.txt")) != "b\n" {
		t.Fatal("the merges did not land")
	}
}
