package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// helperLanding is the landing the interruption tests run: alpha's commit
// as item T-1, recorded by appending a line to record.
func helperLanding(commit, record string) LandRequest {
	return LandRequest{Key: "item-T-1", Agent: "alpha", Commit: commit, Subject: "swarm: merge T-1",
		Record: func(_ context.Context, l Landing) error {
			f, err := os.OpenFile(record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = f.WriteString("recorded " + l.Commit + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}}
}

// landFixture: alpha's reviewed commit changes f1.txt, deletes f2.txt and
// adds new.txt; alpha committed more after it; the operator committed
// op.txt on main since, so the landing is a real merge.
func landFixture(t *testing.T) (f *fixture, wt Worktree, reviewed, before string) {
	t.Helper()
	f, wt, _ = mergeFixture(t)
	reviewed = f.git(".", "rev-parse", "swarm/alpha")
	f.commitAs("swarm/alpha", wt.Path, "later.txt", "later\n", "alpha: after the review")
	f.commitAs("Test Operator", ".", "op.txt", "the operator's\n", "operator: op.txt")
	return f, wt, reviewed, f.git(".", "rev-parse", "main")
}

// checkLanded checks main holds exactly one merge of reviewed on top of
// before, the checkout is at main with every file, and nothing is left
// in progress.
func (f *fixture) checkLanded(before, reviewed string) string {
	f.t.Helper()
	tip := f.git(".", "rev-parse", "main")
	if got := f.git(".", "rev-parse", tip+"^1", tip+"^2"); got != before+"\n"+reviewed {
		f.t.Fatalf("main's tip %s has parents %q, want %s and %s", tip, got, before, reviewed)
	}
	if n := f.git(".", "rev-list", "--count", "--merges", before+"..main"); n != "1" {
		f.t.Fatalf("%s merges on main since %s, want 1", n, before)
	}
	f.checkCheckout()
	if readFile(f.t, filepath.Join(f.root, "new.txt")) != "alpha's new file\n" || exists(filepath.Join(f.root, "f2.txt")) ||
		exists(filepath.Join(f.root, "later.txt")) || readFile(f.t, filepath.Join(f.root, "op.txt")) != "the operator's\n" {
		f.t.Fatal("the checkout does not hold exactly the reviewed commit merged into main")
	}
	return tip
}

// checkCheckout checks the operator's checkout is clean at HEAD, with no
// merge in progress and no lock.
func (f *fixture) checkCheckout() {
	f.t.Helper()
	if st := f.git(".", "status", "--porcelain"); st != "" {
		f.t.Fatalf("the checkout is not clean:\n%s", st)
	}
	for _, name := range []string{"MERGE_HEAD", "index.lock", "HEAD.lock", "refs/heads/main.lock"} {
		if exists(filepath.Join(f.root, ".git", name)) {
			f.t.Fatalf(".git/%s left behind", name)
		}
	}
}

func (f *fixture) landings() []string {
	f.t.Helper()
	keys, err := f.m.landings()
	if err != nil {
		f.t.Fatal(err)
	}
	return keys
}

// TestLandTakesTheReviewedCommit: a landing merges the commit the review
// saw, not the branch's newer tip, keeps the agent's worktree and branch,
// brings the clean checkout forward and records; again, it lands nothing
// and records again.
func TestLandTakesTheReviewedCommit(t *testing.T) {
	t.Parallel()
	f, wt, reviewed, before := landFixture(t)
	ctx := context.Background()
	record := filepath.Join(t.TempDir(), "record")
	l, err := f.m.Land(ctx, helperLanding(reviewed, record))
	if err != nil {
		t.Fatal(err)
	}
	tip := f.checkLanded(before, reviewed)
	if l.Commit != tip || l.Old != before || l.Base != "main" || !strings.Contains(l.Checkout, "up to date") {
		t.Fatalf("Land = %+v, want %s landed on %s", l, tip, before)
	}
	if got := f.git(".", "log", "-1", "--format=%s"); got != "swarm: merge T-1" {
		t.Fatalf("the merge commit's subject is %q", got)
	}
	if !exists(filepath.Join(wt.Path, "later.txt")) || !f.branchExists("swarm/alpha") {
		t.Fatal("the agent's worktree or branch is gone")
	}
	again, err := f.m.Land(ctx, helperLanding(reviewed, record))
	if err != nil || again.Commit != "" || f.git(".", "rev-parse", "main") != tip {
		t.Fatalf("landing it again = %+v, %v; want nothing landed", again, err)
	}
	if got := readFile(t, record); got != "recorded "+tip+"\nrecorded \n" {
		t.Fatalf("recorded:\n%s", got)
	}
	if keys := f.landings(); len(keys) != 0 {
		t.Fatalf("journal entries left: %v", keys)
	}
}

// TestLandRefuses: a conflict, a dirty checkout and a commit that is not
// on the agent's branch change nothing; a checkout on another branch is
// left alone while the base branch moves.
func TestLandRefuses(t *testing.T) {
	t.Parallel()
	f, alpha, bravo, before := conflictFixture(t)
	ctx := context.Background()
	tip := f.git(".", "rev-parse", "swarm/alpha")
	recorded := 0
	req := func(agent, commit string) LandRequest {
		return LandRequest{Key: "item-" + agent, Agent: agent, Commit: commit, Subject: "swarm: merge " + agent,
			Record: func(context.Context, Landing) error { recorded++; return nil }}
	}
	_, err := f.m.Land(ctx, req("alpha", tip))
	var ce *ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"shared.txt"}) {
		t.Fatalf("Land = %v, want a conflict in shared.txt", err)
	}
	f.checkUntouched(before, alpha, tip)

	bravoTip := f.git(".", "rev-parse", "swarm/bravo")
	if _, err := f.m.Land(ctx, req("alpha", bravoTip)); err == nil || !strings.Contains(err.Error(), "is not on swarm/alpha") {
		t.Fatalf("a commit of another branch: %v", err)
	}
	writeFile(t, filepath.Join(f.root, "shared.txt"), "dirty\n")
	if _, err := f.m.Land(ctx, req("bravo", bravoTip)); !errors.Is(err, ErrBaseDirty) || !strings.Contains(err.Error(), "shared.txt") {
		t.Fatalf("a dirty checkout: %v, want ErrBaseDirty naming shared.txt", err)
	}
	f.git(".", "checkout", "--", "shared.txt")
	writeFile(t, filepath.Join(f.root, "bravo.txt"), "the operator's untracked file\n")
	if _, err := f.m.Land(ctx, req("bravo", bravoTip)); err == nil || !strings.Contains(err.Error(), "bravo.txt") || !strings.Contains(err.Error(), "nothing landed") {
		t.Fatalf("an untracked file in the way: %v", err)
	}
	if recorded != 0 || f.git(".", "rev-parse", "main") != before || len(f.landings()) != 0 {
		t.Fatal("a refused landing changed something")
	}
	if err := os.Remove(filepath.Join(f.root, "bravo.txt")); err != nil {
		t.Fatal(err)
	}

	f.git(".", "switch", "-q", "-c", "elsewhere")
	l, err := f.m.Land(ctx, req("bravo", bravoTip))
	if err != nil {
		t.Fatal(err)
	}
	if f.git(".", "rev-parse", "main^2") != bravoTip || f.git(".", "rev-parse", "HEAD") != before || exists(filepath.Join(f.root, "bravo.txt")) {
		t.Fatal("main did not move, or the checkout on another branch was touched")
	}
	if !strings.Contains(l.Checkout, "branch elsewhere") || !strings.Contains(l.Checkout, "git switch main") || recorded != 1 {
		t.Fatalf("Land = %+v (recorded %d)", l, recorded)
	}
	if !exists(bravo.Path) {
		t.Fatal("bravo's worktree went")
	}
}

