package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// symlinkedParentFixture lays out two agents' worktrees under a parent
// directory that is reached through a symlink, the way a user may put
// [worktree] dir on another disk:
//
//	real/worktrees/alice/  README.md, src/main.go, links
//	real/worktrees/bob/    secret.txt
//	alias -> real/worktrees
//
// alice's session is configured as alias/alice.
func symlinkedParentFixture(t *testing.T) (wt, alias, real, secret string) {
	t.Helper()
	dir := t.TempDir()
	real = filepath.Join(dir, "real", "worktrees")
	alias = filepath.Join(dir, "alias")
	writeFile(t, filepath.Join(real, "alice", "README.md"), "hello\n")
	writeFile(t, filepath.Join(real, "alice", "src", "main.go"), "package main\n")
	secret = filepath.Join(real, "bob", "secret.txt")
	writeFile(t, secret, "bob's secret\n")
	if err := os.Symlink(real, alias); err != nil {
		t.Fatal(err)
	}
	wt = filepath.Join(alias, "alice")
	for link, target := range map[string]string{
		"up":         "..",                                 // the parent, relative
		"sibling":    filepath.Join(alias, "bob"),          // bob, through the alias
		"parent":     alias,                                // the symlinked parent itself
		"real-bob":   filepath.Join(real, "bob"),           // bob, by its real path
		"self-alias": filepath.Join(alias, "alice", "src"), // back inside, through the alias
	} {
		if err := os.Symlink(target, filepath.Join(real, "alice", link)); err != nil {
			t.Fatal(err)
		}
	}
	return wt, alias, real, secret
}

// TestSandboxSymlinkedWorktreeParent checks the escapes that a symlinked
// worktree parent opens: the sibling worktree by '..', by either spelling of
// its absolute path, and through links that lead up or across. Every file
// tool must refuse each, and nothing outside may change.
func TestSandboxSymlinkedWorktreeParent(t *testing.T) {
	wt, alias, real, secret := symlinkedParentFixture(t)
	s := newSession(wt, nil)
	s.Root = filepath.Dir(alias)
	s.Env = SessionEnv(os.Environ(), s)
	for _, tc := range []struct{ name, path string }{
		{"dot-dot to the sibling", "../bob/secret.txt"},
		{"dot-dot deep", "src/../../bob/secret.txt"},
		{"absolute through the alias", filepath.Join(alias, "bob", "secret.txt")},
		{"absolute by the real path", filepath.Join(real, "bob", "secret.txt")},
		{"absolute through the alias with dot-dot", filepath.Join(alias, "alice") + "/../bob/secret.txt"},
		{"absolute parent", alias},
		{"link to the parent", "up/bob/secret.txt"},
		{"link to the parent, itself", "up"},
		{"link to the sibling through the alias", "sibling/secret.txt"},
		{"link to the symlinked parent", "parent/bob/secret.txt"},
		{"link to the sibling by its real path", "real-bob/secret.txt"},
		{"new file through a link to the parent", "up/bob/new.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range fileToolCalls(tc.path) {
				r := runTool(t, s, c.tool, c.args)
				if r.Error == "" || r.Output != "" || !strings.Contains(r.Error, "worktree") {
					t.Errorf("%s %q: result %+v, want a refusal that names the worktree", c.tool, tc.path, r)
				}
			}
		})
	}
	if got := readFile(t, secret); got != "bob's secret\n" {
		t.Errorf("bob's secret changed: %q", got)
	}
	entries, err := os.ReadDir(filepath.Dir(secret))
	if err != nil || len(entries) != 1 {
		t.Errorf("bob's worktree gained files: %v %v", entries, err)
	}
}

// TestSandboxSymlinkedWorktreeParentAllows checks that the same layout
// still lets alice use her own files by every spelling.
func TestSandboxSymlinkedWorktreeParentAllows(t *testing.T) {
	wt, alias, real, _ := symlinkedParentFixture(t)
	s := newSession(wt, nil)
	s.Root = filepath.Dir(alias)
	for _, p := range []string{
		"README.md",
		filepath.Join(alias, "alice", "README.md"),
		filepath.Join(real, "alice", "README.md"),
		"../alice/README.md", // leaves and comes back: names a file inside
		"self-alias/main.go",
	} {
		if r := runTool(t, s, "read_file", map[string]any{"path": p}); r.Error != "" || r.Output == "" {
			t.Errorf("read %q: %+v", p, r)
		}
	}
	if r := runTool(t, s, "write_file", map[string]any{"path": filepath.Join(alias, "alice", "new.txt"), "content": "in"}); r.Error != "" {
		t.Errorf("write through the alias: %+v", r)
	}
	if got := readFile(t, filepath.Join(real, "alice", "new.txt")); got != "in" {
		t.Errorf("new.txt = %q", got)
	}
}
