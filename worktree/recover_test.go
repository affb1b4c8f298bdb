package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/swarmhq/swarm/internal/text"
)

// These tests interrupt swarm for real: the operation under test runs in a
// child process (this test binary, TestHelperProcess), with a git wrapper
// first on its PATH. The package runs git through os/exec, so the wrapper
// sees every git call; at the chosen one it leaves the repository as a
// git killed half way would, then kills its parent with SIGKILL. The test
// then runs the operation again in-process, with the real git, as the
// operator's re-run would.

// TestHelperProcess is the interrupted swarm; other tests start it.
func TestHelperProcess(t *testing.T) {
	op := os.Getenv("SWARM_WT_HELPER")
	if op == "" {
		t.Skip("started by the interruption tests")
	}
	ctx := context.Background()
	m, err := New(ctx, Options{Root: os.Getenv("SWARM_WT_ROOT"), Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	switch op {
	case "ensure":
		_, err = m.Ensure(ctx, "alpha")
	case "merge":
		_, err = m.Merge(ctx, "alpha")
	case "squash":
		_, err = m.Squash(ctx, "alpha")
	case "land":
		if step := os.Getenv("SWARM_WT_LAND_KILL"); step != "" {
			landStep = func(s string) {
				if s == step {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {} // the signal is on its way
				}
			}
		}
		req := helperLanding(os.Getenv("SWARM_WT_LAND_COMMIT"), os.Getenv("SWARM_WT_LAND_RECORD"))
		req.Remote = os.Getenv("SWARM_WT_LAND_REMOTE")
		_, err = m.Land(ctx, req)
	}
	// The wrapper should have killed this process before it got here.
	fmt.Fprintf(os.Stderr, "helper %s finished: %v\n", op, err)
	os.Exit(3)
}

// wrapperHead finds the git subcommand ($sub) and the word after it
// ($next), skipping global options such as -c key=value, and the last
// argument ($last).
const wrapperHead = `#!/bin/sh
sub= next= skip=
for a in "$@"; do
	if [ -n "$skip" ]; then skip=; continue; fi
	if [ -z "$sub" ]; then
		case "$a" in -c|-C) skip=1; continue;; -*) continue;; esac
		sub=$a; continue
	fi
	next=$a; break
done
for last; do :; done
die() { kill -9 $PPID; exit 1; }
`

// interrupt runs op ("ensure", "merge", "squash") on f's repository in a
// child process whose git is the wrapper: wrapperHead, then trigger (sh
// that calls die at the chosen git call), then the real git. It expects
// the child to be killed.
func interrupt(t *testing.T, f *fixture, op, trigger string, extraEnv ...string) {
	t.Helper()
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := wrapperHead + trigger + "\nexec \"$REAL_GIT\" \"$@\"\n"
	writeFile(t, filepath.Join(bin, "git"), script)
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	var env []string
	for _, kv := range f.env {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"REAL_GIT="+realGit, "SWARM_WT_HELPER="+op, "SWARM_WT_ROOT="+f.root)
	cmd.Env = append(cmd.Env, extraEnv...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper %s was not interrupted: %v\n%s", op, err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper %s ended with %v, not killed by the wrapper:\n%s", op, err, out)
	}
}

func recoveredText(rs []Recovery) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Text + "\n")
	}
	return b.String()
}

