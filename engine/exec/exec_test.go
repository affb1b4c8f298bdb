package exec_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/gittest"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/proc"
)

// A prompt with everything a shell could mangle.
const trickyPrompt = "## Identity\nYou are alice.\n\n\"quotes\" 'single' $HOME `date` \\back\\slash * ? [x] ; & | > <\n\ttab, ünïcødé ✓\n-- --flag\n"

func mustNew(t *testing.T, opts execengine.Options) *execengine.Engine {
	t.Helper()
	e, err := execengine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type session struct {
	*engine.Session
	log  *syncBuffer
	mu   sync.Mutex
	pgid []int
}

func (s *session) pgids() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pgid)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newSession(t *testing.T, prompt string) *session {
	t.Helper()
	wt := t.TempDir()
	s := &session{log: &syncBuffer{}}
	s.Session = &engine.Session{
		Agent: "alice", ID: "alice-3", Seq: 3, Root: filepath.Dir(wt), DB: "/tmp/swarm-test.db",
		Agents: []string{"alice", "bob"}, Worktree: wt, Branch: "swarm/alice", Prompt: prompt,
		Mode: mode.Code, Grace: 200 * time.Millisecond, Log: s.log,
		OnProcess: func(pgid int) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.pgid = append(s.pgid, pgid)
		},
	}
	s.Env = engine.SessionEnv(append(os.Environ(), "EXAMPLE_API_KEY=sk-example-123"), s.Session)
	return s
}

func shell(script string, extra ...string) []string {
	return append([]string{"sh", "-c", script, "sh"}, extra...)
}

func readFile(t *testing.T, path string) string { return gittest.ReadFile(t, path) }

