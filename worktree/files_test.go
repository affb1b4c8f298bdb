package worktree

import (
	"context"
	"slices"
	"testing"
)

// TestCommittedFiles: a session's own commits are what Committed lists;
// the base merged into the branch during the session (a teammate's file)
// and commits before the guard are not.
func TestCommittedFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operatorIdentity()
	ctx := context.Background()
	wt := f.ensure("alpha")
	f.commitWith(wt.Path, as("swarm/alpha"), "before.txt", "x\n", "before the session")
	g := f.guard("alpha")
	if got, err := g.Committed(ctx); err != nil || got != nil {
		t.Fatalf("Committed before any commit = %v, %v; want none", got, err)
	}
	f.commitWith(wt.Path, as("swarm/alpha"), "api/users.go", "package api\n", "users")
	f.commitWith(".", nil, "teammate.txt", "t\n", "landed by a teammate")
	f.gitWith(wt.Path, as("swarm/alpha"), "merge", "-q", "--no-edit", "main")
	f.commitWith(wt.Path, as("swarm/alpha"), "api/users.go", "package api // 2\n", "users again")
	f.commitWith(wt.Path, as("swarm/alpha"), "docs/a b.md", "doc\n", "a spaced name")
	got, err := g.Committed(ctx)
	if want := []string{"api/users.go", "docs/a b.md"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Committed = %q, %v; want %q", got, err, want)
	}
	tracked, err := f.m.TrackedFiles(ctx, "alpha")
	if want := []string{"README.md", "api/users.go", "before.txt", "docs/a b.md", "teammate.txt"}; err != nil || !slices.Equal(tracked, want) {
		t.Fatalf("TrackedFiles(alpha) = %q, %v; want %q", tracked, err, want)
	}
	if tracked, err := f.m.TrackedFiles(ctx, ""); err != nil || !slices.Equal(tracked, []string{"README.md", "teammate.txt"}) {
		t.Fatalf("TrackedFiles of the base = %q, %v", tracked, err)
	}
}
