package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestEnsureCreatesThenReusesAcrossManagers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.m.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	wt := f.ensure("alpha")
	want := filepath.Join(f.root, ".swarm", "worktrees", "alpha")
	if wt.Path != want || wt.Branch != "swarm/alpha" || wt.Agent != "alpha" || wt.MovedAside != "" {
		t.Fatalf("Ensure = %+v, want path %s on swarm/alpha", wt, want)
	}
	list := f.git(".", "worktree", "list", "--porcelain")
	if !strings.Contains(list, "worktree "+want+"\n") || !strings.Contains(list, "branch refs/heads/swarm/alpha") {
		t.Fatalf("worktree list:\n%s", list)
	}
	if got := f.git(".", "rev-parse", "swarm/alpha"); got != f.git(".", "rev-parse", "main") {
		t.Fatalf("swarm/alpha at %s, want main's tip", got)
	}
	// The nested worktree is ignored by the main worktree.
	if st := f.git(".", "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("main worktree status mentions the worktrees:\n%s", st)
	}
	if v, ok, _ := f.meta.Meta(ctx, MetaBaseBranch); !ok || v != "main" {
		t.Fatalf("recorded base = %q, %v; want main", v, ok)
	}

	// Work in the worktree, then a later run: the worktree and its commit are
	// reused, even though the operator has since switched branches.
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "alpha\n", "alpha work")
	head := f.git(wt.Path, "rev-parse", "HEAD")
	f.git(".", "switch", "-q", "-c", "feature")
	m2 := f.manager(Options{})
	base, err := m2.BaseBranch(ctx)
	if err != nil || base != "main" {
		t.Fatalf("BaseBranch = %q, %v; want the recorded main", base, err)
	}
	wt2, err := m2.Ensure(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wt2, wt) {
		t.Fatalf("second Ensure = %+v, want %+v", wt2, wt)
	}
	if got := f.git(wt.Path, "rev-parse", "HEAD"); got != head {
		t.Fatalf("worktree HEAD moved from %s to %s", head, got)
	}
	if n := strings.Count(f.git(".", "worktree", "list", "--porcelain"), "swarm/alpha"); n != 1 {
		t.Fatalf("swarm/alpha listed %d times", n)
	}
}

func TestEnsureRefusesWorktreeOffItsBranch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wt := f.ensure("alpha")
	f.git(wt.Path, "switch", "-q", "-c", "other")
	_, err := f.m.Ensure(context.Background(), "alpha")
	if !errors.Is(err, ErrWrongBranch) || !strings.Contains(err.Error(), "branch other") {
		t.Fatalf("Ensure = %v, want ErrWrongBranch naming branch other", err)
	}
}

func TestEnsureRepairsDeletedLockedWorktree(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	// A supervisor locked it, the agent committed, then the supervisor died
	// and someone deleted the directory.
	if err := f.m.Lock(ctx, "alpha", "swarm up (pid 1)"); err != nil {
		t.Fatal(err)
	}
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "alpha\n", "alpha work")
	head := f.git(wt.Path, "rev-parse", "HEAD")
	if err := os.RemoveAll(wt.Path); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.git(".", "worktree", "list", "--porcelain"), wt.Path) {
		t.Fatal("deleted worktree no longer registered; the test needs it registered")
	}

	got := f.ensure("alpha")
	if got.Path != wt.Path || got.MovedAside != "" {
		t.Fatalf("Ensure = %+v", got)
	}
	if h := f.git(wt.Path, "rev-parse", "HEAD"); h != head {
		t.Fatalf("recreated worktree at %s, want the branch's commit %s", h, head)
	}
	if readFile(t, filepath.Join(wt.Path, "a.txt")) != "alpha\n" {
		t.Fatal("committed work missing from the recreated worktree")
	}
	list := f.git(".", "worktree", "list", "--porcelain")
	if strings.Count(list, "worktree "+wt.Path+"\n") != 1 || strings.Contains(list, "prunable") {
		t.Fatalf("worktree list after repair:\n%s", list)
	}
}

