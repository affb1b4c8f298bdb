package worktree

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runGit starts a git process in dir that waits for input, and returns
// what ends it. Start returns once the child has exec'd git, so its
// command name and directory are already what the lock check looks at.
func runGit(t *testing.T, dir string) func() {
	t.Helper()
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop := func() {
		if !done {
			done = true
			in.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// A lock some live process holds is left alone, and the error names the
// holder; once it is gone the stale lock is removed.
func TestRemoveStaleLockLeavesAHeldLock(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc: the lock cannot be checked")
	}
	f := newFixture(t)
	wt := f.ensure("alpha")
	lock := filepath.Join(f.root, ".git", "worktrees", "alpha", "index.lock")
	writeFile(t, lock, "")

	fd, err := os.Open(lock)
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := f.m.RemoveStaleLock("alpha"); removed || !errors.Is(err, ErrLockHeld) || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("RemoveStaleLock with the lock open = %v, %v; want ErrLockHeld naming this process", removed, err)
	}
	fd.Close()

	stop := runGit(t, wt.Path)
	if removed, err := f.m.RemoveStaleLock("alpha"); removed || !errors.Is(err, ErrLockHeld) || !strings.Contains(err.Error(), wt.Path) {
		t.Fatalf("RemoveStaleLock with git running in the worktree = %v, %v; want ErrLockHeld", removed, err)
	}
	stop()

	// git running in the main checkout does not hold the agent's lock.
	stop = runGit(t, f.root)
	if removed, err := f.m.RemoveStaleLock("alpha"); err != nil || !removed {
		t.Fatalf("RemoveStaleLock with git running in main = %v, %v; want removed", removed, err)
	}
	stop()
	writeFile(t, filepath.Join(wt.Path, "new.txt"), "x\n")
	f.git(wt.Path, "add", "new.txt")
}
