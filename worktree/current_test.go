package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// currentFixture: alpha committed work.txt on its branch; since, bob and
// carol (as agents) and the operator landed three commits on main that
// touch other files (one of them adds new.txt), so bringing alpha up to
// date is a clean, real merge.
func currentFixture(t *testing.T) (f *fixture, wt Worktree, tip, mainTip string) {
	t.Helper()
	f, wt = filesFixture(t)
	f.commitAs("swarm/alpha", wt.Path, "work.txt", "alpha's work\n", "alpha: work")
	f.commitAs("swarm/bob", ".", "f1.txt", "bob's f1\n", "bob: f1")
	f.commitAs("swarm/carol", ".", "new.txt", "carol's new file\n", "carol: new")
	f.commitAs("swarm/bob", ".", "f2.txt", "bob's f2\n", "bob: f2")
	return f, wt, f.git(".", "rev-parse", "swarm/alpha"), f.git(".", "rev-parse", "main")
}

// checkCurrent checks alpha's branch is one merge of mainTip on top of
// tip, its worktree clean at it with main's files, nothing left in
// progress, and the journal empty.
func (f *fixture) checkCurrent(wt Worktree, tip, mainTip string) {
	f.t.Helper()
	head := f.git(".", "rev-parse", "swarm/alpha")
	if got := f.git(".", "rev-parse", head+"^1", head+"^2"); got != tip+"\n"+mainTip {
		f.t.Fatalf("swarm/alpha's tip %s has parents %q, want %s and %s", head, got, tip, mainTip)
	}
	if subj := f.git(".", "log", "-1", "--format=%s", head); subj != CurrentSubject("alpha", "main", mainTip) {
		f.t.Fatalf("merge subject %q", subj)
	}
	f.checkAlphaWorktree(wt)
	if readFile(f.t, filepath.Join(wt.Path, "new.txt")) != "carol's new file\n" || readFile(f.t, filepath.Join(wt.Path, "f1.txt")) != "bob's f1\n" ||
		readFile(f.t, filepath.Join(wt.Path, "work.txt")) != "alpha's work\n" {
		f.t.Fatal("the worktree does not hold main merged into alpha's work")
	}
	if names, _ := journalNames(f.m.currentDir(), checkAgent); len(names) != 0 {
		f.t.Fatalf("journal left: %v", names)
	}
}

// checkAlphaWorktree checks alpha's worktree is clean, on its branch, with
// no merge in progress and no lock.
func (f *fixture) checkAlphaWorktree(wt Worktree) {
	f.t.Helper()
	if st := f.git(wt.Path, "status", "--porcelain"); st != "" {
		f.t.Fatalf("alpha's worktree is not clean:\n%s", st)
	}
	if h := f.git(wt.Path, "symbolic-ref", "HEAD"); h != "refs/heads/swarm/alpha" {
		f.t.Fatalf("alpha's worktree is on %s", h)
	}
	gitdir := f.git(wt.Path, "rev-parse", "--absolute-git-dir")
	for _, name := range []string{"MERGE_HEAD", "index.lock"} {
		if exists(filepath.Join(gitdir, name)) {
			f.t.Fatalf("%s left in alpha's worktree", name)
		}
	}
}

