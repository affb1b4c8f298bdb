package worktree

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMergeCommitTakesTheReviewedCommit: a workflow merge takes the commit
// the review saw, not the branch's newer tip, and keeps the agent's
// worktree and branch; a commit already on the base branch merges nothing.
func TestMergeCommitTakesTheReviewedCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "reviewed.txt", "reviewed\n", "alpha: the reviewed work")
	reviewed, err := f.m.Tip(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	patch, err := f.m.ReviewDiff(ctx, reviewed, 1<<20)
	if err != nil || !strings.Contains(patch.Diff, "+reviewed") || patch.Cut() {
		t.Fatalf("ReviewDiff = %+v, %v", patch, err)
	}
	f.commitAs("swarm/alpha", wt.Path, "later.txt", "later\n", "alpha: after the review")
	commit, err := f.m.MergeCommit(ctx, "alpha", reviewed, "swarm: merge T-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.git(".", "log", "-1", "--format=%H %s"); got != commit+" swarm: merge T-1" {
		t.Fatalf("main's tip = %q, want the merge commit %s", got, commit)
	}
	if !exists(filepath.Join(f.root, "reviewed.txt")) || exists(filepath.Join(f.root, "later.txt")) {
		t.Fatal("the merge did not take exactly the reviewed commit")
	}
	if !exists(filepath.Join(wt.Path, "later.txt")) || !f.branchExists("swarm/alpha") {
		t.Fatal("the agent's worktree or branch is gone")
	}
	again, err := f.m.MergeCommit(ctx, "alpha", reviewed, "swarm: merge T-1")
	if err != nil || again != "" {
		t.Fatalf("merging the merged commit again = %q, %v; want nothing to do", again, err)
	}
}

// TestMergeCommitRefuses: a conflict is aborted with nothing changed; a
// dirty checkout, a checkout off the base branch and a commit that is not
// on the agent's branch are refused before anything is done.
func TestMergeCommitRefuses(t *testing.T) {
	t.Parallel()
	f, alpha, bravo, before := conflictFixture(t)
	ctx := context.Background()
	tip := f.git(".", "rev-parse", "swarm/alpha")
	_, err := f.m.MergeCommit(ctx, "alpha", tip, "swarm: merge T-1")
	var ce *ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"shared.txt"}) {
		t.Fatalf("MergeCommit = %v, want a conflict in shared.txt", err)
	}
	f.checkUntouched(before, alpha, tip)

	bravoTip := f.git(".", "rev-parse", "swarm/bravo")
	if _, err := f.m.MergeCommit(ctx, "alpha", bravoTip, "x"); err == nil || !strings.Contains(err.Error(), "is not on swarm/alpha") {
		t.Fatalf("a commit of another branch: %v", err)
	}
	writeFile(t, filepath.Join(f.root, "shared.txt"), "dirty\n")
	if _, err := f.m.MergeCommit(ctx, "bravo", bravoTip, "x"); !errors.Is(err, ErrBaseDirty) {
		t.Fatalf("a dirty checkout: %v, want ErrBaseDirty", err)
	}
	f.git(".", "checkout", "--", "shared.txt")
	f.git(".", "switch", "-q", "-c", "elsewhere")
	if _, err := f.m.MergeCommit(ctx, "bravo", bravoTip, "x"); !errors.Is(err, ErrNotOnBase) {
		t.Fatalf("off the base branch: %v, want ErrNotOnBase", err)
	}
	f.git(".", "switch", "-q", "main")
	if _, err := f.m.MergeCommit(ctx, "bravo", bravoTip, "swarm: merge T-2"); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(f.root, "bravo.txt")) || !exists(bravo.Path) {
		t.Fatal("bravo's reviewed commit is not on main, or its worktree went")
	}
}

// A review diff is cut at file boundaries: a file that does not fit after
// 64 KiB of filler is left out whole and named with its sizes, never cut
// in the middle or dropped without a word.
func TestReviewDiffNamesWhatItLeavesOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	writeFile(t, filepath.Join(wt.Path, "a_filler.txt"), strings.Repeat("filler line of text\n", 3300)) // 66,000 bytes
	writeFile(t, filepath.Join(wt.Path, "b_small.txt"), "small\n")
	writeFile(t, filepath.Join(wt.Path, "z_backdoor.go"), "package main\n// placed after the filler\n"+strings.Repeat("// more\n", 100))
	f.git(wt.Path, "add", ".")
	f.git(wt.Path, "rm", "-q", "README.md")
	f.commitAs("swarm/alpha", wt.Path, "c_note.txt", "note\n", "alpha: work")
	tip, err := f.m.Tip(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.m.ReviewDiff(ctx, tip, 600)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, l := range p.LeftOut {
		left = append(left, l.String())
	}
	if p.Files != 5 || len(p.LeftOut) != 2 || !strings.HasPrefix(left[0], "a_filler.txt (diff ") || !strings.HasSuffix(left[0], " bytes, file 66000 bytes at the commit)") ||
		!strings.HasPrefix(left[1], "z_backdoor.go (diff ") {
		t.Fatalf("files %d, left out %q", p.Files, left)
	}
	for _, want := range []string{"+small", "+note", "deleted file mode", "[diff cut: it shows ", "2 of 5 files are left out", "  " + left[1] + "\n", "the coordinator notes say how"} {
		if !strings.Contains(p.Diff, want) {
			t.Fatalf("diff lacks %q:\n%s", want, p.Diff)
		}
	}
	if strings.Contains(p.Diff, "+filler") || strings.Contains(p.Diff, "placed after the filler") || p.Shown > 600 || p.Size <= 66000 {
		t.Fatalf("shown %d of %d:\n%s", p.Shown, p.Size, p.Diff)
	}
	// What fits is shown whole, with no note.
	if p, err = f.m.ReviewDiff(ctx, tip, 1<<20); err != nil || p.Cut() || strings.Contains(p.Diff, "diff cut") || !strings.Contains(p.Diff, "placed after the filler") {
		t.Fatalf("uncut: %+v, %v", p.LeftOut, err)
	}
}
