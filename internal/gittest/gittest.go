// Package gittest makes throw-away git repositories for tests: a repository
// with one commit, and linked worktrees laid out the way swarm lays them
// out (<root>/.swarm/worktrees/<agent> on branch swarm/<agent>). git runs
// with a fixed identity and without the user's or the system's config, so
// tests behave the same on every machine.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Git runs git in dir and returns its trimmed stdout, failing t on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}

// Repo makes a repository on main with one commit holding files (path →
// content; README.md when files is empty) and returns its root.
func Repo(t testing.TB, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "repo")
	if len(files) == 0 {
		files = map[string]string{"README.md": "hello\n"}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, root, "init", "-q")
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		WriteFile(t, filepath.Join(root, name), files[name])
	}
	Git(t, root, "add", ".")
	Git(t, root, "commit", "-q", "-m", "initial")
	return root
}

// Worktree makes a Repo and a linked worktree for agent, and returns both.
func Worktree(t testing.TB, agent string, files map[string]string) (root, wt string) {
	t.Helper()
	root = Repo(t, files)
	wt = filepath.Join(root, ".swarm", "worktrees", agent)
	Git(t, root, "worktree", "add", "-q", "-b", "swarm/"+agent, wt)
	return root, wt
}

// WriteFile writes content to path, making its directories.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadFile returns path's content.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
