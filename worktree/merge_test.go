package worktree

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMergeTwoAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alpha, bravo := f.ensure("alpha"), f.ensure("bravo")
	if err := f.m.Lock(ctx, "alpha", "swarm up"); err != nil {
		t.Fatal(err)
	}
	f.commitAs("swarm/alpha", alpha.Path, "alpha.txt", "from alpha\n", "alpha: add file")
	// bravo leaves its work uncommitted: Merge saves it first.
	writeFile(t, filepath.Join(bravo.Path, "bravo.txt"), "from bravo\n")
	// The operator moved on meanwhile.
	f.commitAs("Test Operator", ".", "op.txt", "op\n", "operator work")

	commits, err := f.m.UnmergedCommits(ctx, "alpha")
	if err != nil || len(commits) != 1 || !strings.HasSuffix(commits[0], " alpha: add file") {
		t.Fatalf("UnmergedCommits = %q, %v", commits, err)
	}
	res, err := f.m.Merge(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || res.AutoCommit != "" || len(res.Commits) != 1 || res.Commit != f.git(".", "rev-parse", "HEAD") {
		t.Fatalf("Merge(alpha) = %+v", res)
	}
	res, err = f.m.Merge(ctx, "bravo")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || res.AutoCommit == "" || len(res.Commits) != 1 {
		t.Fatalf("Merge(bravo) = %+v", res)
	}

	for file, want := range map[string]string{"alpha.txt": "from alpha\n", "bravo.txt": "from bravo\n", "op.txt": "op\n"} {
		if got := readFile(t, filepath.Join(f.root, file)); got != want {
			t.Errorf("%s on main = %q, want %q", file, got, want)
		}
	}
	// One merge commit per agent, naming it, in order.
	subjects := f.git(".", "log", "--first-parent", "--format=%s|%P", "-2")
	lines := strings.Split(subjects, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "swarm: merge agent bravo (branch swarm/bravo)|") || !strings.HasPrefix(lines[1], "swarm: merge agent alpha (branch swarm/alpha)|") {
		t.Fatalf("main's history:\n%s", subjects)
	}
	for _, l := range lines {
		if len(strings.Fields(strings.SplitN(l, "|", 2)[1])) != 2 {
			t.Fatalf("not a merge commit: %s", l)
		}
	}
	if f.branchExists("swarm/alpha") || f.branchExists("swarm/bravo") {
		t.Fatal("agent branches left behind")
	}
	if list := f.git(".", "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Fatalf("worktrees left:\n%s", list)
	}
	if exists(alpha.Path) || exists(bravo.Path) {
		t.Fatal("worktree directories left")
	}
	if st := f.git(".", "status", "--porcelain"); st != "" {
		t.Fatalf("main worktree not clean:\n%s", st)
	}
}

func TestMergeNothingToMergeStillRemoves(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.ensure("alpha")
	before := f.git(".", "rev-parse", "HEAD")
	res, err := f.m.Merge(context.Background(), "alpha")
	if err != nil || res.Commit != "" || len(res.Commits) != 0 || !res.Removed {
		t.Fatalf("Merge = %+v, %v", res, err)
	}
	if f.git(".", "rev-parse", "HEAD") != before || f.branchExists("swarm/alpha") {
		t.Fatal("an empty merge changed main or kept the branch")
	}
}

func TestSquash(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "one\n", "alpha: one")
	f.commitAs("swarm/alpha", wt.Path, "b.txt", "two\n", "alpha: two")
	before := f.git(".", "rev-parse", "HEAD")

	res, err := f.m.Squash(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || len(res.Commits) != 2 {
		t.Fatalf("Squash = %+v", res)
	}
	if got := f.git(".", "log", "-1", "--format=%P|%an|%s", "HEAD"); got != before+"|swarm/alpha|swarm: squash agent alpha (branch swarm/alpha)" {
		t.Fatalf("squash commit = %q", got)
	}
	body := f.git(".", "log", "-1", "--format=%b")
	if !strings.Contains(body, "alpha: one") || !strings.Contains(body, "alpha: two") {
		t.Fatalf("squash message body lists no commits:\n%s", body)
	}
	if f.git(".", "rev-list", "--count", before+"..HEAD") != "1" {
		t.Fatal("squash made more than one commit")
	}
	if readFile(t, filepath.Join(f.root, "a.txt")) != "one\n" || readFile(t, filepath.Join(f.root, "b.txt")) != "two\n" {
		t.Fatal("squashed files missing on main")
	}
	if f.branchExists("swarm/alpha") || exists(wt.Path) || exists(filepath.Join(f.root, ".git", "SQUASH_MSG")) {
		t.Fatal("branch, worktree or SQUASH_MSG left behind")
	}
}

func TestDiscard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	if err := f.m.Lock(ctx, "alpha", "swarm up"); err != nil {
		t.Fatal(err)
	}
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "a\n", "alpha: doomed")
	writeFile(t, filepath.Join(wt.Path, "dirty.txt"), "uncommitted\n")
	before := f.git(".", "rev-parse", "HEAD")

	res, err := f.m.Discard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || len(res.Commits) != 1 || !strings.HasSuffix(res.Commits[0], " alpha: doomed") {
		t.Fatalf("Discard = %+v", res)
	}
	if exists(wt.Path) || f.branchExists("swarm/alpha") || exists(filepath.Join(f.root, "a.txt")) {
		t.Fatal("Discard left the worktree or branch, or touched main")
	}
	if f.git(".", "rev-parse", "HEAD") != before {
		t.Fatal("Discard moved main")
	}
}

