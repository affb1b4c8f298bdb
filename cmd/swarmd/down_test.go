package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/worktree"
)

// TestDownScripts runs the `swarm down` scripts in testdata/down. The
// worktrees are made by the worktree package itself (mkworktree), as the
// supervisor makes them, and the agents' commits by agentcommit.
func TestDownScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for the CLI tests")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "down"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupRepo,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":       cmdJSONQ,
			"mkworktree":  cmdMkworktree,
			"agentcommit": cmdAgentCommit,
		},
	})
}

// downScriptEnv is the process environment with the script's git-related
// variables, for git run from a custom command.
func downScriptEnv(ts *testscript.TestScript) []string {
	keys := []string{"HOME", "XDG_CONFIG_HOME", "PATH", "EMAIL", "GIT_CONFIG_NOSYSTEM",
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "GIT_") && !slices.Contains(keys, k) {
			env = append(env, kv)
		}
	}
	for _, k := range keys {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// downManager opens the worktree manager of the repository in the
// script's current directory, as `swarm up` would.
func downManager(ts *testscript.TestScript) (*worktree.Manager, *config.Config, func()) {
	ctx := context.Background()
	l := repo.At(ts.MkAbs("."), "")
	cfg, err := config.Load(l.Config, l.Root)
	ts.Check(err)
	st, err := sqlite.Open(ctx, l.DB, sqlite.Options{})
	ts.Check(err)
	m, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Meta: st, Env: downScriptEnv(ts)})
	ts.Check(err)
	return m, cfg, func() { ts.Check(st.Close()) }
}

// cmdMkworktree prepares agents' worktrees the way the supervisor does:
// mkworktree <agent>... runs Preflight, then Ensure and Lock for each.
func cmdMkworktree(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: mkworktree <agent>...")
	}
	m, _, done := downManager(ts)
	defer done()
	ctx := context.Background()
	ts.Check(m.Preflight(ctx))
	for _, a := range args {
		_, err := m.Ensure(ctx, a)
		ts.Check(err)
		ts.Check(m.Lock(ctx, a, "swarm up (test)"))
	}
}

// cmdAgentCommit commits a file in an agent's worktree as the agent does:
// agentcommit <agent> <file> <content> writes content and a newline to file
// and commits it authored swarm/<agent>, with the message "<agent>: <file>".
func cmdAgentCommit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: agentcommit <agent> <file> <content>")
	}
	agent, file, content := args[0], args[1], args[2]
	m, _, done := downManager(ts)
	done()
	dir := m.Path(agent)
	ts.Check(os.WriteFile(filepath.Join(dir, file), []byte(content+"\n"), 0o644))
	env := append(downScriptEnv(ts), "GIT_AUTHOR_NAME=swarm/"+agent, "GIT_COMMITTER_NAME=swarm/"+agent)
	for _, gitArgs := range [][]string{{"add", "--", file}, {"commit", "-q", "-m", agent + ": " + file}} {
		cmd := exec.Command("git", gitArgs...)
		cmd.Dir = dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			ts.Fatalf("git %v in %s: %v\n%s", gitArgs, dir, err, out)
		}
	}
}

type downEnv map[string]string

func (e downEnv) Getenv(k string) string { return e[k] }

// downRepo makes a repository with a swarm.toml naming alpha, and alpha's
// worktree holding one commit of its own. The process environment is set
// for git: no user config, the operator's identity.
func downRepo(t *testing.T) (root string, m *worktree.Manager) {
	t.Helper()
	tmp := t.TempDir()
	root = filepath.Join(tmp, "repo")
	for k, v := range map[string]string{
		"HOME": filepath.Join(tmp, "home"), "GIT_CONFIG_NOSYSTEM": "1", "SWARM_ROOT": "", "SWARM_DB": "",
		"GIT_AUTHOR_NAME": "Test Operator", "GIT_AUTHOR_EMAIL": "op@example.com",
		"GIT_COMMITTER_NAME": "Test Operator", "GIT_COMMITTER_EMAIL": "op@example.com",
	} {
		t.Setenv(k, v)
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	git(root, "init", "-q", "-b", "main")
	toml := "[[agent]]\nname = \"alpha\"\nrole = \"a\"\n"
	if err := os.WriteFile(filepath.Join(root, "swarm.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	git(root, "add", "swarm.toml")
	git(root, "commit", "-q", "-m", "first")
	if code, _, stderr := downRun(t, root, "", "init", "--force"); code != 0 {
		t.Fatalf("swarm init: %s", stderr)
	}
	if err := os.WriteFile(filepath.Join(root, "swarm.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(root, ".swarm", "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err = worktree.New(context.Background(), worktree.Options{Root: root, Meta: st})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := m.Ensure(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt.Path, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(wt.Path, "add", "a.txt")
	git(wt.Path, "commit", "-q", "-m", "alpha: add a.txt")
	return root, m
}

// downRun runs the CLI in-process in dir with stdin.
func downRun(t *testing.T, dir, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	app := &App{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Env: downEnv{}, Cwd: dir}
	code = run(context.Background(), app, args)
	return code, out.String(), errb.String()
}

// On a terminal, --discard lists what would be lost and asks; only "y"
// discards.
func TestDownDiscardAsksOnTerminal(t *testing.T) {
	old := stdinIsTerminal
	stdinIsTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = old })
	root, m := downRepo(t)
	wt := m.Path("alpha")
	if err := os.WriteFile(filepath.Join(wt, "dirty.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, answer := range []string{"n\n", "", "whatever\n"} {
		code, stdout, stderr := downRun(t, root, answer, "down", "--discard")
		if code != exitError || !strings.Contains(stderr, "nothing discarded") {
			t.Fatalf("answer %q: exit %d, stderr %q", answer, code, stderr)
		}
		for _, want := range []string{
			"swarm down --discard will delete these worktrees and branches:",
			"alpha (swarm/alpha): 1 unmerged commit and 1 uncommitted change\n",
			" alpha: add a.txt\n",
			"      ?? dirty.txt\n",
			"Discard them? [y/N] ",
		} {
			if !strings.Contains(stderr, want) {
				t.Fatalf("answer %q: stderr lacks %q:\n%s", answer, want, stderr)
			}
		}
		if stdout != "" {
			t.Fatalf("answer %q: stdout %q", answer, stdout)
		}
		if _, err := os.Stat(filepath.Join(wt, "dirty.txt")); err != nil {
			t.Fatalf("answer %q discarded the worktree", answer)
		}
	}

	code, stdout, stderr := downRun(t, root, "y\n", "down", "--discard")
	if code != 0 || !strings.Contains(stdout, "alpha: discarded swarm/alpha and its worktree (1 unmerged commit and 1 uncommitted change dropped)\n") ||
		!strings.Contains(stdout, "\n    ?? dirty.txt\n") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("worktree still there: %v", err)
	}
	info, err := m.Inspect(context.Background(), "alpha")
	if err != nil || info.HasBranch || info.Registered {
		t.Fatalf("after discard: %+v, %v", info, err)
	}
}
