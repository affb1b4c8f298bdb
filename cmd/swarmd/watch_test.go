package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/lifecycle"
)

// e2eEnv is the environment of the swarm processes the end-to-end tests
// start: the test's, with a private HOME and git identity, and none of the
// variables that would point swarm elsewhere.
func e2eEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	drop := map[string]bool{"HOME": true, "SWARM_ROOT": true, "SWARM_DB": true, "SWARM_AGENT": true,
		"GEMINI_API_KEY": true, "GOOGLE_API_KEY": true, "TMUX": true, "TMUX_PANE": true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] && !strings.HasPrefix(k, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test Operator", "GIT_AUTHOR_EMAIL=op@example.com",
		"GIT_COMMITTER_NAME=Test Operator", "GIT_COMMITTER_EMAIL=op@example.com")
}

// buildSwarm builds the swarm binary into a temporary directory.
func buildSwarm(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the end-to-end tests build the binary and need go on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "swarm")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// e2eTOML runs two scripted agents: alpha sits in a 30 s tool call in its
// first session and ends its second at once; bravo reads its mail and ends.
const e2eTOML = `[defaults]
engine = "script"
[liveness]
nudge_after = "0s"
[[agent]]
name = "alpha"
[[agent]]
name = "bravo"
`

const e2eAlphaScript = `[[session]]
[[session.turn]]
tool = "bash"
args = { command = "sleep 30" }
[[session]]
[[session.turn]]
text = "done"
`

