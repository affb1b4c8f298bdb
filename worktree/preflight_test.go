package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// expectPreflight runs Preflight on root and expects an error wrapping want
// with hint in its text, and nothing created. Ensure must fail too, without
// creating anything.
func expectPreflight(t *testing.T, env []string, root string, want error, hint string) {
	t.Helper()
	meta := &memMeta{}
	m, err := New(context.Background(), Options{Root: root, Meta: meta, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Preflight(context.Background())
	if !errors.Is(err, want) || !strings.Contains(err.Error(), hint) {
		t.Fatalf("Preflight = %v, want %v saying %q", err, want, hint)
	}
	if exists(filepath.Join(root, ".swarm")) {
		t.Fatal("Preflight created .swarm")
	}
	if _, ok, _ := meta.Meta(context.Background(), MetaBaseBranch); ok {
		t.Fatal("Preflight recorded a base branch")
	}
	if want == ErrGitTooOld {
		return // the fake git answers only `git version`
	}
	if _, err := m.Ensure(context.Background(), "alpha"); err == nil {
		t.Fatal("Ensure succeeded where Preflight failed")
	}
	if exists(filepath.Join(root, ".swarm")) {
		t.Fatal("Ensure created .swarm before failing")
	}
}

func TestPreflightNoCommits(t *testing.T) {
	t.Parallel()
	env := noIdentityEnv(t)
	root := t.TempDir()
	gitAt(t, env, root, "init", "-q", "-b", "main")
	expectPreflight(t, env, root, ErrNoCommits, "make a first commit")
}

func TestPreflightDetachedHead(t *testing.T) {
	t.Parallel()
	env := noIdentityEnv(t)
	root := filepath.Join(t.TempDir(), "repo")
	newRepo(t, env, root)
	gitAt(t, env, root, "checkout", "-q", "--detach")
	expectPreflight(t, env, root, ErrDetachedHead, "git switch")
}

func TestPreflightBareRepo(t *testing.T) {
	t.Parallel()
	env := noIdentityEnv(t)
	root := t.TempDir()
	gitAt(t, env, root, "init", "-q", "--bare")
	expectPreflight(t, env, root, ErrBareRepo, "clone it")
}

func TestPreflightNotARepo(t *testing.T) {
	t.Parallel()
	env := append(noIdentityEnv(t), "GIT_CEILING_DIRECTORIES="+os.TempDir())
	expectPreflight(t, env, t.TempDir(), ErrNotRepo, "git init")
}

func TestPreflightGitMissing(t *testing.T) {
	// Not parallel: PATH is process-wide, and exec looks git up there.
	env := noIdentityEnv(t)
	root := filepath.Join(t.TempDir(), "repo")
	newRepo(t, env, root)
	t.Setenv("PATH", t.TempDir())
	expectPreflight(t, env, root, ErrGitMissing, "install git 2.20 or newer")
}

func TestPreflightGitTooOld(t *testing.T) {
	env := noIdentityEnv(t)
	root := filepath.Join(t.TempDir(), "repo")
	newRepo(t, env, root)
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "git"), "#!/bin/sh\necho 'git version 2.19.1'\n")
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	expectPreflight(t, env, root, ErrGitTooOld, "found 2.19, swarm needs git 2.20 or newer")
}

func TestPreflightRecordedBaseGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.git(".", "switch", "-q", "-c", "dev")
	f.ensure("alpha") // records dev
	f.git(".", "switch", "-q", "main")
	f.git(".", "branch", "-D", "dev")
	err := f.manager(Options{}).Preflight(context.Background())
	if !errors.Is(err, ErrBaseMissing) || !strings.Contains(err.Error(), "dev") {
		t.Fatalf("Preflight = %v, want ErrBaseMissing naming dev", err)
	}
}

func TestPreflightOK(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.m.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(f.root, ".swarm")) {
		t.Fatal("Preflight created .swarm")
	}
}