// landSteps are the journaled steps a kill is injected after.
var landSteps = []string{"building", "moving", "moved", "landed", "forwarded", "recorded"}

// TestLandKilledAtEachStep kills a landing (kill -9) after each journaled
// step. Whatever the step, main is at its old commit or at the merge, the
// landing is recorded only once main holds it, no lock or MERGE_HEAD is
// left, and every file of the checkout is its old or its new version; the
// next run finishes it: one merge, the checkout clean and forward,
// recorded, the journal empty.
func TestLandKilledAtEachStep(t *testing.T) {
	t.Parallel()
	for _, step := range landSteps {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			f, _, reviewed, before := landFixture(t)
			record := filepath.Join(t.TempDir(), "record")
			interrupt(t, f, "land", "", "SWARM_WT_LAND_KILL="+step, "SWARM_WT_LAND_COMMIT="+reviewed, "SWARM_WT_LAND_RECORD="+record)
			f.checkInterruptedLanding(before, reviewed, record)
			f.finishLanding(before, reviewed, record)
		})
	}
}

// checkInterruptedLanding checks what a killed landing may leave.
func (f *fixture) checkInterruptedLanding(before, reviewed, record string) {
	f.t.Helper()
	main := f.git(".", "rev-parse", "main")
	landed := main != before
	if landed && f.git(".", "rev-parse", "main^1", "main^2") != before+"\n"+reviewed {
		f.t.Fatalf("main is at %s, neither %s nor its merge with %s", main, before, reviewed)
	}
	if exists(record) && !landed {
		f.t.Fatal("the landing was recorded, but main does not hold it")
	}
	for _, name := range []string{"MERGE_HEAD", "index.lock"} {
		if exists(filepath.Join(f.root, ".git", name)) {
			f.t.Fatalf(".git/%s left behind", name)
		}
	}
	for _, p := range []string{"f1.txt", "f2.txt", "new.txt", "op.txt", "README.md", "f5.txt"} {
		got, err := os.ReadFile(filepath.Join(f.root, p))
		have := err == nil
		inOld := f.hasVersion(before, p, string(got), have)
		inNew := landed && f.hasVersion("main", p, string(got), have)
		// Past the move, git may have been killed between unlinking a file
		// it replaces and writing it; the next run finishes it.
		unlinked := landed && !have && f.git(".", "diff", "--name-only", before, "main", "--", p) != ""
		if !inOld && !inNew && !unlinked {
			f.t.Fatalf("%s holds %q (present %v): neither main's old nor its new version", p, got, have)
		}
	}
	if !landed && f.git(".", "status", "--porcelain") != "" {
		f.t.Fatalf("main did not move, but the checkout changed:\n%s", f.git(".", "status", "--porcelain"))
	}
}

