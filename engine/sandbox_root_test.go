package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHardLinkRefused checks that write_file and edit_file refuse a name
// in the worktree that is a hard link to a file outside it. Writing in
// place through that name once changed the outside file; replacing the
// name would silently split the two. Either way the outside file must not
// change.
func TestHardLinkRefused(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "wt")
	secret := filepath.Join(dir, "outside", "secret.txt")
	writeFile(t, filepath.Join(wt, "README.md"), "hello\n")
	writeFile(t, secret, "secret\n")
	if err := os.Link(secret, filepath.Join(wt, "hl.txt")); err != nil {
		t.Fatal(err)
	}
	s := newSession(wt, nil)
	for _, c := range []toolCall{
		{"write_file", map[string]any{"path": "hl.txt", "content": "pwned\n"}},
		{"edit_file", map[string]any{"path": "hl.txt", "old": "secret", "new": "pwned"}},
	} {
		r := runTool(t, s, c.tool, c.args)
		if r.Output != "" || !strings.Contains(r.Error, "has 2 hard links") || !strings.Contains(r.Error, "rm hl.txt") {
			t.Errorf("%s on a hard link: %+v, want a refusal that names the links and the way out", c.tool, r)
		}
	}
	if got := readFile(t, secret); got != "secret\n" {
		t.Errorf("outside file changed: %q", got)
	}
	a, err := os.Stat(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(filepath.Join(wt, "hl.txt"))
	if err != nil || !os.SameFile(a, b) || linkCount(a) != 2 {
		t.Errorf("the link was replaced or removed: %v", err)
	}
	// Once the extra name is gone the path is an ordinary new file.
	if err := os.Remove(filepath.Join(wt, "hl.txt")); err != nil {
		t.Fatal(err)
	}
	if r := runTool(t, s, "write_file", map[string]any{"path": "hl.txt", "content": "mine\n"}); r.Error != "" {
		t.Errorf("write after rm: %+v", r)
	}
	if got := readFile(t, secret); got != "secret\n" {
		t.Errorf("outside file changed: %q", got)
	}
}

// TestWriteReplaces checks what writing by rename must keep: an existing
// file's mode exactly, a symlink inside the worktree (its target is
// replaced, the link stays), names near the length limit, and no
// temporary file left behind.
func TestWriteReplaces(t *testing.T) {
	wt := t.TempDir()
	writeFile(t, filepath.Join(wt, "src", "run.sh"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(wt, "src", "run.sh"), 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/run.sh", filepath.Join(wt, "run")); err != nil {
		t.Fatal(err)
	}
	s := newSession(wt, nil)
	if r := runTool(t, s, "write_file", map[string]any{"path": "run", "content": "#!/bin/sh\necho hi\n"}); r.Error != "" {
		t.Fatalf("write through an inside symlink: %+v", r)
	}
	if got := readFile(t, filepath.Join(wt, "src", "run.sh")); got != "#!/bin/sh\necho hi\n" {
		t.Errorf("target = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(wt, "run")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}
	if fi, _ := os.Stat(filepath.Join(wt, "src", "run.sh")); fi.Mode().Perm() != 0o751 {
		t.Errorf("write changed the mode to %v", fi.Mode().Perm())
	}
	long := strings.Repeat("n", 250) + ".txt"
	if r := runTool(t, s, "write_file", map[string]any{"path": long, "content": "x"}); r.Error != "" {
		t.Errorf("write a 254-byte name: %+v", r)
	}
	if r := runTool(t, s, "edit_file", map[string]any{"path": long, "old": "x", "new": "y"}); r.Error != "" {
		t.Errorf("edit a 254-byte name: %+v", r)
	}
	entries, _ := os.ReadDir(wt)
	for _, e := range entries {
		if strings.Contains(e.Name(), tempMark) {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

// TestReplaceFileChanged checks that an edit is not written over a file
// that was replaced since it was read: the other writer's work would be
// lost without a word.
func TestReplaceFileChanged(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "f.txt"), "theirs\n")
	writeFile(t, filepath.Join(dir, "other.txt"), "x\n")
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	was, err := r.Lstat("other.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := replaceFile(r, "f.txt", []byte("mine\n"), 0o644, true, was); !errors.Is(err, errChanged) {
		t.Errorf("replaceFile over a changed file: %v, want errChanged", err)
	}
	if got := readFile(t, filepath.Join(dir, "f.txt")); got != "theirs\n" {
		t.Errorf("f.txt = %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary file left behind: %v", entries)
	}
}

// TestReadOnlyAndUnreadable checks the refusals that writing in place gave
// for free: a read-only file is not replaced, and a directory that cannot
// be listed says so rather than looking empty.
func TestReadOnlyAndUnreadable(t *testing.T) {
	wt := t.TempDir()
	ro := filepath.Join(wt, "ro.txt")
	writeFile(t, ro, "keep\n")
	if err := os.Chmod(ro, 0o444); err != nil {
		t.Fatal(err)
	}
	s := newSession(wt, nil)
	for _, c := range []toolCall{
		{"write_file", map[string]any{"path": "ro.txt", "content": "x"}},
		{"edit_file", map[string]any{"path": "ro.txt", "old": "keep", "new": "x"}},
	} {
		if r := runTool(t, s, c.tool, c.args); !strings.Contains(r.Error, "read-only (mode -r--r--r--)") || !strings.Contains(r.Error, "chmod u+w ro.txt") {
			t.Errorf("%s on a read-only file: %+v", c.tool, r)
		}
	}
	if got := readFile(t, ro); got != "keep\n" {
		t.Errorf("read-only file changed: %q", got)
	}
	if os.Geteuid() == 0 {
		return // root reads any directory
	}
	locked := filepath.Join(wt, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755)
	if r := runTool(t, s, "list_files", map[string]any{"path": "locked"}); !strings.Contains(r.Error, "permission denied") {
		t.Errorf("list an unreadable directory: %+v", r)
	}
}

// IsTempName knows the names createTemp makes, and no others.
func TestIsTempName(t *testing.T) {
	dir, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, base := range []string{"a.go", strings.Repeat("n", 250) + ".txt", ".env"} {
		tmp, f, err := createTemp(dir, base, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if !IsTempName(tmp) {
			t.Errorf("IsTempName(%q) = false", tmp)
		}
	}
	for _, name := range []string{"a.go", ".swarm-tmp-", ".a.go.swarm-tmp-", "a.go.swarm-tmp-abc", ".a.go.swarm-tmp-ABC", ".a.go.swarm-tmp-abc.orig", ".a.go.swarm-tmp-12345678901234"} {
		if IsTempName(name) {
			t.Errorf("IsTempName(%q) = true", name)
		}
	}
}