func TestPresetArgv(t *testing.T) {
	cases := []struct {
		preset, prompt, model string
		args                  []string
		argv                  []string
		stdin                 bool
	}{
		{"claude", "", "", nil,
			[]string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"}, true},
		{"claude", config.PromptArg, "", []string{"--max-turns", "5"},
			[]string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--max-turns", "5", "--", "PROMPT"}, false},
		{"claude", config.PromptStdin, "sonnet", []string{"--max-turns", "5"},
			[]string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--model", "sonnet", "--max-turns", "5"}, true},
		{"codex", config.PromptStdin, "", nil,
			[]string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "-"}, true},
		{"codex", config.PromptArg, "o3", nil,
			[]string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--model", "o3", "--", "PROMPT"}, false},
		{"gemini-cli", config.PromptStdin, "gemini-2.5-pro", nil,
			[]string{"gemini", "--yolo", "--skip-trust", "-o", "stream-json", "--model", "gemini-2.5-pro", "-p", ""}, true},
		{"gemini-cli", config.PromptArg, "", nil,
			[]string{"gemini", "--yolo", "--skip-trust", "-o", "stream-json", "-p", "PROMPT"}, false},
	}
	for _, c := range cases {
		t.Run(c.preset+"/"+c.prompt+"/"+c.model, func(t *testing.T) {
			e := mustNew(t, execengine.Options{Name: "x", Preset: c.preset, Args: c.args, Prompt: c.prompt})
			argv, stdin, err := e.Args(c.model, "PROMPT", "")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(argv, c.argv) {
				t.Errorf("argv = %q\nwant   %q", argv, c.argv)
			}
			if got := stdin != nil; got != c.stdin || (c.stdin && string(stdin) != "PROMPT") {
				t.Errorf("stdin = %q, want on stdin: %v", stdin, c.stdin)
			}
		})
	}

	claude := mustNew(t, execengine.Options{Preset: "claude"})
	hasSandbox := slices.Contains(claude.Env(), "IS_SANDBOX=1")
	if root := os.Geteuid() == 0; hasSandbox != root {
		t.Errorf("claude env %q: IS_SANDBOX=1 must be set exactly when running as root (root: %v)", claude.Env(), root)
	}
	for _, p := range []string{"codex", "gemini-cli"} {
		if env := mustNew(t, execengine.Options{Preset: p}).Env(); len(env) != 0 {
			t.Errorf("%s env = %q, want none", p, env)
		}
	}
	if !slices.Equal(slices.Sorted(maps.Keys(execengine.Presets)), slices.Sorted(slices.Values(config.Presets))) {
		t.Errorf("presets differ from config.Presets %v", config.Presets)
	}
}

func TestNewRefuses(t *testing.T) {
	cases := []struct {
		name string
		opts execengine.Options
		want string
	}{
		{"nothing", execengine.Options{Name: "x"}, "set command"},
		{"both", execengine.Options{Name: "x", Preset: "claude", Command: []string{"a"}}, "not both"},
		{"unknown preset", execengine.Options{Name: "x", Preset: "aider"}, "unknown preset"},
		{"preset from file", execengine.Options{Name: "x", Preset: "codex", Prompt: config.PromptFile}, "cannot read its prompt from a file"},
		{"arg without placeholder", execengine.Options{Name: "x", Command: []string{"agent"}, Prompt: config.PromptArg}, `"{prompt}"`},
		{"file without placeholder", execengine.Options{Name: "x", Command: []string{"agent", "{prompt}"}, Prompt: config.PromptFile}, `"{prompt_file}"`},
		{"bad prompt", execengine.Options{Name: "x", Command: []string{"agent"}, Prompt: "pipe"}, "prompt must be"},
		{"empty program", execengine.Options{Name: "x", Command: []string{""}}, "command[0]"},
		{"model without placeholder", execengine.Options{Name: "x", Command: []string{"agent"}, Model: "big"}, `model = "big" cannot reach the command: add a "{model}" argument`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := execengine.New(c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestFromConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[[agent]]
name = "reviewer"
engine = "claude"

[engine.claude]
kind = "exec"
preset = "claude"
args = ["--model", "sonnet"]
prompt = "arg"
`), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := mustNew(t, execengine.FromConfig(cfg.Engines["claude"]))
	argv, _, _ := e.Args("", "P", "")
	if e.Name() != "claude" || !slices.Equal(argv[len(argv)-4:], []string{"--model", "sonnet", "--", "P"}) {
		t.Fatalf("name %q argv %q", e.Name(), argv)
	}
}

func TestPreflight(t *testing.T) {
	if err := mustNew(t, execengine.Options{Name: "x", Command: []string{"sh", "-c", "true"}}).Preflight(context.Background()); err != nil {
		t.Fatalf("sh is on PATH: %v", err)
	}
	err := mustNew(t, execengine.Options{Name: "mine", Command: []string{"swarm-no-such-agent-cli"}}).Preflight(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"swarm-no-such-agent-cli" not found on PATH`) || !strings.Contains(err.Error(), "[engine.mine]") {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	for name, install := range map[string]string{
		"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex", "gemini-cli": "@google/gemini-cli",
	} {
		err := mustNew(t, execengine.Options{Preset: name}).Preflight(context.Background())
		if err == nil || !strings.Contains(err.Error(), "npm install -g "+install) {
			t.Errorf("%s: err = %v, want how to install it", name, err)
		}
	}
}

func TestPromptOnStdinByDefault(t *testing.T) {
	s := newSession(t, trickyPrompt)
	e := mustNew(t, execengine.Options{Name: "sh", Command: shell(`cat > got`)})
	if res := e.Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result = %+v\n%s", res, s.log)
	}
	if got := readFile(t, filepath.Join(s.Worktree, "got")); got != trickyPrompt {
		t.Fatalf("stdin got %q", got)
	}
}

func TestPromptAsArgument(t *testing.T) {
	s := newSession(t, trickyPrompt)
	e := mustNew(t, execengine.Options{Name: "sh", Command: shell(`printf %s "$1" > got; [ -t 0 ] || cat > stdin`, "{prompt}"), Prompt: config.PromptArg})
	if res := e.Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result = %+v\n%s", res, s.log)
	}
	if got := readFile(t, filepath.Join(s.Worktree, "got")); got != trickyPrompt {
		t.Fatalf("argument got %q", got)
	}
	if got := readFile(t, filepath.Join(s.Worktree, "stdin")); got != "" {
		t.Fatalf("stdin got %q, want nothing", got)
	}
	if strings.Contains(s.log.String(), "You are alice") {
		t.Error("the session log shows the expanded prompt argument")
	}
}

func TestPromptFile(t *testing.T) {
	s := newSession(t, trickyPrompt)
	// The placeholder may sit inside an argument.
	e := mustNew(t, execengine.Options{Name: "sh", Command: shell(`f=${1#--prompt-file=}; cp "$f" got; printf %s "$f" > path`, "--prompt-file={prompt_file}"), Prompt: config.PromptFile})
	if res := e.Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result = %+v\n%s", res, s.log)
	}
	if got := readFile(t, filepath.Join(s.Worktree, "got")); got != trickyPrompt {
		t.Fatalf("prompt file held %q", got)
	}
	path := readFile(t, filepath.Join(s.Worktree, "path"))
	if !filepath.IsAbs(path) || strings.HasPrefix(path, s.Worktree) {
		t.Errorf("prompt file %s: want an absolute path outside the worktree", path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("prompt file %s still exists after the session (%v)", path, err)
	}
}

func TestPromptArgumentLimit(t *testing.T) {
	e := mustNew(t, execengine.Options{Name: "sh", Command: shell(`printf %s "$1" | wc -c > got`, "{prompt}"), Prompt: config.PromptArg})

	s := newSession(t, strings.Repeat("x", execengine.MaxArgBytes))
	res := e.Run(context.Background(), s.Session)
	if res.Outcome != engine.Failed || res.Err == nil || !strings.Contains(res.Err.Error(), "128 KiB") || !strings.Contains(res.Err.Error(), `prompt = "stdin"`) {
		t.Fatalf("result = %+v, want a clear 128 KiB error", res)
	}
	if len(s.pgids()) != 0 {
		t.Error("a process was started for a prompt over the limit")
	}

	if runtime.GOOS != "linux" {
		return // the limit below is Linux's MAX_ARG_STRLEN
	}
	// One byte less fits: the limit is the kernel's, not stricter.
	s = newSession(t, strings.Repeat("x", execengine.MaxArgBytes-1))
	if res := e.Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result = %+v\n%s", res, s.log)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(s.Worktree, "got"))); got != strconv.Itoa(execengine.MaxArgBytes-1) {
		t.Fatalf("agent got %s bytes", got)
	}
}

func TestSessionEnvironment(t *testing.T) {
	s := newSession(t, "p")
	e := mustNew(t, execengine.Options{Name: "sh", Command: shell(`env > env.txt; pwd -P > cwd.txt`), Env: []string{"EXTRA_SETTING=on"}})
	if res := e.Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result = %+v\n%s", res, s.log)
	}
	env := strings.Split(readFile(t, filepath.Join(s.Worktree, "env.txt")), "\n")
	for _, want := range []string{
		"SWARM_AGENT=alice", "SWARM_SESSION_ID=alice-3", "SWARM_SESSION_SEQ=3", "SWARM_DB=/tmp/swarm-test.db",
		"SWARM_AGENTS=alice,bob", "SWARM_ROOT=" + s.Root, "GIT_AUTHOR_NAME=swarm/alice", "BD_ACTOR=alice",
		"EXAMPLE_API_KEY=sk-example-123", // exec agents need their keys
		"EXTRA_SETTING=on",
	} {
		if !slices.Contains(env, want) {
			t.Errorf("agent env lacks %s", want)
		}
	}
	wt, _ := filepath.EvalSymlinks(s.Worktree)
	if got := strings.TrimSpace(readFile(t, filepath.Join(s.Worktree, "cwd.txt"))); got != wt {
		t.Errorf("cwd = %s, want the worktree %s", got, wt)
	}
}

func TestExitCodes(t *testing.T) {
	s := newSession(t, "p")
	res := mustNew(t, execengine.Options{Name: "ok", Command: shell(`echo all good; echo a warning >&2`)}).Run(context.Background(), s.Session)
	if res.Outcome != engine.Success || res.Err != nil {
		t.Fatalf("exit 0: %+v", res)
	}
	log := s.log.String()
	for _, want := range []string{"all good", "a warning", "=== end: success"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if got := s.pgids(); len(got) != 1 || got[0] <= 1 {
		t.Errorf("OnProcess got %v, want one pgid", got)
	}

	s = newSession(t, "p")
	script := `echo stdout noise; for i in $(seq 1 50); do echo "line $i" >&2; done; echo "fatal: no API key" >&2; exit 3`
	res = mustNew(t, execengine.Options{Name: "bad", Command: shell(script)}).Run(context.Background(), s.Session)
	if res.Outcome != engine.Failed || res.Err == nil {
		t.Fatalf("exit 3: %+v", res)
	}
	msg := res.Err.Error()
	if !strings.Contains(msg, "exit status 3") || !strings.Contains(msg, "fatal: no API key") {
		t.Errorf("error %q lacks the status or the stderr tail", msg)
	}
	if strings.Contains(msg, "line 1\n") {
		t.Errorf("error %q carries all of stderr, not its tail", msg)
	}
	if !strings.Contains(s.log.String(), "line 1\n") {
		t.Error("stderr did not reach the session log")
	}

	s = newSession(t, "p")
	res = mustNew(t, execengine.Options{Name: "gone", Command: []string{"swarm-no-such-agent-cli"}}).Run(context.Background(), s.Session)
	if res.Outcome != engine.Failed || !strings.Contains(res.Err.Error(), "swarm-no-such-agent-cli") {
		t.Fatalf("missing command: %+v", res)
	}
}

// startedAgent runs script under the exec engine. The script must write a
// pid to the FIFO at $1 once it has started its children; startedAgent
// returns once it has, with the pid and the channel the result arrives on.
func startedAgent(t *testing.T, ctx context.Context, s *session, script string) (int, <-chan engine.Result) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e := mustNew(t, execengine.Options{Name: "sh", Command: shell(script, fifo)})
	done := make(chan engine.Result, 1)
	go func() { done <- e.Run(ctx, s.Session) }()
	// Opening a FIFO for reading blocks until the agent opens it to write.
	b, err := os.ReadFile(fifo)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("agent wrote %q: %v", b, err)
	}
	return pid, done
}

// groupGone waits for the kernel to reap what is left of a killed group,
// and checks that pids (members the agent reported) are gone too, so a
// child that escaped the group cannot pass. Nothing is alive by now; the
// bounded poll covers reaping only.
func groupGone(t *testing.T, pgid int, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		// Reap orphans of the group that were reparented to us (we are a
		// child subreaper on Linux); ECHILD when there are none.
		for {
			pid, err := syscall.Wait4(-pgid, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		alive := proc.GroupAlive(pgid)
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				alive = true
			}
		}
		if !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has processes after the session ended", pgid)
		}
		<-tick.C
	}
}

