package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// filesFixture is a repository whose main holds README.md and f0..f9.txt,
// with alpha's worktree checked out.
func filesFixture(t *testing.T) (*fixture, Worktree) {
	t.Helper()
	f := newFixture(t)
	for i := range 10 {
		writeFile(t, filepath.Join(f.root, fmt.Sprintf("f%d.txt", i)), fmt.Sprintf("file %d\n", i))
	}
	f.git(".", "add", ".")
	f.git(".", "commit", "-q", "-m", "ten files")
	return f, f.ensure("alpha")
}

// The branch has 11 files (README.md, f0..f9.txt): deleting 3 is more than
// 20%, 2 is not, and moving files is no deletion at all.
func TestAutoCommitRefusesMassDeletion(t *testing.T) {
	t.Parallel()
	f, wt := filesFixture(t)
	ctx := context.Background()
	tip := f.git(wt.Path, "rev-parse", "HEAD")
	for _, n := range []string{"f1.txt", "f2.txt", "f3.txt"} {
		if err := os.Remove(filepath.Join(wt.Path, n)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.m.AutoCommit(ctx, "alpha", "save")
	if !errors.Is(err, ErrUnsafeAutoCommit) {
		t.Fatalf("AutoCommit = %v, want ErrUnsafeAutoCommit", err)
	}
	for _, want := range []string{"delete 3 of the 11 files", wt.Path, "git -C", "status"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if f.git(wt.Path, "rev-parse", "HEAD") != tip || exists(filepath.Join(wt.Path, "f1.txt")) {
		t.Fatal("the refused work was committed or undone")
	}
	// Merge refuses the same way, before touching main.
	before := f.git(".", "rev-parse", "main")
	if _, err := f.m.Merge(ctx, "alpha"); !errors.Is(err, ErrUnsafeAutoCommit) {
		t.Fatalf("Merge = %v, want ErrUnsafeAutoCommit", err)
	}
	if f.git(".", "rev-parse", "main") != before || !exists(wt.Path) {
		t.Fatal("Merge moved main or removed the worktree")
	}

	// Moving many files is not deleting them.
	f.git(wt.Path, "checkout", "--", ".")
	if err := os.MkdirAll(filepath.Join(wt.Path, "moved"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"f1.txt", "f2.txt", "f3.txt", "f4.txt", "f5.txt"} {
		if err := os.Rename(filepath.Join(wt.Path, n), filepath.Join(wt.Path, "moved", n)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := f.m.AutoCommit(ctx, "alpha", "move"); err != nil || !ok {
		t.Fatalf("AutoCommit of a move = %v, %v", ok, err)
	}
	// Two of eleven is within the limit.
	for _, n := range []string{"f6.txt", "f7.txt"} {
		if err := os.Remove(filepath.Join(wt.Path, n)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := f.m.AutoCommit(ctx, "alpha", "delete two"); err != nil || !ok {
		t.Fatalf("AutoCommit of two deletions = %v, %v", ok, err)
	}
}

// A repository inside the worktree would be committed as a gitlink and
// merged as a dangling pointer: auto-commit refuses it, naming it.
func TestAutoCommitRefusesNestedRepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	writeFile(t, filepath.Join(wt.Path, "work.txt"), "work\n")
	nested := filepath.Join(wt.Path, "vendor", "lib")
	newRepo(t, f.env, nested)
	empty := filepath.Join(wt.Path, "scratch")
	gitAt(t, f.env, wt.Path, "init", "-q", empty)

	_, err := f.m.AutoCommit(ctx, "alpha", "save")
	if !errors.Is(err, ErrUnsafeAutoCommit) || !strings.Contains(err.Error(), nested) || !strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), "gitlink") {
		t.Fatalf("AutoCommit = %v, want ErrUnsafeAutoCommit naming %s and %s", err, nested, empty)
	}
	if st := f.git(wt.Path, "status", "--porcelain"); !strings.Contains(st, "?? work.txt") {
		t.Fatalf("the work was staged or lost:\n%s", st)
	}

	// A nested repository already staged is refused too.
	if err := os.RemoveAll(empty); err != nil {
		t.Fatal(err)
	}
	f.git(wt.Path, "add", "vendor/lib")
	if _, err := f.m.AutoCommit(ctx, "alpha", "save"); !errors.Is(err, ErrUnsafeAutoCommit) || !strings.Contains(err.Error(), nested) {
		t.Fatalf("AutoCommit with a staged gitlink = %v", err)
	}
}

// Removing a worktree deletes the files git ignores without a word; swarm
// lists them and keeps the worktree unless told to delete them.
func TestIgnoredFilesKeepTheWorktree(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.commitAs("Test Operator", ".", ".gitignore", "*.log\nbuild/\n", "ignore logs")
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "a\n", "alpha: work")
	writeFile(t, filepath.Join(wt.Path, "debug.log"), "log\n")
	writeFile(t, filepath.Join(wt.Path, "build", "out.bin"), "bin\n")
	before := f.git(".", "rev-parse", "main")

	if got, err := f.m.Ignored(ctx, "alpha"); err != nil || !reflect.DeepEqual(got, []string{"build/", "debug.log"}) {
		t.Fatalf("Ignored = %q, %v", got, err)
	}
	for name, op := range map[string]func(context.Context, string) (Result, error){"Merge": f.m.Merge, "Squash": f.m.Squash, "Discard": f.m.Discard} {
		res, err := op(ctx, "alpha")
		if !errors.Is(err, ErrIgnoredFiles) || !strings.Contains(err.Error(), "debug.log") || !strings.Contains(err.Error(), "--delete-ignored") {
			t.Fatalf("%s = %v, want ErrIgnoredFiles naming debug.log", name, err)
		}
		if len(res.Ignored) != 2 {
			t.Fatalf("%s: Ignored = %q", name, res.Ignored)
		}
	}
	if err := f.m.Remove(ctx, "alpha"); !errors.Is(err, ErrIgnoredFiles) {
		t.Fatalf("Remove = %v, want ErrIgnoredFiles", err)
	}
	if f.git(".", "rev-parse", "main") != before || !exists(filepath.Join(wt.Path, "debug.log")) || !f.branchExists("swarm/alpha") {
		t.Fatal("something was merged or deleted")
	}

	res, err := f.manager(Options{DeleteIgnored: true}).Merge(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || len(res.Ignored) != 2 || exists(wt.Path) || !exists(filepath.Join(f.root, "a.txt")) {
		t.Fatalf("Merge with DeleteIgnored = %+v", res)
	}
}

// Discard names what it drops: the unmerged commits and the uncommitted
// changes.
func TestDiscardReportsUncommittedChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "a\n", "alpha: committed")
	writeFile(t, filepath.Join(wt.Path, "README.md"), "edited\n")
	writeFile(t, filepath.Join(wt.Path, "notes", "new.txt"), "new\n")
	if got, err := f.m.Uncommitted(ctx, "alpha"); err != nil || len(got) != 2 {
		t.Fatalf("Uncommitted = %q, %v", got, err)
	}
	res, err := f.m.Discard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{" M README.md", "?? notes/"}; !reflect.DeepEqual(res.Uncommitted, want) {
		t.Fatalf("Uncommitted = %q, want %q", res.Uncommitted, want)
	}
	if len(res.Commits) != 1 || !res.Removed || exists(wt.Path) {
		t.Fatalf("Discard = %+v", res)
	}
}
