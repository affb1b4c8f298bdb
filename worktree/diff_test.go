package worktree

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.m.Changes(ctx, "alpha"); !errors.Is(err, ErrNoBase) || !strings.Contains(err.Error(), "alpha has no branch yet") {
		t.Fatalf("before any worktree: %v", err)
	}
	alpha := f.ensure("alpha")
	f.ensure("bravo")
	f.commitAs("swarm/alpha", alpha.Path, "api.go", "package api\n\nfunc A() {}\n", "alpha: add api")
	f.commitAs("swarm/alpha", alpha.Path, "logo.png", "\x89PNG\x00\x01\x02", "alpha: add a logo")
	// The operator moves on: the three-dot diff shows only alpha's work.
	f.commitAs("Test Operator", ".", "op.txt", "op\n", "operator work")
	writeFile(t, filepath.Join(alpha.Path, "api.go"), "package api\n")
	writeFile(t, filepath.Join(alpha.Path, "notes.txt"), "todo\n")

	c, err := f.m.Changes(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if c.Base != "main" || c.Branch != "swarm/alpha" || len(c.Commits) != 2 || c.Worktree != alpha.Path {
		t.Fatalf("Changes = %+v", c)
	}
	want := []FileChange{{Path: "api.go", Status: "A", Added: 3}, {Path: "logo.png", Status: "A", Binary: true}}
	if !slices.Equal(c.Files, want) {
		t.Fatalf("files %+v, want %+v", c.Files, want)
	}
	if want := []FileChange{{Path: "api.go", Status: "M", Deleted: 2}}; !slices.Equal(c.Uncommitted, want) {
		t.Fatalf("uncommitted %+v, want %+v", c.Uncommitted, want)
	}
	if !slices.Equal(c.Untracked, []string{"notes.txt"}) {
		t.Fatalf("untracked %v", c.Untracked)
	}

	stat, err := f.m.DiffText(ctx, "alpha", false, "--stat")
	if err != nil || !strings.Contains(stat, "api.go") || !strings.Contains(stat, "2 files changed") || strings.Contains(stat, "op.txt") {
		t.Fatalf("DiffText --stat = %q, %v", stat, err)
	}
	patch, err := f.m.DiffText(ctx, "alpha", true)
	if err != nil || !strings.Contains(patch, "-func A() {}") {
		t.Fatalf("uncommitted patch = %q, %v", patch, err)
	}

	c, err = f.m.Changes(ctx, "bravo")
	if err != nil || len(c.Files) != 0 || len(c.Commits) != 0 || len(c.Uncommitted) != 0 {
		t.Fatalf("bravo: %+v, %v", c, err)
	}
	if _, err := f.m.Changes(ctx, "charlie"); err == nil || !strings.Contains(err.Error(), "charlie has no branch yet (swarm/charlie)") {
		t.Fatalf("charlie: %v", err)
	}
}
