package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInPlaceWorktreeSkipsTheList: a second swarm up finds every agent's
// worktree in place. Ensure, Lock and Unlock of one agent read its own
// admin files instead of running `git worktree list` or `lock`/`unlock`,
// which read every worktree: with one such run per agent, a start-up was
// quadratic in the agents. Not parallel: it puts a logging git on PATH.
func TestInPlaceWorktreeSkipsTheList(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, a := range []string{"alpha", "bravo"} {
		f.ensure(a)
	}
	log := logGit(t)

	m := f.manager(Options{}) // as the next swarm up
	wt, err := m.Ensure(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if wt.Path != m.Path("alpha") || wt.Branch != "swarm/alpha" {
		t.Fatalf("Ensure = %+v", wt)
	}
	if err := m.Lock(ctx, "alpha", "swarm supervisor pid 42"); err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(log)
	if list := f.git(".", "worktree", "list", "--porcelain"); !strings.Contains(list, "locked swarm supervisor pid 42") {
		t.Fatalf("after Lock git does not see the lock:\n%s", list)
	}
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	more, _ := os.ReadFile(log)
	calls = append(calls, more...)
	if list := f.git(".", "worktree", "list", "--porcelain"); strings.Contains(list, "locked") {
		t.Fatalf("after Unlock git still sees a lock:\n%s", list)
	}
	for _, line := range strings.Split(string(calls), "\n") {
		for _, slow := range []string{"worktree list", "worktree lock", "worktree unlock"} {
			if strings.Contains(line, slow) {
				t.Errorf("ran git %s; want the worktree's own files read", line)
			}
		}
	}

	// A worktree not in place (deleted behind swarm's back) still goes
	// through git, which repairs it.
	if err := os.RemoveAll(m.Path("bravo")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Ensure(ctx, "bravo"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.Path("bravo"), "README.md")); err != nil {
		t.Fatalf("bravo not checked out again: %v", err)
	}
}

// logGit puts a git on PATH that logs its arguments to the returned file,
// then runs the real one. Its test must not be parallel.
func logGit(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	wrap := t.TempDir()
	log := filepath.Join(wrap, "log")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(wrap, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", wrap+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// TestEnsureNewAgentAsksNoBranch: a new agent's worktree is made with its
// branch (-b) without asking git first whether the branch exists or
// reading the worktree list; one whose branch survived its worktree still
// gets that branch back.
func TestEnsureNewAgentAsksNoBranch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.ensure("alpha") // the exclude check and the base, once
	log := logGit(t)
	if _, err := f.m.Ensure(ctx, "bravo"); err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(log)
	if strings.Contains(string(calls), "rev-parse --verify -q refs/heads/swarm/bravo") || strings.Contains(string(calls), "worktree list") {
		t.Fatalf("asked git about the new agent's branch or the worktrees first:\n%s", calls)
	}
	if !f.branchExists("swarm/bravo") {
		t.Fatal("no branch made")
	}
	// The branch outlives its worktree: Ensure checks it out again.
	f.commitAs("swarm/bravo", f.m.Path("bravo"), "b.txt", "bravo\n", "bravo: work")
	f.git(".", "worktree", "remove", "--force", f.m.Path("bravo"))
	if _, err := f.m.Ensure(ctx, "bravo"); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(f.m.Path("bravo"), "b.txt")) != "bravo\n" {
		t.Fatal("the surviving branch's work is not in the new worktree")
	}
}
