package worktree

import (
	"context"
	"path/filepath"
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
	patch, err := f.m.ReviewDiff(ctx, reviewed, 1<<20)
	if err != nil || !strings.Contains(patch.Diff, "+reviewed") || patch.Cut() {
		t.Fatalf("ReviewDiff = %+v, %v", patch, err)
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