func TestInterruptKillsTheWholeGroup(t *testing.T) {
	s := newSession(t, "p")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	pid, done := startedAgent(t, ctx, s, `sleep 600 & echo $! > "$1"; wait`)
	cause := errors.New("urgent mail from lead")
	cancel(cause)
	res := <-done
	if res.Outcome != engine.Cancelled || !errors.Is(res.Cause, cause) {
		t.Fatalf("result = %+v, want Cancelled with the cause", res)
	}
	pgids := s.pgids()
	if len(pgids) != 1 {
		t.Fatalf("OnProcess got %v", pgids)
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid != pgids[0] {
		t.Fatalf("sleep is in group %d, not the agent's %d", pgid, pgids[0])
	}
	groupGone(t, pgids[0], pid)
	if !strings.Contains(s.log.String(), "=== end: cancelled · cause: urgent mail from lead") {
		t.Errorf("log:\n%s", s.log)
	}
}

// An agent that ignores SIGTERM is killed when the grace runs out.
func TestInterruptEscalatesToSIGKILL(t *testing.T) {
	s := newSession(t, "p")
	s.Grace = 100 * time.Millisecond
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	pid, done := startedAgent(t, ctx, s, `trap '' TERM; sleep 600 & echo $! > "$1"; wait; wait`)
	cancel(errors.New("operator stop"))
	res := <-done
	if res.Outcome != engine.Cancelled {
		t.Fatalf("result = %+v", res)
	}
	groupGone(t, s.pgids()[0], pid)
}

// An agent that exits 0 but leaves a background process holding its
// stdout succeeds, and the leftover is killed with its group.
func TestLeftoverProcessIsKilled(t *testing.T) {
	s := newSession(t, "p")
	res := mustNew(t, execengine.Options{Name: "sh", Command: shell(`sleep 600 & echo $! > sleep.pid; echo finished`)}).Run(context.Background(), s.Session)
	if res.Outcome != engine.Success {
		t.Fatalf("result = %+v\n%s", res, s.log)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(s.Worktree, "sleep.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	groupGone(t, s.pgids()[0], pid)
}

func TestSessionTimeout(t *testing.T) {
	s := newSession(t, "p")
	// Long enough for sh to start and report; the session ends by timeout
	// either way.
	s.Timeout = 2 * time.Second
	pid, done := startedAgent(t, context.Background(), s, `sleep 600 & echo $! > "$1"; wait`)
	res := <-done
	if res.Outcome != engine.Timeout || !errors.Is(res.Err, engine.ErrSessionTimeout) {
		t.Fatalf("result = %+v, want Timeout", res)
	}
	groupGone(t, s.pgids()[0], pid)
}

func TestAlreadyCancelled(t *testing.T) {
	s := newSession(t, "p")
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("shutdown")
	cancel(cause)
	res := mustNew(t, execengine.Options{Name: "sh", Command: shell(`touch ran`)}).Run(ctx, s.Session)
	if res.Outcome != engine.Cancelled || !errors.Is(res.Cause, cause) {
		t.Fatalf("result = %+v", res)
	}
	if _, err := os.Stat(filepath.Join(s.Worktree, "ran")); err == nil {
		t.Fatal("the agent ran although the session was already cancelled")
	}
}

// env_file: its variables reach the agent's process and win over the
// user's environment; a bad file stops New, naming the file.
func TestEnvFile(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "claude.env")
	if err := os.WriteFile(envFile, []byte("# keys for this engine\nEXAMPLE_API_KEY=sk-from-the-file\nexport PROXY_URL=\"http://proxy:3128\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := execengine.FromConfig(config.Engine{Name: "sh", Kind: "exec", Command: shell(`env > env.txt`), EnvFile: envFile})
	if o.EnvFile != envFile {
		t.Fatalf("FromConfig dropped env_file: %+v", o)
	}
	s := newSession(t, "p")
	if res := mustNew(t, o).Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result = %+v\n%s", res, s.log)
	}
	env := strings.Split(readFile(t, filepath.Join(s.Worktree, "env.txt")), "\n")
	for _, want := range []string{"EXAMPLE_API_KEY=sk-from-the-file", "PROXY_URL=http://proxy:3128", "SWARM_AGENT=alice"} {
		if !slices.Contains(env, want) {
			t.Errorf("agent env lacks %s", want)
		}
	}
	if slices.Contains(env, "EXAMPLE_API_KEY=sk-example-123") {
		t.Error("the user's value won over the env_file's")
	}
	if strings.Contains(s.log.String(), "sk-from-the-file") {
		t.Error("the session log shows a value from the env_file")
	}

	bad := filepath.Join(dir, "bad.env")
	if err := os.WriteFile(bad, []byte("OK=1\nnot a variable line with secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.EnvFile = bad
	_, err := execengine.New(o)
	if err == nil || !strings.Contains(err.Error(), bad+":2") || strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("New with a bad env_file = %v", err)
	}
}

func TestPresetCredentials(t *testing.T) {
	home := t.TempDir()
	claude := execengine.Presets["claude"]
	if why, ok := claude.Credentials(nil, home); ok || !strings.Contains(why, "no ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN set") || !strings.Contains(why, "~/.claude/.credentials.json") {
		t.Fatalf("nothing: %q, %v", why, ok)
	}
	if why, ok := claude.Credentials([]string{"ANTHROPIC_API_KEY=sk"}, home); !ok || why != "ANTHROPIC_API_KEY is set" {
		t.Fatalf("key: %q, %v", why, ok)
	}
	if _, ok := claude.Credentials([]string{"ANTHROPIC_API_KEY=sk", "ANTHROPIC_API_KEY="}, home); ok {
		t.Fatal("an emptied key counts")
	}
	gittest.WriteFile(t, filepath.Join(home, ".claude", ".credentials.json"), "{}")
	if why, ok := claude.Credentials(nil, home); !ok || !strings.Contains(why, "logged in") {
		t.Fatalf("login: %q, %v", why, ok)
	}
	codex := execengine.Presets["codex"]
	elsewhere := t.TempDir()
	gittest.WriteFile(t, filepath.Join(elsewhere, "auth.json"), "{}")
	if why, ok := codex.Credentials([]string{"CODEX_HOME=" + elsewhere}, home); !ok || !strings.Contains(why, elsewhere) {
		t.Fatalf("CODEX_HOME login: %q, %v", why, ok)
	}
	gem := execengine.Presets["gemini-cli"]
	if _, ok := gem.Credentials([]string{"GOOGLE_API_KEY=x"}, home); !ok {
		t.Fatal("GOOGLE_API_KEY does not count for gemini-cli")
	}
	for name, p := range execengine.Presets {
		if len(p.Keys) == 0 || len(p.Logins) == 0 || p.Login == "" {
			t.Errorf("preset %s does not say how it authenticates", name)
		}
	}
}

func TestModelArgs(t *testing.T) {
	custom := execengine.Options{Name: "mine", Command: []string{"agent", "--model={model}", "-m", "{model}"}}
	e := mustNew(t, custom)
	argv, _, err := e.Args("big", "P", "")
	if err != nil || !slices.Equal(argv, []string{"agent", "--model=big", "-m", "big"}) {
		t.Fatalf("argv = %q, %v", argv, err)
	}
	if _, _, err := e.Args("", "P", ""); err == nil || !strings.Contains(err.Error(), `takes "{model}", but the session has no model; set model on the agent or in [engine.mine]`) {
		t.Fatalf("no model: err = %v", err)
	}
	// The engine's own model wins over the session's.
	custom.Model = "huge"
	if argv, _, _ := mustNew(t, custom).Args("big", "P", ""); !slices.Equal(argv, []string{"agent", "--model=huge", "-m", "huge"}) {
		t.Fatalf("engine model: argv = %q", argv)
	}
	codex := mustNew(t, execengine.Options{Name: "codex", Preset: "codex", Model: "o3"})
	if argv, _, _ := codex.Args("", "P", ""); !slices.Contains(argv, "o3") {
		t.Fatalf("codex engine model: argv = %q", argv)
	}
	// A model reaches the command line of a real session.
	out := filepath.Join(t.TempDir(), "argv")
	sh := mustNew(t, execengine.Options{Name: "sh", Command: shell(`printf '%s\n' "$@" > "$OUT"`, "--model", "{model}"), Env: []string{"OUT=" + out}})
	s := newSession(t, "hi")
	s.Model = "opus"
	if res := sh.Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result %+v\n%s", res, s.log.String())
	}
	if got := readFile(t, out); got != "--model\nopus\n" {
		t.Fatalf("argv seen = %q", got)
	}
}
