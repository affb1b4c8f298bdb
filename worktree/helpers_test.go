package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/gittest"
)

// The tests run real git in temporary repositories. The Managers under test
// get an environment with no git identity at all (empty HOME, no system
// config, no GIT_* or EMAIL), so every commit they make relies on the
// fallback identity. The test's own git calls (setting up the operator's
// history) pass an explicit operator identity.

var testNow = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

type memMeta struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memMeta) Meta(_ context.Context, key string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok, nil
}

func (s *memMeta) SetMeta(_ context.Context, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	s.m[key] = value
	return nil
}

// fixture is one repository with a Manager on it.
type fixture struct {
	t    *testing.T
	root string
	env  []string // no identity: what the Manager gets
	meta *memMeta
	m    *Manager
}

// noIdentityEnv is the process environment without anything that tells git
// who the user is or where its config lives.
func noIdentityEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "EMAIL" || k == "HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "GIT_CONFIG_NOSYSTEM=1")
}

// newRepo makes a repository at dir (created) on main with one commit.
func newRepo(t *testing.T, env []string, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitAt(t, env, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "README.md"), "# demo\n")
	gitAt(t, env, dir, "add", "README.md")
	gitAt(t, env, dir, "commit", "-q", "-m", "first")
}

// newFixture makes a repository in a fresh temp dir and a Manager on it.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, root: filepath.Join(t.TempDir(), "repo"), env: noIdentityEnv(t), meta: &memMeta{}}
	newRepo(t, f.env, f.root)
	f.m = f.manager(Options{})
	return f
}

// manager makes another Manager on the fixture's repository and meta store,
// as a later `swarm up` would.
func (f *fixture) manager(opts Options) *Manager {
	f.t.Helper()
	opts.Root = f.root
	if opts.Meta == nil {
		opts.Meta = f.meta
	}
	opts.Env = f.env
	opts.Now = func() time.Time { return testNow }
	m, err := New(context.Background(), opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// git runs git as the operator in dir (relative to the root) and returns
// its trimmed stdout.
func (f *fixture) git(dir string, args ...string) string {
	f.t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(f.root, dir)
	}
	return gitAt(f.t, f.env, dir, args...)
}

// gitFails runs git as the operator and expects it to fail.
func (f *fixture) gitFails(dir string, args ...string) {
	f.t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(f.root, dir)
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = operatorEnv(f.env)
	if out, err := cmd.CombinedOutput(); err == nil {
		f.t.Fatalf("git %v succeeded, want failure: %s", args, out)
	}
}

func operatorEnv(env []string) []string {
	return append(append([]string(nil), env...),
		"GIT_AUTHOR_NAME=Test Operator", "GIT_AUTHOR_EMAIL=op@example.com",
		"GIT_COMMITTER_NAME=Test Operator", "GIT_COMMITTER_EMAIL=op@example.com")
}

func gitAt(t *testing.T, env []string, dir string, args ...string) string {
	t.Helper()
	return gitEnv(t, operatorEnv(env), dir, args...)
}

func gitEnv(t *testing.T, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v in %s: %v: %s", args, dir, err, stderr.String())
	}
	return strings.TrimRight(string(out), "\n")
}

// commitAs commits path (relative to dir) with content, authored by who.
func (f *fixture) commitAs(who, dir, path, content, msg string) {
	f.t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(f.root, dir)
	}
	writeFile(f.t, filepath.Join(dir, path), content)
	gitAt(f.t, f.env, dir, "add", "--", path)
	env := append(operatorEnv(f.env), "GIT_AUTHOR_NAME="+who, "GIT_COMMITTER_NAME="+who)
	gitEnv(f.t, env, dir, "commit", "-q", "-m", msg)
}

func (f *fixture) ensure(agent string) Worktree {
	f.t.Helper()
	wt, err := f.m.Ensure(context.Background(), agent)
	if err != nil {
		f.t.Fatalf("Ensure(%s): %v", agent, err)
	}
	return wt
}

func (f *fixture) branchExists(branch string) bool {
	f.t.Helper()
	cmd := exec.Command("git", "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	cmd.Dir = f.root
	cmd.Env = f.env
	return cmd.Run() == nil
}

func writeFile(t *testing.T, path, content string) { gittest.WriteFile(t, path, content) }

func readFile(t *testing.T, path string) string { return gittest.ReadFile(t, path) }

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