// TestKeepCurrentMergesTheBase: a branch behind main gets one merge
// commit saying so, its worktree switched with it; what it merged is
// counted and named; a second run has nothing to do.
func TestKeepCurrentMergesTheBase(t *testing.T) {
	t.Parallel()
	f, wt, tip, mainTip := currentFixture(t)
	ctx := context.Background()
	res, err := f.m.KeepCurrent(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Merged() || res.FastForward || res.Old != tip || res.BaseTip != mainTip || res.Behind != 3 || !slices.Equal(res.Authors, []string{"bob", "carol"}) {
		t.Fatalf("KeepCurrent = %+v", res)
	}
	f.checkCurrent(wt, tip, mainTip)
	if res.New != f.git(".", "rev-parse", "swarm/alpha") {
		t.Fatalf("New %s is not the branch's tip", res.New)
	}
	again, err := f.m.KeepCurrent(ctx, "alpha")
	if err != nil || again.Merged() || again.Behind != 0 {
		t.Fatalf("second KeepCurrent = %+v, %v; want nothing to do", again, err)
	}
}

// TestKeepCurrentFastForwards: a branch with no commit of its own becomes
// main's tip, with no merge commit.
func TestKeepCurrentFastForwards(t *testing.T) {
	t.Parallel()
	f, _ := filesFixture(t)
	wt := f.ensure("alpha")
	f.commitAs("swarm/bob", ".", "f1.txt", "bob's f1\n", "bob: f1")
	res, err := f.m.KeepCurrent(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !res.FastForward || res.New != f.git(".", "rev-parse", "main") || f.git(".", "rev-parse", "swarm/alpha") != res.New {
		t.Fatalf("KeepCurrent = %+v", res)
	}
	f.checkAlphaWorktree(wt)
	if readFile(t, filepath.Join(wt.Path, "f1.txt")) != "bob's f1\n" {
		t.Fatal("the worktree was not switched")
	}
}

// TestKeepCurrentNeverMergesAConflict: a conflict is reported with its
// files; the branch, the worktree and the index stay as they were.
func TestKeepCurrentNeverMergesAConflict(t *testing.T) {
	t.Parallel()
	f, _ := filesFixture(t)
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "f1.txt", "alpha's f1\n", "alpha: f1")
	f.commitAs("swarm/bob", ".", "f1.txt", "bob's f1\n", "bob: f1")
	tip := f.git(".", "rev-parse", "swarm/alpha")
	res, err := f.m.KeepCurrent(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if res.Merged() || !slices.Equal(res.Conflicts, []string{"f1.txt"}) || res.Behind != 1 {
		t.Fatalf("KeepCurrent = %+v, want the conflict in f1.txt", res)
	}
	if f.git(".", "rev-parse", "swarm/alpha") != tip || readFile(t, filepath.Join(wt.Path, "f1.txt")) != "alpha's f1\n" {
		t.Fatal("a conflict moved the branch or the worktree")
	}
	f.checkAlphaWorktree(wt)
}

// TestKeepCurrentLeavesADirtyWorktree: uncommitted changes, or an
// untracked file where main adds one, stop it this time; nothing moves.
func TestKeepCurrentLeavesADirtyWorktree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, want string
	}{
		{"modified", "f3.txt", " M f3.txt"},
		{"untracked in the way", "new.txt", "?? new.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, wt, tip, _ := currentFixture(t)
			writeFile(t, filepath.Join(wt.Path, tc.file), "uncommitted\n")
			res, err := f.m.KeepCurrent(context.Background(), "alpha")
			if err != nil {
				t.Fatal(err)
			}
			if res.Merged() || !slices.Equal(res.Dirty, []string{tc.want}) || res.Behind != 3 {
				t.Fatalf("KeepCurrent = %+v, want it skipped for %q", res, tc.want)
			}
			if f.git(".", "rev-parse", "swarm/alpha") != tip || readFile(t, filepath.Join(wt.Path, tc.file)) != "uncommitted\n" {
				t.Fatal("a dirty worktree was touched")
			}
			if exists(filepath.Join(wt.Path, "f1.txt")) && readFile(t, filepath.Join(wt.Path, "f1.txt")) != "file 1\n" {
				t.Fatal("main's files were written into a dirty worktree")
			}
			if names, _ := journalNames(f.m.currentDir(), checkAgent); len(names) != 0 {
				t.Fatalf("journal left: %v", names)
			}
		})
	}
}

// TestCurrentHelperProcess is a KeepCurrent that the tests below kill.
func TestCurrentHelperProcess(t *testing.T) {
	if os.Getenv("SWARM_WT_CURRENT_HELPER") == "" {
		t.Skip("started by the interruption tests")
	}
	ctx := context.Background()
	m, err := New(ctx, Options{Root: os.Getenv("SWARM_WT_ROOT"), Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if step := os.Getenv("SWARM_WT_CURRENT_KILL"); step != "" {
		currentStep = func(s string) {
			if s == step {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
	}
	_, err = m.KeepCurrent(ctx, "alpha")
	fmt.Fprintf(os.Stderr, "helper finished: %v\n", err)
	os.Exit(3)
}

// killCurrent runs KeepCurrent of alpha in a child process killed (kill
// -9) after step, or, with trigger, by the git wrapper (see interrupt).
func killCurrent(t *testing.T, f *fixture, step, trigger string) {
	t.Helper()
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "git"), wrapperHead+trigger+"\nexec \"$REAL_GIT\" \"$@\"\n")
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCurrentHelperProcess$")
	for _, kv := range f.env {
		if !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "REAL_GIT="+realGit,
		"SWARM_WT_CURRENT_HELPER=1", "SWARM_WT_ROOT="+f.root, "SWARM_WT_CURRENT_KILL="+step)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper was not killed: %v\n%s", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, not killed:\n%s", err, out)
	}
}