// hasVersion reports whether rev's version of p is content (or rev lacks p
// and so does the checkout).
func (f *fixture) hasVersion(rev, p, content string, have bool) bool {
	f.t.Helper()
	files := strings.Split(f.git(".", "ls-tree", "--name-only", rev), "\n")
	if !slices.Contains(files, p) {
		return !have
	}
	return have && f.git(".", "show", rev+":"+p)+"\n" == content
}

// finishLanding is the operator's re-run: CheckBase passes (swarm down
// would not refuse), and Land finishes the landing.
func (f *fixture) finishLanding(before, reviewed, record string) {
	f.t.Helper()
	ctx := context.Background()
	m := f.manager(Options{})
	if err := m.CheckBase(ctx); err != nil {
		f.t.Fatalf("CheckBase after the interruption = %v", err)
	}
	l, err := m.Land(ctx, helperLanding(reviewed, record))
	if err != nil {
		f.t.Fatalf("the re-run: %v", err)
	}
	tip := f.checkLanded(before, reviewed)
	if l.Commit != tip && l.Commit != "" {
		f.t.Fatalf("the re-run's Land = %+v, want %s", l, tip)
	}
	lines := strings.Split(strings.TrimSpace(readFile(f.t, record)), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "recorded") {
		f.t.Fatalf("recorded %q", lines)
	}
	if keys := f.landings(); len(keys) != 0 {
		f.t.Fatalf("journal entries left: %v", keys)
	}
}