func TestEnsureMovesUnregisteredDirectoryAside(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := f.m.Path("alpha")
	writeFile(t, filepath.Join(path, "notes.txt"), "precious\n")

	wt := f.ensure("alpha")
	orphan := filepath.Join(f.root, ".swarm", "orphans", "alpha-20250102-030405")
	if wt.MovedAside != orphan {
		t.Fatalf("MovedAside = %q, want %q", wt.MovedAside, orphan)
	}
	if readFile(t, filepath.Join(orphan, "notes.txt")) != "precious\n" {
		t.Fatal("moved-aside directory lost its file")
	}
	if exists(filepath.Join(path, "notes.txt")) || f.git(path, "rev-parse", "--abbrev-ref", "HEAD") != "swarm/alpha" {
		t.Fatal("the new worktree is not a fresh checkout of swarm/alpha")
	}

	// A registered worktree whose .git file was deleted is pruned and its
	// contents moved aside too; the same second gets a new name.
	if err := os.Remove(filepath.Join(path, ".git")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(path, "more.txt"), "more\n")
	wt = f.ensure("alpha")
	if wt.MovedAside != orphan+"-2" || readFile(t, filepath.Join(orphan+"-2", "more.txt")) != "more\n" {
		t.Fatalf("MovedAside = %q, want %s-2 holding more.txt", wt.MovedAside, orphan)
	}
	if st := f.git(".", "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("main worktree status mentions swarm's directories:\n%s", st)
	}
}

func TestEnsureConcurrentAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	agents := []string{"a1", "a2", "a3", "a4"}
	var wg sync.WaitGroup
	errs := make([]error, len(agents))
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.m.Ensure(context.Background(), a)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Ensure(%s): %v", agents[i], err)
		}
	}
	list := f.git(".", "worktree", "list", "--porcelain") + "\n"
	for _, a := range agents {
		if !strings.Contains(list, "branch refs/heads/swarm/"+a+"\n") {
			t.Fatalf("no worktree for %s:\n%s", a, list)
		}
	}
}

func TestBadAgentNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, name := range []string{"", "../x", "a/b", "-x", "a b"} {
		if _, err := f.m.Ensure(context.Background(), name); !errors.Is(err, ErrBadAgent) {
			t.Errorf("Ensure(%q) = %v, want ErrBadAgent", name, err)
		}
	}
}

func TestLockUnlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	for _, reason := range []string{"swarm up (pid 1)", "swarm up (pid 2)"} {
		if err := f.m.Lock(ctx, "alpha", reason); err != nil {
			t.Fatal(err)
		}
		if list := f.git(".", "worktree", "list", "--porcelain"); !strings.Contains(list, "locked "+reason) {
			t.Fatalf("after Lock(%q):\n%s", reason, list)
		}
	}
	// Locked worktrees survive `git worktree remove`.
	f.gitFails(".", "worktree", "remove", wt.Path)
	for range 2 {
		if err := f.m.Unlock(ctx, "alpha"); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(f.git(".", "worktree", "list", "--porcelain"), "locked") {
		t.Fatal("still locked after Unlock")
	}
	if err := f.m.Lock(ctx, "bravo", "x"); !errors.Is(err, ErrNoWorktree) {
		t.Fatalf("Lock of a missing worktree = %v, want ErrNoWorktree", err)
	}
	if err := f.m.Unlock(ctx, "bravo"); err != nil {
		t.Fatalf("Unlock of a missing worktree = %v, want nothing done", err)
	}
}

func TestAutoCommitWithoutGitIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")

	// Nothing to commit: nothing happens.
	if did, err := f.m.AutoCommit(ctx, "alpha", "save"); err != nil || did {
		t.Fatalf("AutoCommit on a clean worktree = %v, %v", did, err)
	}
	if dirty, err := f.m.Dirty(ctx, "alpha"); err != nil || dirty {
		t.Fatalf("Dirty = %v, %v; want clean", dirty, err)
	}
	before := f.git(wt.Path, "rev-parse", "HEAD")

	writeFile(t, filepath.Join(wt.Path, "README.md"), "# changed\n")
	writeFile(t, filepath.Join(wt.Path, "new", "untracked.txt"), "new\n")
	if dirty, err := f.m.Dirty(ctx, "alpha"); err != nil || !dirty {
		t.Fatalf("Dirty = %v, %v; want dirty", dirty, err)
	}
	did, err := f.m.AutoCommit(ctx, "alpha", "swarm: save work")
	if err != nil || !did {
		t.Fatalf("AutoCommit = %v, %v", did, err)
	}
	who := f.git(wt.Path, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s|%P", "swarm/alpha")
	if want := "swarm/alpha <swarm@localhost>|swarm/alpha <swarm@localhost>|swarm: save work|" + before; who != want {
		t.Fatalf("auto-commit = %q, want %q", who, want)
	}
	files := f.git(wt.Path, "show", "--name-only", "--format=", "swarm/alpha")
	if files != "README.md\nnew/untracked.txt" {
		t.Fatalf("auto-commit holds %q", files)
	}
	if dirty, _ := f.m.Dirty(ctx, "alpha"); dirty {
		t.Fatal("still dirty after AutoCommit")
	}
	if f.git(".", "rev-parse", "main") == f.git(".", "rev-parse", "swarm/alpha") {
		t.Fatal("the auto-commit landed on main")
	}
}

func TestAutoCommitUsesConfiguredEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wt := f.ensure("alpha")
	f.git(".", "config", "user.email", "me@example.com")
	writeFile(t, filepath.Join(wt.Path, "x.txt"), "x\n")
	if did, err := f.m.AutoCommit(context.Background(), "alpha", "save"); err != nil || !did {
		t.Fatalf("AutoCommit = %v, %v", did, err)
	}
	if who := f.git(wt.Path, "log", "-1", "--format=%an <%ae>"); who != "swarm/alpha <me@example.com>" {
		t.Fatalf("author = %q", who)
	}
}

func TestAutoCommitRefusesOtherBranch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wt := f.ensure("alpha")
	f.git(wt.Path, "switch", "-q", "-c", "other")
	writeFile(t, filepath.Join(wt.Path, "x.txt"), "x\n")
	if _, err := f.m.AutoCommit(context.Background(), "alpha", "save"); !errors.Is(err, ErrWrongBranch) {
		t.Fatalf("AutoCommit = %v, want ErrWrongBranch", err)
	}
	if f.git(wt.Path, "status", "--porcelain") == "" {
		t.Fatal("the work was committed on the wrong branch")
	}
}

func TestRemoveKeepsBranch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	if err := f.m.Lock(ctx, "alpha", "running"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(wt.Path, "x.txt"), "x\n")
	if err := f.m.Remove(ctx, "alpha"); !errors.Is(err, ErrDirty) {
		t.Fatalf("Remove of a dirty worktree = %v, want ErrDirty", err)
	}
	if _, err := f.m.AutoCommit(ctx, "alpha", "save"); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Remove(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if exists(wt.Path) || !f.branchExists("swarm/alpha") {
		t.Fatal("Remove must delete the directory and keep the branch")
	}
	// Ensure brings the branch back, work included.
	f.ensure("alpha")
	if readFile(t, filepath.Join(wt.Path, "x.txt")) != "x\n" {
		t.Fatal("work lost across Remove and Ensure")
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string][2]int{
		"git version 2.39.5":                  {2, 39},
		"git version 2.39.5 (Apple Git-143)":  {2, 39},
		"git version 2.45.0.windows.1":        {2, 45},
		"git version 2.20.0\n":                {2, 20},
		"git version 1.8.3.1":                 {1, 8},
		"git version 3.0":                     {3, 0},
		"git version 2.19.6.1\n and the rest": {2, 19},
	} {
		ma, mi, err := ParseGitVersion(in)
		if err != nil || ma != want[0] || mi != want[1] {
			t.Errorf("ParseGitVersion(%q) = %d.%d, %v; want %d.%d", in, ma, mi, err, want[0], want[1])
		}
	}
	for _, bad := range []string{"", "hub version 2.1", "git version x.y"} {
		if _, _, err := ParseGitVersion(bad); err == nil {
			t.Errorf("ParseGitVersion(%q) succeeded", bad)
		}
	}
}

func ExampleBranch() {
	fmt.Println(Branch("backend"))
	// Output: swarm/backend
}