// newE2ERepo makes a git repository with one commit, runs swarm init in
// it, and writes e2eTOML and alpha's script.
func newE2ERepo(t *testing.T, bin string, env []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(filepath.Join(dir, ".swarm", "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("git", "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("git", "add", "README.md")
	run("git", "commit", "-q", "-m", "first")
	run(bin, "init")
	for name, body := range map[string]string{"swarm.toml": e2eTOML, ".swarm/scripts/alpha.toml": e2eAlphaScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// swarmCmd runs the binary in dir and returns its stdout; it fails the
// test unless the exit code is want.
func swarmCmd(t *testing.T, bin, dir string, env []string, want int, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("swarm %v: %v", args, err)
	}
	if code != want {
		t.Fatalf("swarm %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// TestWatchWithoutSupervisor: watch, pause and resume need a running
// supervisor and say so, with exit 1.
func TestWatchWithoutSupervisor(t *testing.T) {
	env := e2eEnv(t)
	bin := buildSwarm(t)
	dir := newE2ERepo(t, bin, env)
	for _, args := range [][]string{{"watch"}, {"watch", "--json"}, {"pause", "alpha"}, {"resume", "alpha", "--json"}} {
		out := swarmCmd(t, bin, dir, env, exitError, args...)
		if !strings.Contains(out, "swarm: no supervisor is running in this repository; start one with 'swarm up'") {
			t.Errorf("swarm %v without a supervisor said %q", args, out)
		}
	}
	out := swarmCmd(t, bin, dir, env, exitError, "pause", "nobody")
	if !strings.Contains(out, `unknown agent "nobody": swarm.toml has alpha, bravo`) {
		t.Errorf("pause of an unknown agent said %q", out)
	}
	swarmCmd(t, bin, dir, env, exitUsage, "pause")
}

// TestWatchLinesAndPause attaches `swarm watch --json` (no terminal: one
// notice per line) to a real supervisor, pauses and resumes an agent from
// the command line, and sees the stream end when the supervisor stops.
func TestWatchLinesAndPause(t *testing.T) {
	env := e2eEnv(t)
	bin := buildSwarm(t)
	dir := newE2ERepo(t, bin, env)

	up := exec.Command(bin, "up", "--no-tui")
	up.Dir, up.Env = dir, env
	upOut, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var upErr bytes.Buffer
	up.Stderr = &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("swarm up's stderr:\n%s", upErr.String())
		}
	})
	defer func() {
		if up.ProcessState == nil {
			up.Process.Kill()
			up.Wait()
		}
	}()
	upLines := readLines(upOut)
	// Runners start after the control socket listens.
	waitLine(t, upLines, 10*time.Second, func(l string) bool { return strings.Contains(l, "Stopped → Initializing") })

	watch := exec.Command(bin, "watch", "--json")
	watch.Dir, watch.Env = dir, env
	watchOut, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	watchErrR, err := watch.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if watch.ProcessState == nil {
			watch.Process.Kill()
			watch.Wait()
		}
	}()
	notices, watchErr := readLines(watchOut), readLines(watchErrR)
	// The subscription is live once watch says so.
	waitLine(t, watchErr, 10*time.Second, func(l string) bool {
		return strings.HasPrefix(l, "swarm watch: attached to the supervisor (pid ") && strings.HasSuffix(l, "); Ctrl-C leaves, the swarm keeps running")
	})
	out := swarmCmd(t, bin, dir, env, 0, "send", "bravo", "hello")
	if !strings.Contains(out, "sent #1 to bravo") {
		t.Fatalf("send: %s", out)
	}
	waitNotice(t, notices, func(n lifecycle.Notice) bool {
		return n.Kind == "message" && n.Message != nil && n.Message.Body == "hello" && n.Message.To == "bravo"
	})

	out = swarmCmd(t, bin, dir, env, 0, "pause", "bravo", "--json")
	var res struct {
		Agent, Action string
		OK            bool
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res != (struct {
		Agent, Action string
		OK            bool
	}{"bravo", "pause", true}) {
		t.Fatalf("pause --json = %s (%v)", out, err)
	}
	waitNotice(t, notices, func(n lifecycle.Notice) bool { return n.Agent == "bravo" && n.Kind == "transition" && n.To == "Paused" })
	out = swarmCmd(t, bin, dir, env, 0, "resume", "bravo")
	if !strings.Contains(out, "resuming bravo") {
		t.Fatalf("resume: %s", out)
	}
	waitNotice(t, notices, func(n lifecycle.Notice) bool {
		return n.Agent == "bravo" && n.Kind == "transition" && n.From == "Paused"
	})

	// The supervisor stops: the watch ends by itself, exit 0.
	if err := up.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitLine(t, watchErr, 20*time.Second, func(l string) bool { return l == "swarm watch: the supervisor stopped" })
	for range notices { // drain to the end of the stream
	}
	for range watchErr {
	}
	if err := watch.Wait(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	for range upLines {
	}
	if err := up.Wait(); err != nil {
		t.Fatalf("up: %v\n%s", err, upErr.String())
	}
}

// readLines reads r line by line into a channel, closed at EOF. The reader
// goroutine ends with r, which the test's process owns.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

func waitLine(t *testing.T, ch <-chan string, within time.Duration, ok func(string) bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var seen []string
	for {
		select {
		case l, open := <-ch:
			if !open {
				t.Fatalf("the output ended without the line; it had:\n%s", strings.Join(seen, "\n"))
			}
			if ok(l) {
				return l
			}
			seen = append(seen, l)
		case <-ctx.Done():
			t.Fatalf("no such line within %s; the output had:\n%s", within, strings.Join(seen, "\n"))
		}
	}
}

func waitNotice(t *testing.T, ch <-chan string, ok func(lifecycle.Notice) bool) {
	t.Helper()
	waitLine(t, ch, 10*time.Second, func(l string) bool {
		var n lifecycle.Notice
		if err := json.Unmarshal([]byte(l), &n); err != nil {
			t.Fatalf("watch --json printed a line that is not JSON: %q", l)
		}
		return ok(n)
	})
}

// TestUpIntoClosedPipe is `swarm up --no-tui | head -n 3`, then Ctrl-C:
// the reader is gone before the stop, and the stop must still finish
// (no death by SIGPIPE halfway through), leaving every agent Stopped and
// no supervisor behind.
func TestUpIntoClosedPipe(t *testing.T) {
	env := e2eEnv(t)
	bin := buildSwarm(t)
	dir := newE2ERepo(t, bin, env)

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(bin, "up", "--no-tui")
	up.Dir, up.Env, up.Stdout = dir, env, pw
	var upErr bytes.Buffer
	up.Stderr = &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	defer func() {
		if up.ProcessState == nil {
			up.Process.Kill()
			up.Wait()
		}
	}()
	// head -n 3: read three lines, then go away.
	sc := bufio.NewScanner(pr)
	for i := 0; i < 3; i++ {
		if !sc.Scan() {
			t.Fatalf("swarm up printed fewer than 3 lines; stderr:\n%s", upErr.String())
		}
	}
	pr.Close()
	type status struct {
		Running bool `json:"running"`
		Agents  []struct {
			Name, State string
		} `json:"agents"`
	}
	readStatus := func() status {
		t.Helper()
		var st status
		out := swarmCmd(t, bin, dir, env, exitOK, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		return st
	}
	// Agents run with nobody reading: wait on the store for a session.
	for deadline := time.Now().Add(30 * time.Second); ; {
		st := readStatus()
		if slices.ContainsFunc(st.Agents, func(a struct{ Name, State string }) bool {
			return a.State == "Running" || a.State == "Idle"
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agent ran within 30s: %+v\nstderr:\n%s", st, upErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := up.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- up.Wait() }()
	select {
	case err := <-done:
		if ws, ok := up.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("swarm up died of %v; stderr:\n%s", ws.Signal(), upErr.String())
		}
		_ = err // exit 0 or 1 both end the stop; the state below is the point
	case <-time.After(60 * time.Second):
		t.Fatalf("swarm up did not stop within 60s of SIGINT; stderr:\n%s", upErr.String())
	}
	st := readStatus()
	if st.Running {
		t.Errorf("status says a supervisor still runs: %+v", st)
	}
	if len(st.Agents) == 0 {
		t.Fatalf("status lists no agents: %+v", st)
	}
	for _, a := range st.Agents {
		if a.State != "Stopped" {
			t.Errorf("agent %s is %s after the stop, want Stopped", a.Name, a.State)
		}
	}
}
