package worktree

import (
	"context"
	"strings"
	"testing"
)

// TestReviewDiff: the review sees the branch's commit against the base
// branch. (Merging it is TestLandTakesTheReviewedCommit's.)
func TestReviewDiff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "reviewed.txt", "reviewed\n", "alpha: the reviewed work")
	reviewed, err := f.m.Tip(ctx, "alpha")
	if err != nil || reviewed != f.git(".", "rev-parse", "swarm/alpha") {
		t.Fatalf("Tip = %q, %v", reviewed, err)
	}
	diff, err := f.m.ReviewDiff(ctx, reviewed, 1<<20)
	if err != nil || !strings.Contains(diff, "+reviewed") {
		t.Fatalf("ReviewDiff = %q, %v", diff, err)
	}
}