// conflictFixture: alpha changed line 1 of shared.txt, the operator committed
// a different line 1 on main, bravo added its own file.
func conflictFixture(t *testing.T) (f *fixture, alpha, bravo Worktree, before string) {
	f = newFixture(t)
	f.commitAs("Test Operator", ".", "shared.txt", "original\n", "add shared")
	alpha, bravo = f.ensure("alpha"), f.ensure("bravo")
	f.commitAs("swarm/alpha", alpha.Path, "shared.txt", "alpha's line\n", "alpha: edit shared")
	f.commitAs("swarm/bravo", bravo.Path, "bravo.txt", "bravo\n", "bravo: add file")
	f.commitAs("Test Operator", ".", "shared.txt", "operator's line\n", "operator edits shared")
	return f, alpha, bravo, f.git(".", "rev-parse", "HEAD")
}

func TestMergeConflictAbortsCleanly(t *testing.T) {
	t.Parallel()
	f, alpha, _, before := conflictFixture(t)
	ctx := context.Background()
	alphaTip := f.git(".", "rev-parse", "swarm/alpha")

	_, err := f.m.Merge(ctx, "alpha")
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Merge(alpha) = %v, want a *ConflictError", err)
	}
	if ce.Agent != "alpha" || ce.Branch != "swarm/alpha" || ce.Base != "main" || !slices.Equal(ce.Files, []string{"shared.txt"}) {
		t.Fatalf("ConflictError = %+v", ce)
	}
	if !strings.Contains(err.Error(), "shared.txt") {
		t.Fatalf("error does not name the file: %v", err)
	}
	f.checkUntouched(before, alpha, alphaTip)

	// The others still merge.
	if _, err := f.m.Merge(ctx, "bravo"); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(f.root, "bravo.txt")) != "bravo\n" || f.branchExists("swarm/bravo") {
		t.Fatal("bravo not merged after alpha's conflict")
	}
	if readFile(t, filepath.Join(f.root, "shared.txt")) != "operator's line\n" {
		t.Fatal("shared.txt is not the operator's")
	}
}

func TestSquashConflictAbortsCleanly(t *testing.T) {
	t.Parallel()
	f, alpha, _, before := conflictFixture(t)
	alphaTip := f.git(".", "rev-parse", "swarm/alpha")
	_, err := f.m.Squash(context.Background(), "alpha")
	var ce *ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"shared.txt"}) {
		t.Fatalf("Squash(alpha) = %v, want a conflict in shared.txt", err)
	}
	f.checkUntouched(before, alpha, alphaTip)
	if exists(filepath.Join(f.root, ".git", "SQUASH_MSG")) {
		t.Fatal("SQUASH_MSG left behind")
	}
}

// checkUntouched checks what an aborted merge must leave: main where it was
// with a clean worktree and no merge in progress, the agent's branch and
// worktree kept.
func (f *fixture) checkUntouched(before string, wt Worktree, tip string) {
	f.t.Helper()
	if got := f.git(".", "rev-parse", "HEAD"); got != before {
		f.t.Fatalf("main moved from %s to %s", before, got)
	}
	if st := f.git(".", "status", "--porcelain"); st != "" {
		f.t.Fatalf("main worktree not clean after the abort:\n%s", st)
	}
	if exists(filepath.Join(f.root, ".git", "MERGE_HEAD")) {
		f.t.Fatal("MERGE_HEAD left behind")
	}
	if readFile(f.t, filepath.Join(f.root, "shared.txt")) != "operator's line\n" {
		f.t.Fatal("shared.txt on main is not the operator's")
	}
	if got := f.git(".", "rev-parse", wt.Branch); got != tip {
		f.t.Fatalf("%s moved from %s to %s", wt.Branch, tip, got)
	}
	if f.git(wt.Path, "rev-parse", "--abbrev-ref", "HEAD") != wt.Branch {
		f.t.Fatalf("%s's worktree is gone or off its branch", wt.Agent)
	}
}

func TestMergeRefusesUnreadyMainWorktree(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "a\n", "alpha work")

	// Untracked files in the main worktree are fine to check against.
	writeFile(t, filepath.Join(f.root, "scratch.txt"), "mine\n")
	if err := f.m.CheckBase(ctx); err != nil {
		t.Fatalf("CheckBase with an untracked file = %v", err)
	}
	writeFile(t, filepath.Join(f.root, "README.md"), "# edited\n")
	_, err := f.m.Merge(ctx, "alpha")
	if !errors.Is(err, ErrBaseDirty) || !strings.Contains(err.Error(), "README.md") || !strings.Contains(err.Error(), "commit or stash") {
		t.Fatalf("Merge with a dirty main = %v", err)
	}
	f.git(".", "checkout", "--", "README.md")

	f.git(".", "switch", "-q", "-c", "elsewhere")
	_, err = f.m.Squash(ctx, "alpha")
	if !errors.Is(err, ErrNotOnBase) || !strings.Contains(err.Error(), "git switch main") {
		t.Fatalf("Squash off the base = %v", err)
	}
	if !f.branchExists("swarm/alpha") || !exists(wt.Path) {
		t.Fatal("a refused merge removed the agent's work")
	}
}

func TestMergeRefusedByAnUntrackedFileNamesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "report.md", "agent's\n", "alpha: report")
	writeFile(t, filepath.Join(f.root, "report.md"), "operator's own, untracked\n")
	_, err := f.m.Merge(ctx, "alpha")
	if err == nil || !strings.Contains(err.Error(), "would be overwritten: report.md; move them aside or commit them, then run 'swarm down --merge' again") {
		t.Fatalf("err = %v", err)
	}
	if b := readFile(t, filepath.Join(f.root, "report.md")); b != "operator's own, untracked\n" {
		t.Fatalf("the operator's file changed: %q", b)
	}
}
