package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// queueFixture: alpha changes a.txt, bravo b.txt, charlie conflicts with
// the operator's shared.txt.
func queueFixture(t *testing.T) (f *fixture, alpha, bravo, charlie string) {
	t.Helper()
	f = newFixture(t)
	f.commitAs("Test Operator", ".", "shared.txt", "original\n", "add shared")
	a, b, c := f.ensure("alpha"), f.ensure("bravo"), f.ensure("charlie")
	f.commitAs("swarm/alpha", a.Path, "a.txt", "alpha\n", "alpha: a")
	f.commitAs("swarm/bravo", b.Path, "b.txt", "bravo\n", "bravo: b")
	f.commitAs("swarm/charlie", c.Path, "shared.txt", "charlie's line\n", "charlie: shared")
	f.commitAs("Test Operator", ".", "shared.txt", "operator's line\n", "operator edits shared")
	return f, f.git(".", "rev-parse", "swarm/alpha"), f.git(".", "rev-parse", "swarm/bravo"), f.git(".", "rev-parse", "swarm/charlie")
}

// TestTestBatchBuildsAndRunsCI: a batch of two is built on main in order,
// CI runs on the result in a scratch worktree under .swarm/merging (which
// is gone afterwards), and the prepared commit lands with a
// compare-and-set; the operator's clean checkout is brought forward.
func TestTestBatchBuildsAndRunsCI(t *testing.T) {
	t.Parallel()
	f, alpha, bravo, _ := queueFixture(t)
	ctx := context.Background()
	before := f.git(".", "rev-parse", "main")
	seen := filepath.Join(t.TempDir(), "seen")
	res, err := f.m.TestBatch(ctx, BatchRequest{Key: "merge-1-1", Candidates: []BatchCandidate{{Agent: "alpha", Commit: alpha}, {Agent: "bravo", Commit: bravo}},
		CI: "pwd > " + seen + " && test -f a.txt && test -f b.txt && echo all good"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || !res.CIRan || res.Old != before || res.CITail != "all good" {
		t.Fatalf("TestBatch = %+v", res)
	}
	if got := f.git(".", "rev-parse", res.Commit+"^1^1", res.Commit+"^1^2", res.Commit+"^2"); got != before+"\n"+alpha+"\n"+bravo {
		t.Fatalf("the batch's parents are %q", got)
	}
	ran := strings.TrimSpace(readFile(t, seen))
	if !strings.HasPrefix(ran, filepath.Join(f.root, ".swarm", "merging")+"/") || exists(ran) {
		t.Fatalf("CI ran in %s (left: %v), want a scratch worktree under .swarm/merging, removed after", ran, exists(ran))
	}
	if wts := f.git(".", "worktree", "list"); strings.Contains(wts, "merging") {
		t.Fatalf("git still knows the scratch worktree:\n%s", wts)
	}
	if main := f.git(".", "rev-parse", "main"); main != before {
		t.Fatal("testing moved main")
	}
	l, err := f.m.Land(ctx, LandRequest{Key: "merge-1-1", Agent: "alpha", Prepared: res.Commit, Expected: res.Old, Subject: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	if f.git(".", "rev-parse", "main") != res.Commit || l.Commit != res.Commit || l.Behind {
		t.Fatalf("Land = %+v", l)
	}
	f.checkCheckout()
	if readFile(t, filepath.Join(f.root, "b.txt")) != "bravo\n" || len(f.landings()) != 0 {
		t.Fatal("the checkout was not brought forward, or the journal kept the landing")
	}
}

// TestTestBatchConflictAndFailures: a conflict names the candidate and the
// file; CI failing, not executable or hanging fails the batch with the
// reason and the output's tail, and never errors.
func TestTestBatchConflictAndFailures(t *testing.T) {
	t.Parallel()
	f, alpha, _, charlie := queueFixture(t)
	ctx := context.Background()
	res, err := f.m.TestBatch(ctx, BatchRequest{Key: "merge-2-1", Candidates: []BatchCandidate{{Agent: "alpha", Commit: alpha}, {Agent: "charlie", Commit: charlie}}, CI: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conflict == nil || res.Conflict.Index != 1 || res.Conflict.Agent != "charlie" || !slices.Equal(res.Conflict.Files, []string{"shared.txt"}) || res.CIRan {
		t.Fatalf("a conflict: %+v", res)
	}
	script := filepath.Join(t.TempDir(), "ci.sh")
	writeFile(t, script, "#!/bin/sh\necho never\n") // 0644: not executable
	for _, c := range []struct {
		ci, reason, tail string
		timeout          time.Duration
	}{
		{ci: "echo line one; echo the test broke >&2; exit 3", reason: "exit status 3", tail: "the test broke"},
		{ci: script, reason: "cannot be run"},
		{ci: "no-such-ci-command", reason: "not found"},
		{ci: "echo started; sleep 60", reason: "timed out after 200ms", tail: "started", timeout: 200 * time.Millisecond},
	} {
		res, err := f.m.TestBatch(ctx, BatchRequest{Key: "merge-3-1", Candidates: []BatchCandidate{{Agent: "alpha", Commit: alpha}}, CI: c.ci, CITimeout: c.timeout})
		if err != nil {
			t.Fatalf("%s: %v", c.ci, err)
		}
		if !res.CIFailed || res.Passed() || !strings.Contains(res.CIReason, c.reason) || !strings.Contains(res.CITail, c.tail) {
			t.Fatalf("%s: %+v, want a failure saying %q with %q", c.ci, res, c.reason, c.tail)
		}
	}
	// A scratch worktree a crash left is replaced.
	stale := filepath.Join(f.root, ".swarm", "merging", "merge-4-1")
	writeFile(t, filepath.Join(stale, "junk"), "left by a crash\n")
	if res, err := f.m.TestBatch(ctx, BatchRequest{Key: "merge-4-1", Candidates: []BatchCandidate{{Agent: "alpha", Commit: alpha}}, CI: "test ! -e junk"}); err != nil || !res.Passed() {
		t.Fatalf("over a stale scratch worktree: %+v, %v", res, err)
	}
	if exists(stale) {
		t.Fatal("the scratch worktree stayed")
	}
}

// TestLandPreparedBaseMoved: main moved between the test and the landing:
// the compare-and-set refuses, nothing moves, and a new test on the new
// tip lands.
func TestLandPreparedBaseMoved(t *testing.T) {
	t.Parallel()
	f, alpha, _, _ := queueFixture(t)
	ctx := context.Background()
	res, err := f.m.TestBatch(ctx, BatchRequest{Key: "merge-1-1", Candidates: []BatchCandidate{{Agent: "alpha", Commit: alpha}}})
	if err != nil || !res.Passed() || res.CIRan {
		t.Fatalf("TestBatch = %+v, %v", res, err)
	}
	f.commitAs("Test Operator", ".", "op.txt", "moved\n", "operator: moves main")
	moved := f.git(".", "rev-parse", "main")
	recorded := false
	_, err = f.m.Land(ctx, LandRequest{Key: "merge-1-1", Agent: "alpha", Prepared: res.Commit, Expected: res.Old,
		Record: func(context.Context, Landing) error { recorded = true; return nil }})
	if !errors.Is(err, ErrBaseMoved) || recorded || f.git(".", "rev-parse", "main") != moved || len(f.landings()) != 0 {
		t.Fatalf("Land after main moved = %v (recorded %v)", err, recorded)
	}
	res, err = f.m.TestBatch(ctx, BatchRequest{Key: "merge-1-2", Candidates: []BatchCandidate{{Agent: "alpha", Commit: alpha}}})
	if err != nil || !res.Passed() || res.Old != moved {
		t.Fatalf("the retest = %+v, %v", res, err)
	}
	if _, err := f.m.Land(ctx, LandRequest{Key: "merge-1-2", Agent: "alpha", Prepared: res.Commit, Expected: res.Old}); err != nil {
		t.Fatal(err)
	}
	if f.git(".", "rev-parse", "main^1", "main^2") != moved+"\n"+alpha {
		t.Fatal("the retest did not land on the moved main")
	}
}

// TestLandLeavesADirtyCheckout: with uncommitted changes on main, the
// landing still moves main; the checkout's files and index are untouched,
// its HEAD detached at the old tip, and the note says how to catch up.
// A landing that does not happen puts HEAD back on main. Not parallel:
// it sets landStep.
func TestLandLeavesADirtyCheckout(t *testing.T) {
	f, alpha, bravo, _ := queueFixture(t)
	ctx := context.Background()
	before := f.git(".", "rev-parse", "main")
	writeFile(t, filepath.Join(f.root, "shared.txt"), "the operator's uncommitted edit\n")
	status := f.git(".", "status", "--porcelain")
	res, err := f.m.TestBatch(ctx, BatchRequest{Key: "merge-1-1", Candidates: []BatchCandidate{{Agent: "alpha", Commit: alpha}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Land(ctx, LandRequest{Key: "merge-1-1", Agent: "alpha", Prepared: res.Commit, Expected: res.Old}); !errors.Is(err, ErrBaseDirty) {
		t.Fatalf("without LeaveDirty: %v, want ErrBaseDirty", err)
	}
	l, err := f.m.Land(ctx, LandRequest{Key: "merge-1-1", Agent: "alpha", Prepared: res.Commit, Expected: res.Old, LeaveDirty: true})
	if err != nil {
		t.Fatal(err)
	}
	if f.git(".", "rev-parse", "main") != res.Commit || f.git(".", "rev-parse", "HEAD") != before || !l.Behind ||
		!strings.Contains(l.Checkout, "git switch main") || !strings.Contains(l.Checkout, "behind main") {
		t.Fatalf("Land = %+v", l)
	}
	if got := f.git(".", "status", "--porcelain"); got != status || exists(filepath.Join(f.root, "a.txt")) ||
		readFile(t, filepath.Join(f.root, "shared.txt")) != "the operator's uncommitted edit\n" {
		t.Fatalf("the dirty checkout was touched: %q, want %q", got, status)
	}
	// Catching up as the note says keeps the operator's edit.
	f.git(".", "switch", "-q", "main")
	if !exists(filepath.Join(f.root, "a.txt")) || readFile(t, filepath.Join(f.root, "shared.txt")) != "the operator's uncommitted edit\n" {
		t.Fatal("git switch main did not catch up with the edit kept")
	}
	// A landing that fails its compare-and-set puts HEAD back.
	res, err = f.m.TestBatch(ctx, BatchRequest{Key: "merge-2-1", Candidates: []BatchCandidate{{Agent: "bravo", Commit: bravo}}})
	if err != nil {
		t.Fatal(err)
	}
	landStep = func(step string) {
		if step == "detached" {
			f.git(".", "update-ref", "refs/heads/main", res.Old+"^1")
		}
	}
	_, err = f.m.Land(ctx, LandRequest{Key: "merge-2-1", Agent: "bravo", Prepared: res.Commit, Expected: res.Old, LeaveDirty: true})
	landStep = nil
	if err == nil || f.git(".", "symbolic-ref", "HEAD") != "refs/heads/main" {
		t.Fatalf("a landing whose compare-and-set failed: %v, HEAD %s", err, f.git(".", "rev-parse", "--symbolic-full-name", "HEAD"))
	}
}

// TestLandLeavesACheckoutWithFilesInTheWay: untracked files where the
// landing adds tracked ones refuse a landing, but with LeaveDirty it lands
// and leaves the checkout alone, the files untouched.
func TestLandLeavesACheckoutWithFilesInTheWay(t *testing.T) {
	t.Parallel()
	f, _, bravo, _ := queueFixture(t)
	ctx := context.Background()
	res, err := f.m.TestBatch(ctx, BatchRequest{Key: "merge-5-1", Candidates: []BatchCandidate{{Agent: "bravo", Commit: bravo}}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.root, "b.txt"), "the operator's untracked b.txt\n")
	if _, err := f.m.Land(ctx, LandRequest{Key: "merge-5-1", Agent: "bravo", Prepared: res.Commit, Expected: res.Old}); err == nil || !strings.Contains(err.Error(), "b.txt") {
		t.Fatalf("without LeaveDirty: %v, want a refusal naming b.txt", err)
	}
	l, err := f.m.Land(ctx, LandRequest{Key: "merge-5-1", Agent: "bravo", Prepared: res.Commit, Expected: res.Old, LeaveDirty: true})
	if err != nil || !l.Behind || f.git(".", "rev-parse", "main") != res.Commit || f.git(".", "rev-parse", "HEAD") != res.Old ||
		readFile(t, filepath.Join(f.root, "b.txt")) != "the operator's untracked b.txt\n" {
		t.Fatalf("an untracked file in the way: %+v, %v", l, err)
	}
}

// TestCleanScratchUnlocksAKilledWorktreeAdd: a `git worktree add` of a
// scratch worktree killed half way leaves git's record of it locked (and
// an index.lock in it); CleanScratch removes the directory and the record.
func TestCleanScratchUnlocksAKilledWorktreeAdd(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	dir := filepath.Join(f.m.scratchDir(), "merge-1-1")
	f.git(".", "worktree", "add", "-q", "--detach", "--lock", dir, "main")
	admin := strings.TrimSpace(f.git(dir, "rev-parse", "--absolute-git-dir"))
	if err := os.WriteFile(filepath.Join(admin, "index.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.m.CleanScratch(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the scratch worktree is still there: %v", err)
	}
	if _, err := os.Stat(admin); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("git's record of the scratch worktree (and its index.lock) is still there: %v\n%s", err, f.git(".", "worktree", "list"))
	}
}