func countLines(s, sub string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// removeKilledHalfWay commits alpha's work, then runs a Merge that is
// killed while `git worktree remove` is half done, with f1.txt and f2.txt
// already deleted from the worktree.
func removeKilledHalfWay(t *testing.T) (*fixture, Worktree) {
	t.Helper()
	f, wt := filesFixture(t)
	f.commitAs("swarm/alpha", wt.Path, "work.txt", "work\n", "alpha: work")
	interrupt(t, f, "merge", `
if [ "$sub $next" = "worktree remove" ]; then
	rm -f "$last/f1.txt" "$last/f2.txt"
	die
fi`)
	return f, wt
}

// Issue 13, repro 1: an interrupt while `git worktree remove` is half done
// left a worktree missing files; the re-run auto-committed the deletions
// and merged them into main.
func TestMergeAfterRemoveKilledHalfWay(t *testing.T) {
	t.Parallel()
	f, wt := removeKilledHalfWay(t)
	ctx := context.Background()
	if exists(filepath.Join(wt.Path, "f1.txt")) || !exists(filepath.Join(wt.Path, "f3.txt")) {
		t.Fatal("the wrapper did not delete f1.txt and f2.txt only")
	}
	mergeCommit := f.git(".", "rev-parse", "main")

	res, err := f.manager(Options{}).Merge(ctx, "alpha")
	if err != nil {
		t.Fatalf("re-run Merge: %v\n%s", err, recoveredText(res.Recovered))
	}
	for _, name := range []string{"f1.txt", "f2.txt", "work.txt"} {
		if !exists(filepath.Join(f.root, name)) {
			t.Errorf("%s is missing from main", name)
		}
	}
	if got := f.git(".", "rev-parse", "main"); got != mergeCommit {
		t.Fatalf("the re-run moved main from the interrupted run's merge %s to %s:\n%s", mergeCommit, got, f.git(".", "log", "--oneline", "-5"))
	}
	if res.AutoCommit != "" || res.Commit != mergeCommit || !res.Removed {
		t.Fatalf("Merge = %+v, want no auto-commit, the earlier merge, removed", res)
	}
	if exists(wt.Path) || f.branchExists("swarm/alpha") || exists(f.m.journalPath("alpha")) {
		t.Fatal("worktree, branch or journal left behind")
	}
	rec := recoveredText(res.Recovered)
	if !strings.Contains(rec, "already merged") || !strings.Contains(rec, "put back 2 files") {
		t.Fatalf("Recovered:\n%s", rec)
	}
}

// A recovery cut short while it puts back what an interrupted removal
// deleted leaves a file half written (git writes in place). The next run
// finishes the restore, since the journal says the restore was swarm's,
// and merges; a change nobody restored is still refused (the test above).
func TestRestoreCutShortIsFinished(t *testing.T) {
	t.Parallel()
	f, wt := removeKilledHalfWay(t)
	ctx := context.Background()
	interrupt(t, f, "merge", `
if [ "$sub" = "checkout-index" ]; then
	printf 'fi' > f1.txt
	die
fi`)
	if b, err := os.ReadFile(filepath.Join(wt.Path, "f1.txt")); err != nil || string(b) != "fi" || exists(filepath.Join(wt.Path, "f2.txt")) {
		t.Fatalf("the wrapper did not leave f1.txt half written and f2.txt missing: %q %v", b, err)
	}
	res, err := f.manager(Options{}).Merge(ctx, "alpha")
	if err != nil {
		t.Fatalf("third run: %v\n%s", err, recoveredText(res.Recovered))
	}
	for i, name := range []string{"f1.txt", "f2.txt"} {
		if b, err := os.ReadFile(filepath.Join(f.root, name)); err != nil || string(b) != fmt.Sprintf("file %d\n", i+1) {
			t.Errorf("main's %s = %q, %v", name, b, err)
		}
	}
	if !exists(filepath.Join(f.root, "work.txt")) || exists(wt.Path) {
		t.Fatal("alpha's work not merged, or its worktree left behind")
	}
	if rec := recoveredText(res.Recovered); !strings.Contains(rec, "put back 2 files") {
		t.Fatalf("Recovered:\n%s", rec)
	}
}

// Issue 13, repro 2: Ctrl-C (here kill -9) during the first checkout left
// a partly populated worktree with truncated files and a stale
// index.lock. A later `swarm down --merge` must not merge the damage, and
// `swarm up` must mend it.
func interruptFirstCheckout(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	for i := range 10 {
		writeFile(t, filepath.Join(f.root, fmt.Sprintf("f%d.txt", i)), fmt.Sprintf("file %d\n", i))
	}
	f.git(".", "add", ".")
	f.git(".", "commit", "-q", "-m", "ten files")
	interrupt(t, f, "ensure", `
case "$sub $PWD" in "reset "*/.swarm/worktrees/alpha)
	"$REAL_GIT" show HEAD:f0.txt > f0.txt
	: > f1.txt
	: > "$("$REAL_GIT" rev-parse --git-dir)/index.lock"
	die
esac`)
	return f
}

func TestEnsureAfterFirstCheckoutKilled(t *testing.T) {
	t.Parallel()
	f := interruptFirstCheckout(t)
	path := f.m.Path("alpha")
	if !exists(filepath.Join(path, "f1.txt")) || exists(filepath.Join(path, "f2.txt")) {
		t.Fatal("the wrapper did not leave a partial checkout")
	}
	wt, err := f.manager(Options{}).Ensure(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if st := f.git(path, "status", "--porcelain"); st != "" {
		t.Fatalf("status after the repair:\n%s", st)
	}
	if got := readFile(t, filepath.Join(path, "f1.txt")); got != "file 1\n" {
		t.Fatalf("truncated f1.txt holds %q after the repair", got)
	}
	rec := recoveredText(wt.Recovered)
	if !strings.Contains(rec, "index.lock") || !strings.Contains(rec, "redid the checkout") {
		t.Fatalf("Recovered:\n%s", rec)
	}
}

func TestMergeAfterFirstCheckoutKilled(t *testing.T) {
	t.Parallel()
	f := interruptFirstCheckout(t)
	before := f.git(".", "rev-parse", "main")
	res, err := f.manager(Options{}).Merge(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if res.AutoCommit != "" || res.Commit != "" || f.git(".", "rev-parse", "main") != before {
		t.Fatalf("Merge = %+v; main moved or the damage was saved", res)
	}
	for i := range 10 {
		if !exists(filepath.Join(f.root, fmt.Sprintf("f%d.txt", i))) {
			t.Fatalf("f%d.txt gone from main", i)
		}
	}
	if !strings.Contains(recoveredText(res.Recovered), "redid the checkout") {
		t.Fatalf("Recovered:\n%s", recoveredText(res.Recovered))
	}
}

// mergeFixture: alpha changes f1.txt, adds new.txt and deletes f2.txt.
func mergeFixture(t *testing.T) (*fixture, Worktree, string) {
	t.Helper()
	f, wt := filesFixture(t)
	writeFile(t, filepath.Join(wt.Path, "f1.txt"), "alpha's f1\n")
	writeFile(t, filepath.Join(wt.Path, "new.txt"), "alpha's new file\n")
	if err := os.Remove(filepath.Join(wt.Path, "f2.txt")); err != nil {
		t.Fatal(err)
	}
	f.git(wt.Path, "add", "-A")
	gitEnv(t, append(operatorEnv(f.env), "GIT_AUTHOR_NAME=swarm/alpha"), wt.Path, "commit", "-q", "-m", "alpha: work")
	return f, wt, f.git(".", "rev-parse", "main")
}

// halfMerge leaves the main checkout as a git merge killed half way does:
// some files written and staged, one written but not in the index, one
// deleted, and the index.lock.
const halfMerge = `
if [ "$sub" = merge ]; then
	"$REAL_GIT" checkout refs/heads/swarm/alpha -- f1.txt
	"$REAL_GIT" show refs/heads/swarm/alpha:new.txt > new.txt
	rm f2.txt
	: > "$("$REAL_GIT" rev-parse --git-dir)/index.lock"
	die
fi`

// Issue 13, repro 3: kill -9 during down --merge left .git/index.lock and
// a half-applied merge without MERGE_HEAD; the re-run refused with no
// advice.
func TestMergeRollsBackAHalfAppliedMerge(t *testing.T) {
	t.Parallel()
	f, _, before := mergeFixture(t)
	ctx := context.Background()
	writeFile(t, filepath.Join(f.root, "operator-notes.txt"), "untracked, mine\n")
	interrupt(t, f, "merge", halfMerge)
	if !exists(filepath.Join(f.root, ".git", "index.lock")) || exists(filepath.Join(f.root, "f2.txt")) {
		t.Fatal("the wrapper did not leave a half-applied merge")
	}
	m := f.manager(Options{})
	if err := m.CheckBase(ctx); err != nil {
		t.Fatalf("CheckBase refuses the interrupted merge, which Merge rolls back: %v", err)
	}
	res, err := m.Merge(ctx, "alpha")
	if err != nil {
		t.Fatalf("Merge: %v\n%s", err, recoveredText(res.Recovered))
	}
	rec := recoveredText(res.Recovered)
	if !strings.Contains(rec, "index.lock") || !strings.Contains(rec, "rolled back the merge") || !strings.Contains(rec, text.Short(before, 7)) {
		t.Fatalf("Recovered:\n%s", rec)
	}
	if got := f.git(".", "rev-parse", "main^1"); got != before {
		t.Fatalf("main^1 = %s, want the base tip %s", got, before)
	}
	if readFile(t, filepath.Join(f.root, "f1.txt")) != "alpha's f1\n" || exists(filepath.Join(f.root, "f2.txt")) || !exists(filepath.Join(f.root, "new.txt")) {
		t.Fatal("main does not hold alpha's work")
	}
	if readFile(t, filepath.Join(f.root, "operator-notes.txt")) != "untracked, mine\n" {
		t.Fatal("the operator's untracked file was touched")
	}
	if st := f.git(".", "status", "--porcelain"); st != "?? operator-notes.txt" {
		t.Fatalf("main status:\n%s", st)
	}
}

// halfWrittenMerge is a git merge killed while it wrote f1.txt: the file
// holds the start of alpha's version, the index is the base's, and the
// index.lock is there.
const halfWrittenMerge = `
if [ "$sub" = merge ]; then
	printf "alpha's" > f1.txt
	: > "$("$REAL_GIT" rev-parse --git-dir)/index.lock"
	die
fi`

// CI's R1 (issue 13's kills): a merge killed in the middle of writing a
// file. The file is neither the base's nor the agent's, but it is the
// start of the agent's: the re-run rolls it back and merges.
func TestMergeRollsBackAHalfWrittenFile(t *testing.T) {
	t.Parallel()
	f, _, before := mergeFixture(t)
	ctx := context.Background()
	interrupt(t, f, "merge", halfWrittenMerge)
	if readFile(t, filepath.Join(f.root, "f1.txt")) != "alpha's" {
		t.Fatal("the wrapper did not leave a half-written file")
	}
	m := f.manager(Options{})
	if err := m.CheckBase(ctx); err != nil {
		t.Fatalf("CheckBase refuses the half-written merge, which Merge rolls back: %v", err)
	}
	res, err := m.Merge(ctx, "alpha")
	if err != nil {
		t.Fatalf("Merge: %v\n%s", err, recoveredText(res.Recovered))
	}
	if got := f.git(".", "rev-parse", "main^1"); got != before {
		t.Fatalf("main^1 = %s, want the base tip %s", got, before)
	}
	if readFile(t, filepath.Join(f.root, "f1.txt")) != "alpha's f1\n" || exists(filepath.Join(f.root, "f2.txt")) {
		t.Fatal("main does not hold alpha's work")
	}
}

// halfWrittenNew is a git merge killed just after it created new.txt, a
// file the agent adds, and before it wrote a byte of it.
const halfWrittenNew = `
if [ "$sub" = merge ]; then
	: > new.txt
	: > "$("$REAL_GIT" rev-parse --git-dir)/index.lock"
	die
fi`

// CI's R8: a merge killed while it created a file the agent adds left it
// empty and untracked; the re-run took it for the operator's, said the
// interrupted run changed nothing, and the merge then refused to overwrite
// it. The start of the agent's new file is the merge's: it is rolled back.
func TestMergeRollsBackAHalfWrittenNewFile(t *testing.T) {
	t.Parallel()
	f, _, before := mergeFixture(t)
	ctx := context.Background()
	interrupt(t, f, "merge", halfWrittenNew)
	if !exists(filepath.Join(f.root, "new.txt")) || readFile(t, filepath.Join(f.root, "new.txt")) != "" {
		t.Fatal("the wrapper did not leave an empty new.txt")
	}
	m := f.manager(Options{})
	res, err := m.Merge(ctx, "alpha")
	if err != nil {
		t.Fatalf("Merge: %v\n%s", err, recoveredText(res.Recovered))
	}
	if rec := recoveredText(res.Recovered); !strings.Contains(rec, "rolled back the merge") {
		t.Fatalf("Recovered:\n%s", rec)
	}
	if got := f.git(".", "rev-parse", "main^1"); got != before {
		t.Fatalf("main^1 = %s, want the base tip %s", got, before)
	}
	if got, want := readFile(t, filepath.Join(f.root, "new.txt")), f.git(".", "show", "main:new.txt")+"\n"; got != want || got == "\n" {
		t.Fatalf("new.txt = %q, want alpha's %q", got, want)
	}
}

// An operator's edit of a file the merge changes is not the start of the
// agent's version: the merge is refused and the edit kept.
func TestMergeRollbackKeepsAnEditOfAMergedFile(t *testing.T) {
	t.Parallel()
	f, _, _ := mergeFixture(t)
	ctx := context.Background()
	interrupt(t, f, "merge", halfWrittenMerge)
	writeFile(t, filepath.Join(f.root, "f1.txt"), "the operator's f1\n")
	m := f.manager(Options{})
	if _, err := m.Merge(ctx, "alpha"); !(errors.Is(err, ErrInterrupted) || errors.Is(err, ErrBaseDirty)) || !strings.Contains(err.Error(), "f1.txt") {
		t.Fatalf("Merge = %v, want a refusal naming f1.txt", err)
	}
	if readFile(t, filepath.Join(f.root, "f1.txt")) != "the operator's f1\n" {
		t.Fatal("the refused rollback touched the operator's edit")
	}
}

// Changes in the main checkout that are not the merge's stop the rollback:
// nothing is touched, and the error says what to do.
func TestMergeRollbackRefusesTheOperatorsChanges(t *testing.T) {
	t.Parallel()
	f, _, before := mergeFixture(t)
	ctx := context.Background()
	interrupt(t, f, "merge", halfMerge)
	writeFile(t, filepath.Join(f.root, "README.md"), "the operator's edit\n")
	m := f.manager(Options{})
	if err := m.CheckBase(ctx); !errors.Is(err, ErrBaseDirty) || !strings.Contains(err.Error(), "an interrupted swarm down was merging swarm/alpha, and these changes are not what that merge writes: M README.md;") {
		t.Fatalf("CheckBase = %v, want ErrBaseDirty naming README.md as not the merge's", err)
	}
	_, err := m.Merge(ctx, "alpha")
	if !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "README.md") || !strings.Contains(err.Error(), "reset --merge") {
		t.Fatalf("Merge = %v, want ErrInterrupted naming README.md and the way out", err)
	}
	if readFile(t, filepath.Join(f.root, "README.md")) != "the operator's edit\n" || readFile(t, filepath.Join(f.root, "f1.txt")) != "alpha's f1\n" {
		t.Fatal("the refused rollback touched the checkout")
	}
	if f.git(".", "rev-parse", "main") != before || !f.branchExists("swarm/alpha") {
		t.Fatal("main moved or the branch is gone")
	}
}

// kill -9 between `git merge --squash` and its commit left the squash
// staged; the re-run rolls it back and squashes once.
func TestSquashRollsBackAStagedSquash(t *testing.T) {
	t.Parallel()
	f, _, before := mergeFixture(t)
	ctx := context.Background()
	root, err := filepath.EvalSymlinks(f.root)
	if err != nil {
		t.Fatal(err)
	}
	interrupt(t, f, "squash", fmt.Sprintf(`
if [ "$sub" = commit ] && [ "$(pwd -P)" = %q ]; then die; fi`, root))
	if st := f.git(".", "status", "--porcelain"); !strings.Contains(st, "A  new.txt") {
		t.Fatalf("the squash is not staged:\n%s", st)
	}
	res, err := f.manager(Options{}).Squash(ctx, "alpha")
	if err != nil {
		t.Fatalf("Squash: %v\n%s", err, recoveredText(res.Recovered))
	}
	if !strings.Contains(recoveredText(res.Recovered), "rolled back the squash") {
		t.Fatalf("Recovered:\n%s", recoveredText(res.Recovered))
	}
	if got := f.git(".", "rev-parse", "main^"); got != before {
		t.Fatalf("main^ = %s, want %s: not one squash commit", got, before)
	}
	if n := countLines(f.git(".", "log", "--format=%s"), "swarm: squash agent alpha"); n != 1 {
		t.Fatalf("%d squash commits", n)
	}
	if st := f.git(".", "status", "--porcelain"); st != "" || exists(filepath.Join(f.root, ".git", "SQUASH_MSG")) {
		t.Fatalf("main not clean after the squash:\n%s", st)
	}
}

// A stale index.lock in the main checkout (a git merge killed) is removed
// by Recover unless some live process holds it: one with it open, or a git
// running in the main checkout, but not one running in an agent's
// worktree.
func TestStaleIndexLocks(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc: the lock cannot be checked")
	}
	f, wt := filesFixture(t)
	ctx := context.Background()
	mainLock := filepath.Join(f.root, ".git", "index.lock")
	agentLock := filepath.Join(f.root, ".git", "worktrees", "alpha", "index.lock")
	writeFile(t, mainLock, "")

	fd, err := os.Open(mainLock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Recover(ctx); !errors.Is(err, ErrLockHeld) || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("Recover with the lock open = %v, want ErrLockHeld naming this process", err)
	}
	fd.Close()
	stop := runGit(t, f.root)
	if _, err := f.m.Recover(ctx); !errors.Is(err, ErrLockHeld) || !strings.Contains(err.Error(), "git process") {
		t.Fatalf("Recover with git running in main = %v, want ErrLockHeld", err)
	}
	stop()

	writeFile(t, agentLock, "")
	stop = runGit(t, wt.Path)
	rec, err := f.m.Recover(ctx, "alpha")
	if err != nil {
		t.Fatalf("Recover with git running in the worktree only = %v", err)
	}
	if exists(mainLock) || !exists(agentLock) {
		t.Fatal("Recover removed the held lock or kept the stale one")
	}
	stop()
	rec2, err := f.m.Recover(ctx, "alpha")
	if err != nil || exists(agentLock) {
		t.Fatalf("Recover = %v; agent lock left: %v", err, exists(agentLock))
	}
	if n := strings.Count(recoveredText(append(rec, rec2...)), "index.lock"); n != 2 {
		t.Fatalf("Recovered:\n%s", recoveredText(append(rec, rec2...)))
	}
	f.git(".", "commit", "-q", "--allow-empty", "-m", "main works")
	writeFile(t, filepath.Join(wt.Path, "new.txt"), "x\n")
	f.git(wt.Path, "add", "new.txt")
}

// kill -9 right after the merge commit, before swarm recorded it: the
// re-run finds the commit on main and never saves the worktree again, so
// damage there cannot be merged on top.
func TestMergeKilledAfterItsCommitIsNotRedone(t *testing.T) {
	t.Parallel()
	f, wt, _ := mergeFixture(t)
	ctx := context.Background()
	root, err := filepath.EvalSymlinks(f.root)
	if err != nil {
		t.Fatal(err)
	}
	interrupt(t, f, "merge", fmt.Sprintf(`
if [ "$sub $next" = "rev-parse HEAD" ] && [ "$(pwd -P)" = %q ]; then die; fi`, root))
	merged := f.git(".", "rev-parse", "main")
	if !strings.HasPrefix(f.git(".", "log", "-1", "--format=%s"), "swarm: merge agent alpha") {
		t.Fatal("the helper was not killed after the merge commit")
	}
	if err := os.Remove(filepath.Join(wt.Path, "f5.txt")); err != nil {
		t.Fatal(err)
	}
	m := f.manager(Options{})
	_, err = m.Merge(ctx, "alpha")
	if !errors.Is(err, ErrUnsafeAutoCommit) || !strings.Contains(err.Error(), "already merged") || !strings.Contains(err.Error(), "f5.txt") {
		t.Fatalf("Merge = %v, want ErrUnsafeAutoCommit: merged already, f5.txt changed", err)
	}
	if f.git(".", "rev-parse", "main") != merged || !exists(filepath.Join(f.root, "f5.txt")) {
		t.Fatal("main changed")
	}
	f.git(wt.Path, "restore", "f5.txt")
	res, err := m.Merge(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != merged || res.AutoCommit != "" || !res.Removed || f.git(".", "rev-parse", "main") != merged {
		t.Fatalf("Merge = %+v, want the interrupted run's merge %s, finished", res, merged)
	}
}

// Recover, called first by `swarm up` and `swarm down`, reports what it
// did, and nothing when nothing was interrupted.
func TestRecoverReports(t *testing.T) {
	t.Parallel()
	f := interruptFirstCheckout(t)
	ctx := context.Background()
	m := f.manager(Options{})
	rec, err := m.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	text := recoveredText(rec)
	if len(rec) != 2 || !strings.Contains(text, "index.lock") || !strings.Contains(text, "redid the checkout") || rec[0].Agent != "alpha" {
		t.Fatalf("Recover:\n%s", text)
	}
	if st := f.git(m.Path("alpha"), "status", "--porcelain"); st != "" {
		t.Fatalf("status after Recover:\n%s", st)
	}
	if rec, err := m.Recover(ctx, "alpha"); err != nil || len(rec) != 0 {
		t.Fatalf("second Recover = %v, %v; want nothing to do", rec, err)
	}
}

// A merge killed before it changed anything leaves no trace in the main
// checkout; the operator's own edits there are theirs, not the merge's:
// Merge refuses them as usual, and touches nothing.
func TestMergeKilledBeforeItStartedLeavesTheOperatorsEdits(t *testing.T) {
	t.Parallel()
	f, _, before := mergeFixture(t)
	ctx := context.Background()
	interrupt(t, f, "merge", `if [ "$sub" = merge ]; then die; fi`)
	writeFile(t, filepath.Join(f.root, "README.md"), "the operator's edit\n")
	res, err := f.manager(Options{}).Merge(ctx, "alpha")
	if !errors.Is(err, ErrBaseDirty) || !strings.Contains(err.Error(), "README.md") {
		t.Fatalf("Merge = %v, want ErrBaseDirty naming README.md", err)
	}
	if !strings.Contains(recoveredText(res.Recovered), "changed nothing") {
		t.Fatalf("Recovered:\n%s", recoveredText(res.Recovered))
	}
	if readFile(t, filepath.Join(f.root, "README.md")) != "the operator's edit\n" || f.git(".", "rev-parse", "main") != before {
		t.Fatal("the operator's edit or main was touched")
	}
}

// The removal got as far as the worktree's .git file: git no longer knows
// the directory as a worktree. The re-run forgets it, keeps its remains
// aside, and finishes, merging nothing more.
func TestMergeAfterRemoveKilledPastTheGitFile(t *testing.T) {
	t.Parallel()
	f, wt := filesFixture(t)
	ctx := context.Background()
	f.commitAs("swarm/alpha", wt.Path, "work.txt", "work\n", "alpha: work")
	interrupt(t, f, "merge", `
if [ "$sub $next" = "worktree remove" ]; then
	rm -f "$last/.git" "$last/f1.txt"
	die
fi`)
	merged := f.git(".", "rev-parse", "main")
	res, err := f.manager(Options{}).Merge(ctx, "alpha")
	if err != nil {
		t.Fatalf("re-run Merge: %v\n%s", err, recoveredText(res.Recovered))
	}
	orphan := filepath.Join(f.root, ".swarm", "orphans", "alpha-20250102-030405")
	if !strings.Contains(recoveredText(res.Recovered), orphan) || readFile(t, filepath.Join(orphan, "work.txt")) != "work\n" {
		t.Fatalf("remains not kept at %s:\n%s", orphan, recoveredText(res.Recovered))
	}
	if f.git(".", "rev-parse", "main") != merged || !exists(filepath.Join(f.root, "f1.txt")) || f.branchExists("swarm/alpha") || exists(wt.Path) {
		t.Fatal("main changed, or the branch or worktree is left")
	}
	if list := f.git(".", "worktree", "list", "--porcelain"); strings.Contains(list, "alpha") {
		t.Fatalf("git still lists the worktree:\n%s", list)
	}
}

// `git worktree add` itself cut short leaves a worktree locked
// "initializing" with no HEAD; Ensure removes it and makes it again.
func TestEnsureAfterWorktreeAddKilled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.m.BaseBranch(ctx); err != nil {
		t.Fatal(err)
	}
	path := f.m.Path("alpha")
	if err := f.m.writeJournal(ctx, journal{Agent: "alpha", State: statePopulating, Op: opEnsure}); err != nil {
		t.Fatal(err)
	}
	f.git(".", "worktree", "add", "-q", "--no-checkout", "-b", "swarm/alpha", path, "main")
	admin := filepath.Join(f.root, ".git", "worktrees", "alpha")
	writeFile(t, filepath.Join(admin, "HEAD"), strings.Repeat("0", 40)+"\n")
	writeFile(t, filepath.Join(admin, "locked"), "initializing")

	wt, err := f.manager(Options{}).Ensure(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(recoveredText(wt.Recovered), "creation an interrupted run had cut short") {
		t.Fatalf("Recovered:\n%s", recoveredText(wt.Recovered))
	}
	if f.git(path, "rev-parse", "--abbrev-ref", "HEAD") != "swarm/alpha" || f.git(path, "status", "--porcelain") != "" || !exists(filepath.Join(path, "README.md")) {
		t.Fatal("the worktree was not made again")
	}
}

// Issue 28 item 2: git writes MERGE_HEAD before its merge commit and
// removes it after; a kill in between left the commit on main and
// MERGE_HEAD behind, and the re-run refused ("a merge is in progress;
// finish it (git commit)"), advice that would merge twice. CheckBase lets
// it through, and the recovery clears it.
func TestMergeKilledBeforeGitClearedMergeHead(t *testing.T) {
	t.Parallel()
	f, wt, before := mergeFixture(t)
	ctx := context.Background()
	interrupt(t, f, "merge", `
if [ "$sub $next" = "merge --no-ff" ]; then
	"$REAL_GIT" "$@" || exit $?
	"$REAL_GIT" rev-parse "$last" > "$("$REAL_GIT" rev-parse --git-path MERGE_HEAD)"
	echo "swarm: merge agent alpha" > "$("$REAL_GIT" rev-parse --git-path MERGE_MSG)"
	die
fi`)
	merged := f.git(".", "rev-parse", "main")
	if merged == before || !exists(filepath.Join(f.root, ".git", "MERGE_HEAD")) {
		t.Fatal("the helper was not killed between the merge commit and MERGE_HEAD's removal")
	}
	m := f.manager(Options{})
	if err := m.CheckBase(ctx); err != nil {
		t.Fatalf("CheckBase = %v, want nil: HEAD holds MERGE_HEAD", err)
	}
	rec, err := m.Recover(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(recoveredText(rec), "cleared the MERGE_HEAD") {
		t.Fatalf("Recover said:\n%s", recoveredText(rec))
	}
	if exists(filepath.Join(f.root, ".git", "MERGE_HEAD")) || exists(filepath.Join(f.root, ".git", "MERGE_MSG")) {
		t.Fatal("MERGE_HEAD or MERGE_MSG is still there")
	}
	res, err := m.Merge(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != merged || f.git(".", "rev-parse", "main") != merged || exists(wt.Path) {
		t.Fatalf("Merge = %+v; main %s, want the interrupted run's merge %s, finished", res, f.git(".", "rev-parse", "main"), merged)
	}
	if n := f.git(".", "rev-list", "--count", "--merges", before+"..main"); n != "1" {
		t.Fatalf("%s merge commits on main, want 1", n)
	}
}

// A MERGE_HEAD swarm did not leave (the operator's own merge) is still
// refused.
func TestCheckBaseRefusesTheOperatorsMerge(t *testing.T) {
	t.Parallel()
	f, _, _ := mergeFixture(t)
	f.git(".", "switch", "-q", "-c", "side")
	writeFile(t, filepath.Join(f.root, "side.txt"), "side\n")
	f.git(".", "add", "side.txt")
	f.git(".", "commit", "-q", "-m", "side")
	f.git(".", "switch", "-q", "main")
	f.git(".", "merge", "-q", "--no-ff", "--no-commit", "side")
	if err := f.manager(Options{}).CheckBase(context.Background()); !errors.Is(err, ErrBaseDirty) || !strings.Contains(err.Error(), "a merge is in progress") {
		t.Fatalf("CheckBase = %v, want the merge in progress refused", err)
	}
}

// git replaces a file by unlinking it and writing the new one: a merge
// killed in between leaves the file missing. That is the merge's doing,
// rolled back like the rest, not a change of the operator's to refuse.
func TestMergeRollsBackAFileUnlinkedMidWrite(t *testing.T) {
	t.Parallel()
	f, _, before := mergeFixture(t)
	interrupt(t, f, "merge", `
if [ "$sub" = merge ]; then
	rm f1.txt
	: > "$("$REAL_GIT" rev-parse --git-dir)/index.lock"
	die
fi`)
	if exists(filepath.Join(f.root, "f1.txt")) {
		t.Fatal("the wrapper did not unlink f1.txt")
	}
	res, err := f.manager(Options{}).Merge(context.Background(), "alpha")
	if err != nil {
		t.Fatalf("Merge: %v\n%s", err, recoveredText(res.Recovered))
	}
	if !strings.Contains(recoveredText(res.Recovered), "rolled back the merge") || f.git(".", "rev-parse", "main^1") != before {
		t.Fatalf("Recovered:\n%s", recoveredText(res.Recovered))
	}
	if readFile(t, filepath.Join(f.root, "f1.txt")) != "alpha's f1\n" || f.git(".", "status", "--porcelain") != "" {
		t.Fatal("main does not hold alpha's work, clean")
	}
}