// A crash between registering a worktree and checking it out leaves it
// with no index and files half written; no agent has worked there yet, so
// the next Ensure checks it out again completely, mending truncated files.
func TestEnsureRedoesAnInterruptedCheckout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.commitAs("Test Operator", ".", "big.txt", strings.Repeat("line\n", 1000), "add big")
	if _, err := f.m.BaseBranch(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.root, ".swarm", "worktrees", "alpha")
	f.git(".", "worktree", "add", "--no-checkout", "-b", "swarm/alpha", path, "main")
	if populated(path) {
		t.Fatal("a --no-checkout worktree counts as populated")
	}
	writeFile(t, filepath.Join(path, "big.txt"), "") // cut short while writing
	writeFile(t, filepath.Join(path, "README.md"), "# de")
	wt, err := f.m.Ensure(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !populated(path) {
		t.Fatal("Ensure left the worktree unpopulated")
	}
	if st := f.git(path, "status", "--porcelain"); st != "" {
		t.Fatalf("status after the repair:\n%s", st)
	}
	if got := readFile(t, filepath.Join(path, "big.txt")); len(got) != 5000 {
		t.Fatalf("big.txt has %d bytes after the repair, want 5000", len(got))
	}
	if len(wt.Recovered) != 1 || !strings.Contains(wt.Recovered[0].Text, "redid the checkout") {
		t.Fatalf("Recovered = %v", wt.Recovered)
	}
}

// A worktree made before the journal existed, with an index but no
// marker, may hold an agent's work: the repair only adds missing files and
// never overwrites one.
func TestEnsureFillsInAnOldWorktreeWithoutOverwriting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.commitAs("Test Operator", ".", "other.txt", "other\n", "add other")
	if _, err := f.m.BaseBranch(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.root, ".swarm", "worktrees", "alpha")
	f.git(".", "worktree", "add", "-q", "-b", "swarm/alpha", path, "main")
	writeFile(t, filepath.Join(path, "README.md"), "the agent's own words\n")
	if err := os.Remove(filepath.Join(path, "other.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Ensure(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(path, "README.md")); string(b) != "the agent's own words\n" {
		t.Fatalf("an existing file was overwritten: %q", b)
	}
	if st := f.git(path, "status", "--porcelain"); st != " M README.md" {
		t.Fatalf("status after the repair:\n%s", st)
	}
}

// Agents' worktrees are created concurrently, as the runners do.
func TestEnsureConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	names := []string{"a1", "a2", "a3", "a4", "a5", "a6"}
	errs := make(chan error, len(names))
	for _, n := range names {
		go func() { _, err := f.m.Ensure(ctx, n); errs <- err }()
	}
	for range names {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		p := filepath.Join(f.root, ".swarm", "worktrees", n)
		if st := f.git(p, "status", "--porcelain"); st != "" {
			t.Fatalf("%s is not a clean checkout:\n%s", n, st)
		}
	}
}

func TestRemoveStaleLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wt := f.ensure("alpha")
	if removed, err := f.m.RemoveStaleLock("alpha"); err != nil || removed {
		t.Fatalf("no lock: %v, %v", removed, err)
	}
	lock := filepath.Join(f.root, ".git", "worktrees", "alpha", "index.lock")
	writeFile(t, lock, "")
	writeFile(t, filepath.Join(wt.Path, "new.txt"), "x\n")
	f.gitFails(wt.Path, "add", "new.txt") // what the agent's next commit would hit
	if removed, err := f.m.RemoveStaleLock("alpha"); err != nil || !removed {
		t.Fatalf("stale lock: %v, %v", removed, err)
	}
	f.git(wt.Path, "add", "new.txt")
}

// Something that is not a directory where a worktree goes is someone's:
// Ensure refuses it, naming it, and leaves it alone.
func TestEnsureRefusesAFileInTheWay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	path := f.m.Path("alpha")
	writeFile(t, path, "precious\n")
	_, err := f.m.Ensure(ctx, "alpha")
	if !errors.Is(err, ErrInTheWay) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "regular file") {
		t.Fatalf("Ensure = %v, want ErrInTheWay naming %s", err, path)
	}
	if readFile(t, path) != "precious\n" {
		t.Fatal("the file was changed")
	}

	target := t.TempDir()
	writeFile(t, filepath.Join(target, "keep.txt"), "keep\n")
	path = f.m.Path("bravo")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Ensure(ctx, "bravo"); !errors.Is(err, ErrInTheWay) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Ensure = %v, want ErrInTheWay for the symlink", err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 || readFile(t, filepath.Join(target, "keep.txt")) != "keep\n" {
		t.Fatal("the symlink or its target was changed")
	}
}