// TestKeepCurrentKilledAtEachStep kills KeepCurrent (kill -9) after each
// step, and in the middle of read-tree (half a file written, the
// index.lock left). Whatever the point, the branch is at its old tip or at
// the merge and no MERGE_HEAD is left; the next run finishes: one merge,
// the worktree clean at it, no lock, the journal empty.
func TestKeepCurrentKilledAtEachStep(t *testing.T) {
	t.Parallel()
	halfWay := `
if [ "$sub" = "read-tree" ]; then
	gitdir=$("$REAL_GIT" rev-parse --absolute-git-dir)
	: > "$gitdir/index.lock"
	printf 'carol' > new.txt
	printf 'bob' > f1.txt
	die
fi`
	for _, tc := range []struct{ step, trigger string }{
		{"journaled", ""}, {"read-tree", halfWay}, {"files", ""}, {"moved", ""},
	} {
		t.Run(tc.step, func(t *testing.T) {
			t.Parallel()
			f, wt, tip, mainTip := currentFixture(t)
			killCurrent(t, f, tc.step, tc.trigger)
			now := f.git(".", "rev-parse", "swarm/alpha")
			if now != tip && f.git(".", "rev-parse", now+"^1", now+"^2") != tip+"\n"+mainTip {
				t.Fatalf("swarm/alpha is at %s, neither %s nor its merge with main", now, tip)
			}
			gitdir := f.git(wt.Path, "rev-parse", "--absolute-git-dir")
			if exists(filepath.Join(gitdir, "MERGE_HEAD")) {
				t.Fatal("MERGE_HEAD left in alpha's worktree")
			}
			if tc.step == "files" {
				// swarm up's recovery finishes it as well.
				rec, err := f.m.Recover(context.Background())
				if err != nil || !strings.Contains(recoveredText(rec), "finished bringing swarm/alpha up to date") {
					t.Fatalf("Recover = %v, %v", recoveredText(rec), err)
				}
			}
			res, err := f.m.KeepCurrent(context.Background(), "alpha")
			if err != nil {
				t.Fatalf("KeepCurrent after the kill: %v", err)
			}
			f.checkCurrent(wt, tip, mainTip)
			if n := f.git(".", "rev-list", "--count", "--merges", tip+"..swarm/alpha"); n != "1" {
				t.Fatalf("%s merges on swarm/alpha, want 1", n)
			}
			if tc.step != "journaled" && tc.step != "files" && len(res.Recovered) == 0 {
				t.Fatalf("nothing reported recovered: %+v", res)
			}
		})
	}
}

// TestKeepCurrentKilledLeavesTheAgentsWork: after a kill half way, a
// change that is not the merge's (the agent's, or the operator's) makes
// the next run touch nothing and say what to do; Recover says the same.
func TestKeepCurrentKilledLeavesTheAgentsWork(t *testing.T) {
	t.Parallel()
	f, wt, tip, _ := currentFixture(t)
	killCurrent(t, f, "files", "")
	writeFile(t, filepath.Join(wt.Path, "f5.txt"), "someone's edit\n")
	_, err := f.m.KeepCurrent(context.Background(), "alpha")
	if !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "f5.txt") || !strings.Contains(err.Error(), "reset --hard") {
		t.Fatalf("KeepCurrent = %v, want ErrInterrupted naming f5.txt and what to do", err)
	}
	if f.git(".", "rev-parse", "swarm/alpha") != tip || readFile(t, filepath.Join(wt.Path, "f5.txt")) != "someone's edit\n" {
		t.Fatal("the worktree or the branch was touched")
	}
	if _, err := f.m.Recover(context.Background()); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Recover = %v, want ErrInterrupted", err)
	}
}

// TestKeepCurrentAtBaseTakesNoLock: a branch at the base's tip is up to
// date without waiting for the manager's lock, so the agents of a swarm
// starting at once are not checked one at a time.
func TestKeepCurrentAtBaseTakesNoLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.ensure("alpha")
	mainTip := f.git(".", "rev-parse", "main")
	f.m.mu.Lock() // another agent's landing, say
	type result struct {
		res Current
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := f.m.KeepCurrent(context.Background(), "alpha")
		done <- result{res, err}
	}()
	var got result
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		f.m.mu.Unlock()
		t.Fatal("KeepCurrent of a branch at the base waited for the lock")
	}
	f.m.mu.Unlock()
	if got.err != nil || got.res.BaseTip != mainTip || got.res.Base != "main" || got.res.Merged() || got.res.Behind != 0 {
		t.Fatalf("KeepCurrent = %+v, %v; want up to date at %s", got.res, got.err, mainTip)
	}
}
