//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/mailbox/sqlite"

	"github.com/swarmhq/swarm/mailbox"
)

// swarmBin is the binary under test: $SWARM_BIN, or one built for the run.
var swarmBin string

func TestMain(m *testing.M) {
	if os.Getenv(senderEnv) != "" {
		os.Exit(senderMain())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	swarmBin = os.Getenv("SWARM_BIN")
	if swarmBin == "" {
		dir, err := os.MkdirTemp("", "swarm-reliability-bin-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		swarmBin = filepath.Join(dir, "swarm")
		// Both binaries, as they are installed: the front hands swarmd
		// everything but what it answers through a socket.
		cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/swarm", "../cmd/swarmd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("build swarm: %v\n%s", err, out)
		}
	}
	abs, err := filepath.Abs(swarmBin)
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(abs); err != nil {
		return 0, fmt.Errorf("SWARM_BIN: %w", err)
	}
	// Sessions put the binary's directory first on PATH only when it is
	// named swarm; the scripted agents call `swarm send`.
	if filepath.Base(abs) != "swarm" {
		return 0, fmt.Errorf("SWARM_BIN must be named swarm, got %s", abs)
	}
	swarmBin = abs
	defer removeShared()
	return m.Run(), nil
}

// newRand returns a seeded generator and logs the seed:
// RELIABILITY_SEED=<seed> replays a run.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RELIABILITY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RELIABILITY_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with RELIABILITY_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// harness is one throw-away repository with a swarm in it.
type harness struct {
	t     *testing.T
	dir   string // the test's temporary directory
	root  string // the repository
	home  string
	extra []string // environment added to every child

	mu      sync.Mutex
	procs   []*upProc
	started int
}

type swarmConfig struct {
	agents  []string
	scripts map[string]string // agent -> script file text
	toml    string            // appended to swarm.toml
	engine  string            // defaults.engine; "script" when empty
	big     bool              // the first commit holds bigFiles files too
}

// newHarness makes a repository with one commit, runs `swarm init` in it
// and writes swarm.toml and the agents' scripts. Its cleanup kills what the
// test left running and fails the test if any process of it survives.
func newHarness(t *testing.T, c swarmConfig) *harness {
	t.Helper()
	return newHarnessIn(t, t.TempDir(), c)
}

// newHarnessIn is newHarness in the directory dir, which outlives the test
// when it is not the test's own.
func newHarnessIn(t *testing.T, dir string, c swarmConfig) *harness {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, root: filepath.Join(dir, "repo"), home: filepath.Join(dir, "home")}
	for _, d := range []string{h.root, h.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(h.cleanup)
	if c.big {
		if out, err := exec.Command("cp", "-a", filepath.Join(bigSeed(t), ".git"), filepath.Join(h.root, ".git")).CombinedOutput(); err != nil {
			t.Fatalf("copy the large repository: %v\n%s", err, out)
		}
		h.git(h.root, "reset", "-q", "--hard", "main")
	} else {
		h.git(h.root, "init", "-q", "-b", "main")
		writeFile(t, filepath.Join(h.root, "README.md"), "a repository for the reliability suite\n")
		h.git(h.root, "add", "-A")
		h.git(h.root, "commit", "-q", "-m", "first commit")
	}
	// Sessions note what they did in their worktree's notesDir, which git
	// ignores (see noteLines).
	exclude := filepath.Join(h.root, ".git", "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(exclude, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(f, "/%s/\n", notesDir); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if r := h.swarm("init"); r.code != 0 {
		t.Fatalf("swarm init: %s", r)
	}
	engine := c.engine
	if engine == "" {
		engine = "script"
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[defaults]\nengine = %q\ninterrupt_grace = \"3s\"\n\n", engine)
	cfg.WriteString(c.toml)
	for _, a := range c.agents {
		fmt.Fprintf(&cfg, "\n[[agent]]\nname = %q\nrole = \"You are %s.\"\n", a, a)
	}
	writeFile(t, filepath.Join(h.root, "swarm.toml"), cfg.String())
	for a, s := range c.scripts {
		writeFile(t, filepath.Join(h.root, ".swarm", "scripts", a+".toml"), s)
	}
	return h
}

// env is the environment of every child: the test's, without anything
// pointing swarm or git elsewhere, with a private HOME and git identity.
func (h *harness) env() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SWARM_") || strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "BD_") ||
			strings.HasPrefix(k, "BEADS_") || k == "HOME" || k == "GEMINI_API_KEY" || k == "GOOGLE_API_KEY" ||
			k == "GOOGLE_GEMINI_BASE_URL" || k == "EMAIL" {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+h.home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Operator", "GIT_AUTHOR_EMAIL=op@example.com",
		"GIT_COMMITTER_NAME=Operator", "GIT_COMMITTER_EMAIL=op@example.com")
	return append(out, h.extra...)
}