func TestPathsWithSpaces(t *testing.T) {
	t.Parallel()
	env := noIdentityEnv(t)
	tmp := t.TempDir()
	f := &fixture{t: t, root: filepath.Join(tmp, "my repo"), env: env, meta: &memMeta{}}
	newRepo(t, env, f.root)
	// Worktrees outside the repository, in a directory with spaces too.
	f.m = f.manager(Options{Dir: filepath.Join(tmp, "agent work trees"), Orphans: filepath.Join(tmp, "old stuff")})
	ctx := context.Background()
	if err := f.m.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tmp, "agent work trees", "bravo", "x"), "in the way\n")
	alpha, bravo := f.ensure("alpha"), f.ensure("bravo")
	if alpha.Path != filepath.Join(tmp, "agent work trees", "alpha") || bravo.MovedAside != filepath.Join(tmp, "old stuff", "bravo-20250102-030405") {
		t.Fatalf("Ensure = %+v, %+v", alpha, bravo)
	}
	if err := f.m.Lock(ctx, "alpha", "swarm up"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(alpha.Path, "new file.txt"), "spaced\n")
	g, err := f.m.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if found, err := g.Check(ctx); err != nil || len(found) != 0 {
		t.Fatalf("Check = %+v, %v", found, err)
	}
	if _, err := f.m.Merge(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(f.root, "new file.txt")) != "spaced\n" || exists(alpha.Path) {
		t.Fatal("merge through paths with spaces failed")
	}
	// Reuse after a restart with the worktree dir gone.
	if err := os.RemoveAll(bravo.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.manager(Options{Dir: filepath.Join(tmp, "agent work trees")}).Ensure(ctx, "bravo"); err != nil {
		t.Fatal(err)
	}
	// Worktrees outside the repository need no exclude entry.
	if st := f.git(".", "status", "--porcelain"); st != "" {
		t.Fatalf("status:\n%s", st)
	}
}

// The user's checkout is itself a linked worktree: its .git is a file.
func TestRepoWhoseDotGitIsAFile(t *testing.T) {
	t.Parallel()
	env := noIdentityEnv(t)
	tmp := t.TempDir()
	origin := filepath.Join(tmp, "origin")
	newRepo(t, env, origin)
	user := filepath.Join(tmp, "user checkout")
	gitAt(t, env, origin, "worktree", "add", "-q", "-b", "feature", user)
	if fi, err := os.Lstat(filepath.Join(user, ".git")); err != nil || fi.IsDir() {
		t.Fatalf("%s/.git is not a file", user)
	}
	f := &fixture{t: t, root: user, env: env, meta: &memMeta{}}
	f.m = f.manager(Options{})
	ctx := context.Background()
	if err := f.m.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	wt := f.ensure("alpha")
	if base, _ := f.m.BaseBranch(ctx); base != "feature" {
		t.Fatalf("base = %q, want the user's branch feature", base)
	}
	if got := f.git(wt.Path, "rev-parse", "--abbrev-ref", "HEAD"); got != "swarm/alpha" {
		t.Fatalf("worktree on %s", got)
	}
	// The exclude goes to the shared .git/info/exclude, so neither checkout
	// shows swarm's files.
	if st := f.git(".", "status", "--porcelain"); st != "" {
		t.Fatalf("user checkout status:\n%s", st)
	}
	g, err := f.m.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "a\n", "alpha work")
	if found, err := g.Check(ctx); err != nil || len(found) != 0 {
		t.Fatalf("Check = %+v, %v", found, err)
	}
	if got := f.git(wt.Path, "log", "-1", "--format=%s"); got != "alpha work" {
		t.Fatalf("the worktree's last commit = %q", got)
	}
	f.commitAs("swarm/alpha", ".", "leak.txt", "x\n", "leak")
	if found, err := g.Check(ctx); err != nil || len(found) != 1 || found[0].(Violation).Kind != ViolationBaseMoved {
		t.Fatalf("Check after a leak = %+v, %v", found, err)
	}
	if _, err := f.m.Merge(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(user, "a.txt")) != "a\n" || exists(wt.Path) {
		t.Fatal("merge into the user's linked checkout failed")
	}
	if got := gitAt(t, env, origin, "rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		t.Fatalf("the origin checkout moved to %s", got)
	}
}

// Mid-rebase, HEAD is detached, but "git switch" is the wrong advice: the
// rebase is to be finished or aborted.
func TestPreflightMidRebase(t *testing.T) {
	t.Parallel()
	env := noIdentityEnv(t)
	env = append(env, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	root := filepath.Join(t.TempDir(), "repo")
	newRepo(t, env, root)
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitAt(t, env, root, "checkout", "-q", "-b", "topic")
	write("topic\n")
	gitAt(t, env, root, "add", "f.txt")
	gitAt(t, env, root, "commit", "-q", "-m", "topic")
	gitAt(t, env, root, "checkout", "-q", "main")
	write("main\n")
	gitAt(t, env, root, "add", "f.txt")
	gitAt(t, env, root, "commit", "-q", "-m", "main")
	gitAt(t, env, root, "checkout", "-q", "topic")
	cmd := exec.Command("git", "rebase", "main")
	cmd.Dir, cmd.Env = root, env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("the rebase did not stop on its conflict: %s", out)
	}
	expectPreflight(t, env, root, ErrDetachedHead, "in the middle of a rebase of topic")
	m, err := New(context.Background(), Options{Root: root, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Preflight(context.Background())
	for _, want := range []string{"git rebase --continue", "git rebase --abort"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "git switch") {
		t.Errorf("%v advises git switch", err)
	}
}