// Kills inside the git commands that change something: update-ref (its
// lock written, the ref not yet moved; or the ref moved and HEAD's
// reflog lock left) and the read-tree that brings the checkout forward
// (some files written, a new one half written, one deleted, the
// index.lock left).
func TestLandKilledInsideGit(t *testing.T) {
	t.Parallel()
	triggers := map[string]string{
		"update-ref before the move": `
if [ "$sub" = update-ref ]; then
	: > "$("$REAL_GIT" rev-parse --git-path refs/heads/main.lock)"
	die
fi`,
		"update-ref after the move": `
if [ "$sub" = update-ref ]; then
	"$REAL_GIT" "$@" || exit $?
	: > "$("$REAL_GIT" rev-parse --git-path HEAD.lock)"
	die
fi`,
		"read-tree half way": `
if [ "$sub $next" = "read-tree -m" ] && ! echo " $* " | grep -q " -n "; then
	"$REAL_GIT" show main:f1.txt > f1.txt
	"$REAL_GIT" show main:new.txt | head -c 5 > new.txt
	rm f2.txt
	: > "$("$REAL_GIT" rev-parse --git-dir)/index.lock"
	die
fi`,
		// git replaces a file by unlinking it first: killed in between,
		// the file is missing.
		"read-tree between unlink and write": `
if [ "$sub $next" = "read-tree -m" ] && ! echo " $* " | grep -q " -n "; then
	rm f1.txt
	: > "$("$REAL_GIT" rev-parse --git-dir)/index.lock"
	die
fi`,
	}
	for name, trigger := range triggers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, _, reviewed, before := landFixture(t)
			record := filepath.Join(t.TempDir(), "record")
			interrupt(t, f, "land", trigger, "SWARM_WT_LAND_COMMIT="+reviewed, "SWARM_WT_LAND_RECORD="+record)
			if name == "update-ref before the move" && !exists(filepath.Join(f.root, ".git", "refs/heads/main.lock")) {
				t.Fatal("the trigger left no main.lock")
			}
			m := f.manager(Options{})
			rec, err := m.Recover(context.Background())
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if strings.HasPrefix(name, "read-tree") && !strings.Contains(recoveredText(rec), "finished bringing your checkout") {
				t.Fatalf("Recover said:\n%s", recoveredText(rec))
			}
			f.checkInterruptedLanding(before, reviewed, record)
			if f.git(".", "rev-parse", "main") != before {
				f.checkCheckout() // recovery brought it forward
			}
			f.finishLanding(before, reviewed, record)
		})
	}
}

// A Ctrl-C (ctx cancelled) before the base moves lands nothing and leaves
// no journal; after it moved, the landing is finished regardless: the
// checkout brought forward and the outcome recorded.
func TestLandCancelled(t *testing.T) {
	for _, tc := range []struct {
		step   string
		landed bool
	}{{"building", false}, {"moving", false}, {"moved", true}, {"landed", true}} {
		t.Run(tc.step, func(t *testing.T) {
			f, _, reviewed, before := landFixture(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			landStep = func(s string) {
				if s == tc.step {
					cancel()
				}
			}
			defer func() { landStep = nil }()
			record := filepath.Join(t.TempDir(), "record")
			_, err := f.m.Land(ctx, helperLanding(reviewed, record))
			if tc.landed {
				if err != nil {
					t.Fatalf("Land cancelled after the move = %v, want it finished", err)
				}
				f.checkLanded(before, reviewed)
				if !exists(record) {
					t.Fatal("not recorded")
				}
			} else {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Land cancelled before the move = %v, want context.Canceled", err)
				}
				if f.git(".", "rev-parse", "main") != before || exists(record) {
					t.Fatal("a cancelled landing moved main or recorded")
				}
				f.checkCheckout()
			}
			if keys := f.landings(); len(keys) != 0 {
				t.Fatalf("journal entries left: %v", keys)
			}
		})
	}
}

// Killed after recording and before clearing the journal: the item is
// merged already, so the caller only forgets the entry; nothing else
// changes.
func TestForgetLandingAfterItWasRecorded(t *testing.T) {
	t.Parallel()
	f, _, reviewed, before := landFixture(t)
	record := filepath.Join(t.TempDir(), "record")
	interrupt(t, f, "land", "", "SWARM_WT_LAND_KILL=recorded", "SWARM_WT_LAND_COMMIT="+reviewed, "SWARM_WT_LAND_RECORD="+record)
	if keys := f.landings(); len(keys) != 1 || !exists(record) {
		t.Fatalf("journal %v, recorded %v: want the entry left after the record", keys, exists(record))
	}
	tip := f.checkLanded(before, reviewed)
	if err := f.manager(Options{}).ForgetLanding("item-T-1"); err != nil {
		t.Fatal(err)
	}
	if keys := f.landings(); len(keys) != 0 || f.git(".", "rev-parse", "main") != tip {
		t.Fatalf("journal %v after ForgetLanding, main %s", keys, f.git(".", "rev-parse", "main"))
	}
}