func (h *harness) git(dir string, args ...string) string {
	h.t.Helper()
	out, err := h.gitErr(dir, args...)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = h.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// result is a finished swarm command.
type result struct {
	args           []string
	stdout, stderr string
	code           int
	took           time.Duration
	err            error // it could not run, or did not finish in time
}

func (r result) String() string {
	return fmt.Sprintf("swarm %s: exit %d after %s (%v)\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code,
		r.took.Round(time.Millisecond), r.err, r.stdout, r.stderr)
}

// swarm runs `swarm --dir <repo> args...` to completion (at most a minute).
func (h *harness) swarm(args ...string) result {
	return h.swarmEnv(nil, args...)
}

func (h *harness) swarmEnv(env []string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := h.runCtx(ctx, env, args...)
	if r.err != nil {
		h.t.Fatalf("swarm %s: %v", strings.Join(args, " "), r.err)
	}
	return r
}

// runCtx runs `swarm --dir <repo> args...`; r.err is set when it could not
// run or did not finish in time, and never fails the test itself.
func (h *harness) runCtx(ctx context.Context, env []string, args ...string) result {
	full := append([]string{"--dir", h.root}, args...)
	cmd := exec.CommandContext(ctx, swarmBin, full...)
	cmd.Dir = h.root
	cmd.Env = append(h.env(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := result{args: full, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(t0)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		r.code, r.err = -1, fmt.Errorf("did not finish in time: %w", ctx.Err())
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		r.code, r.err = -1, err
	}
	return r
}

// upProc is a `swarm up` running in the background.
type upProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// up starts `swarm --dir <repo> up --no-tui args...`.
func (h *harness) up(args ...string) *upProc {
	h.t.Helper()
	p, err := h.startUp(nil, args...)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) startUp(env []string, args ...string) (*upProc, error) {
	h.mu.Lock()
	h.started++
	log := filepath.Join(h.dir, fmt.Sprintf("up-%d.log", h.started))
	h.mu.Unlock()
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(swarmBin, append([]string{"--dir", h.root, "up", "--no-tui"}, args...)...)
	cmd.Dir = h.root
	cmd.Env = append(h.env(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &upProc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p, nil
}

// notesDir is where a session's script notes what it did (a message it
// sent, a commit it made): in its own worktree, since a sandboxed session
// can write nowhere else (DESIGN §13.3). git ignores it.
const notesDir = ".r1"

// noteLines reads the note file name of every agent's worktree, in agent
// order.
func (h *harness) noteLines(agents []string, name string) []string {
	var out []string
	for _, a := range agents {
		out = append(out, readLines(filepath.Join(h.root, ".swarm", "worktrees", a, notesDir, name))...)
	}
	return out
}

func (p *upProc) pid() int { return p.cmd.Process.Pid }

func (p *upProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode is the exit status once exited; -1 for a signal.
func (p *upProc) exitCode() int {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

func (p *upProc) output() string {
	data, _ := os.ReadFile(p.log)
	return string(data)
}

// wait waits up to d for the process to exit.
func (p *upProc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// kill9 kills the supervisor alone, as a crash would: its children are
// left to what swarm set up for them.
func (p *upProc) kill9(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	if !p.wait(10 * time.Second) {
		t.Fatalf("swarm up (pid %d) still running 10 s after SIGKILL", p.pid())
	}
}

// interrupt stops the supervisor as Ctrl-C does and expects exit 0.
func (p *upProc) interrupt(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if !p.wait(60 * time.Second) {
		t.Fatalf("swarm up (pid %d) did not stop within 60 s of SIGINT:\n%s", p.pid(), tail(p.output(), 3000))
	}
	if p.exitCode() != 0 {
		t.Fatalf("swarm up exited %d after SIGINT:\n%s", p.exitCode(), tail(p.output(), 3000))
	}
}

// cleanup kills every supervisor still running, then checks that no
// process of the test is left: nothing whose command line, working
// directory or environment names the test's directory.
func (h *harness) cleanup() {
	h.mu.Lock()
	procs := h.procs
	h.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			h.t.Errorf("swarm up (pid %d) was still running at the end of the test; killing it", p.pid())
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	var left []procInfo
	_ = waitUntil(10*time.Second, func() (bool, error) {
		left = processesUnder(h.dir)
		return len(left) == 0, nil
	})
	for _, p := range left {
		h.t.Errorf("process left behind: pid %d: %s (cwd %s)", p.pid, p.cmdline, p.cwd)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

type procInfo struct {
	pid          int
	cmdline, cwd string
}

// processesUnder lists the live processes that name dir in their command
// line, working directory or environment (the tests' children carry it in
// --dir, their cwd, or SWARM_ROOT). The test process itself is skipped.
func processesUnder(dir string) []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		base := filepath.Join("/proc", e.Name())
		stat, err := os.ReadFile(filepath.Join(base, "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue // dead, waiting to be reaped by its parent
		}
		cmdline, _ := os.ReadFile(filepath.Join(base, "cmdline"))
		cwd, _ := os.Readlink(filepath.Join(base, "cwd"))
		environ, _ := os.ReadFile(filepath.Join(base, "environ"))
		if bytes.Contains(cmdline, []byte(dir)) || strings.HasPrefix(cwd, dir) || bytes.Contains(environ, []byte("SWARM_ROOT="+dir)) {
			out = append(out, procInfo{pid: pid, cmdline: string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), cwd: cwd})
		}
	}
	return out
}

// leftProcesses lists the live processes a killed supervisor of root left
// running for a moment: those of its sessions (carrying the swarm's root
// marker in their environment) and the git commands it ran in root (a
// `git worktree add` goes on writing after its parent's kill -9).
func leftProcesses(root string) []procInfo {
	var out []procInfo
	for _, p := range processesUnder(root) {
		environ, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "environ"))
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "comm"))
		git := strings.TrimSpace(string(comm)) == "git" || strings.HasPrefix(string(comm), "git-")
		if bytes.Contains(environ, []byte("SWARM_ROOT="+root+"\x00")) || git && strings.HasPrefix(p.cwd, root) {
			out = append(out, p)
		}
	}
	return out
}

// freeze stops (SIGSTOP) the processes leftProcesses finds under root,
// again until no new one appears (a running shell may fork meanwhile), and
// returns what lets them go on (SIGCONT).
func freeze(root string) (thaw func()) {
	stopped := map[int]bool{}
	for range 20 {
		fresh := 0
		for _, p := range leftProcesses(root) {
			if !stopped[p.pid] && syscall.Kill(p.pid, syscall.SIGSTOP) == nil {
				stopped[p.pid] = true
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	return func() {
		for pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}

// waitUntil polls cond every 20 ms until it holds or d passes; it reports
// whether it held. It is the only way these tests wait for something.
func waitUntil(d time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval, not a wait for an event
	}
}

// waitFor is waitUntil that fails the test with what it waited for.
func (h *harness) waitFor(d time.Duration, what string, cond func() (bool, error)) {
	h.t.Helper()
	if err := waitUntil(d, cond); err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// store opens the swarm's database; the test closes it.
func (h *harness) store(agents []string) *testStore {
	h.t.Helper()
	path := filepath.Join(h.root, ".swarm", "swarm.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	// The suite checks the database from outside, as an auditor would: a
	// second, plain connection for its own queries.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		h.t.Fatal(err)
	}
	return &testStore{Store: st, db: db}
}

// testStore is the swarm's store plus a raw connection for the suite's
// own queries.
type testStore struct {
	mailbox.Store
	db *sql.DB
}

// DB is the raw connection.
func (s *testStore) DB() *sql.DB { return s.db }

// IntegrityCheck runs the store's integrity check.
func (s *testStore) IntegrityCheck(ctx context.Context) (string, error) { return s.Check(ctx) }

// Close closes both connections.
func (s *testStore) Close() error { return errors.Join(s.db.Close(), s.Store.Close()) }

// agentStates reads every agent's state.
func agentStates(st mailbox.Store) (map[string]mailbox.Agent, error) {
	as, err := st.Agents(context.Background())
	if err != nil {
		return nil, err
	}
	out := map[string]mailbox.Agent{}
	for _, a := range as {
		out[a.Name] = a
	}
	return out, nil
}

// running reports whether a supervisor answers on the control socket with
// pid.
func (h *harness) running(pid int) (bool, error) {
	r := h.swarm("status", "--json")
	if r.code != 0 {
		return false, fmt.Errorf("swarm status: %s", r)
	}
	return strings.Contains(r.stdout, `"running": true`) && strings.Contains(r.stdout, fmt.Sprintf(`"pid": %d`, pid)), nil
}

func writeFile(t *testing.T, path, content string) { gittest.WriteFile(t, path, content) }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
