// Command demo shows a whole swarm run, offline, in a temporary git
// repository: `make demo` builds bin/swarm and runs this program with it.
//
// Three agents (demo/swarm.toml) run on the script engine with the scripts
// in demo/scripts, through the real `swarm up` binary:
//
//   - lead asks backend for a health endpoint and docs to document it;
//   - backend starts a long tool call, and a real `swarm send --urgent`
//     process interrupts it; its next session's prompt carries the Interrupt
//     Context, it does the work and answers the urgent mail in its thread;
//   - docs waits for backend's note, writes the page and answers backend in
//     the note's thread; when bd is installed it also claims and closes the
//     beads task this program filed.
//
// The program waits on conditions by polling `swarm status --json` with
// deadlines (never on fixed sleeps), checks that everything above happened,
// prints the timeline from `swarm events --json` and the mailbox, stops the
// swarm with `swarm down`, checks that no process is left, and exits 0. It
// keeps the repository, and says where it and the logs are.
//
// Usage: go run ./demo [-swarm bin/swarm] [-dir DIR]
package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

//go:embed swarm.toml scripts/*.toml
var files embed.FS

// Deadlines. The whole run takes a few seconds; these only bound a stuck
// run so the demo fails with a reason instead of hanging.
const (
	stepTimeout  = 30 * time.Second // one condition to wait for
	totalTimeout = 55 * time.Second // the whole demo after the build
	stopTimeout  = 15 * time.Second // swarm up to exit after swarm down
	pollEvery    = 50 * time.Millisecond
)

// The urgent message the demo sends; backend's session 2 answers it.
const urgentBody = "Use /healthz, not /health: the load balancer probes /healthz."

func main() {
	bin := flag.String("swarm", "bin/swarm", "the swarm binary to run")
	dir := flag.String("dir", "", "make the demo repository here (default: a new temporary directory)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *dir, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

// demo is one run.
type demo struct {
	out   io.Writer
	bin   string // absolute path of swarm
	repo  string
	start time.Time
	task  string // the beads task id, "" without bd
	up    *exec.Cmd
	upOut *os.File
	upErr chan error // swarm up's exit
}

func run(ctx context.Context, bin, dir string, out io.Writer) (err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, totalTimeout, fmt.Errorf("the demo took longer than %s", totalTimeout))
	defer cancel()
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("%s: %w; build it first with 'make build' (or run 'make demo')", bin, err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return errors.New("git is not on PATH; install git 2.20 or newer")
	}
	d := &demo{out: out, bin: abs, start: time.Now()}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "swarm-demo-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if d.repo, err = filepath.EvalSymlinks(dir); err != nil {
		return err
	}
	// Whatever happens, swarm up is stopped and nothing is left running.
	defer func() {
		if serr := d.stopUp(); serr != nil && err == nil {
			err = serr
		}
		if lerr := leftovers(d.repo); lerr != nil && err == nil {
			err = lerr
		}
		if err != nil {
			fmt.Fprintf(out, "\nThe demo repository is %s; the supervisor's output is in .swarm/logs/up.out there.\n", d.repo)
		}
	}()

	d.say("A git repository with one commit: %s", d.repo)
	if err := d.makeRepo(ctx); err != nil {
		return err
	}
	if err := d.setupBeads(ctx); err != nil {
		return err
	}
	d.say("$ swarm up --no-tui    (in the background; its output goes to .swarm/logs/up.out)")
	if err := d.startUp(); err != nil {
		return err
	}
	if err := d.waitStatus(ctx, "the supervisor to answer", func(s status) bool { return s.Running }); err != nil {
		return err
	}

	// lead's mail goes out first, so the message ids are always the same.
	if err := d.waitStatus(ctx, "lead to hand out the work", func(s status) bool {
		a := s.agent("lead")
		return a.SessionSeq >= 1 && a.State == "Idle"
	}); err != nil {
		return err
	}
	if err := d.waitStatus(ctx, "backend to be in its long tool call", func(s status) bool {
		a := s.agent("backend")
		return a.State == "Running" && a.SessionSeq == 1 && strings.Contains(a.Activity, "sleep 30")
	}); err != nil {
		return err
	}
	d.say("backend is in session 1, running `sleep 30`; interrupting it:")
	sent, err := d.swarm(ctx, "send", "backend", urgentBody, "--urgent")
	if err != nil {
		return err
	}
	d.say("$ swarm send backend %q --urgent\n%s", urgentBody, strings.TrimSpace(sent))

	d.say("Waiting for the team to finish: every agent idle, no mail pending")
	if err := d.waitStatus(ctx, "every agent to be idle with no mail pending", func(s status) bool {
		if len(s.Agents) != 3 {
			return false
		}
		for _, a := range s.Agents {
			if a.State != "Idle" || a.Pending != 0 {
				return false
			}
		}
		// backend: interrupted 1, working 2, reading docs' answer 3.
		return s.agent("backend").SessionSeq >= 3 && s.agent("docs").SessionSeq >= 2
	}); err != nil {
		return err
	}

	down, err := d.swarm(ctx, "down")
	if err != nil {
		return err
	}
	if err := d.waitUp(stopTimeout); err != nil {
		return err
	}
	d.say("$ swarm down\n%s", strings.TrimSpace(down))

	return d.report(ctx)
}

// say prints one step; the lines after the first (a command's output) are
// indented under the first.
func (d *demo) say(format string, a ...any) {
	text := strings.TrimRight(fmt.Sprintf(format, a...), "\n")
	text = strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", 13))
	fmt.Fprintf(d.out, "demo %5.1fs  %s\n", time.Since(d.start).Seconds(), text)
}

// makeRepo makes the repository, runs `swarm init`, and puts the demo's
// swarm.toml and scripts in place.
func (d *demo) makeRepo(ctx context.Context) error {
	git := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = d.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := git("init", "-q"); err != nil {
		return err
	}
	// `git init -b` needs git 2.28; swarm supports 2.20.
	if err := git("symbolic-ref", "HEAD", "refs/heads/main"); err != nil {
		return err
	}
	readme := "# shop\n\nA small web shop, worked on by a swarm of agents.\n"
	if err := os.WriteFile(filepath.Join(d.repo, "README.md"), []byte(readme), 0o644); err != nil {
		return err
	}
	if err := git("add", "README.md"); err != nil {
		return err
	}
	if err := git("-c", "user.name=Demo Operator", "-c", "user.email=operator@example.com", "commit", "-q", "-m", "first commit"); err != nil {
		return err
	}
	out, err := d.swarm(ctx, "init")
	if err != nil {
		return err
	}
	d.say("$ swarm init\n%s", strings.TrimSpace(out))
	cfg, err := files.ReadFile("swarm.toml")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.repo, "swarm.toml"), cfg, 0o644); err != nil {
		return err
	}
	scripts := filepath.Join(d.repo, ".swarm", "scripts")
	if err := os.MkdirAll(scripts, 0o755); err != nil {
		return err
	}
	for _, agent := range []string{"lead", "backend", "docs"} {
		data, err := files.ReadFile("scripts/" + agent + ".toml")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(scripts, agent+".toml"), data, 0o644); err != nil {
			return err
		}
	}
	d.say("Replaced swarm.toml with demo/swarm.toml: agents lead, backend and docs on the script engine,\nplaying demo/scripts/*.toml (copied to .swarm/scripts/)")
	return nil
}

// setupBeads files a beads task for docs when bd is installed. A bd that
// cannot be set up here is reported and the beads part skipped: the demo is
// about swarm.
func (d *demo) setupBeads(ctx context.Context) error {
	if _, err := exec.LookPath("bd"); err != nil {
		d.say("bd (beads) is not installed: skipping the beads part (with bd on PATH, docs claims and closes a task)")
		return nil
	}
	bd := func(args ...string) ([]byte, error) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, "bd", args...)
		cmd.Dir = d.repo
		cmd.Env = append(os.Environ(), "BD_ACTOR=operator", "GIT_AUTHOR_NAME=Demo Operator", "GIT_AUTHOR_EMAIL=operator@example.com",
			"GIT_COMMITTER_NAME=Demo Operator", "GIT_COMMITTER_EMAIL=operator@example.com")
		cmd.WaitDelay = time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("bd %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	if _, err := bd("init", "--quiet"); err != nil {
		d.say("bd is installed but 'bd init' failed here, so the beads part is skipped: %v", err)
		return nil
	}
	out, err := bd("create", "Document the health endpoint", "-t", "task", "-p", "1", "--json")
	if err != nil {
		d.say("bd is installed but 'bd create' failed, so the beads part is skipped: %v", err)
		return nil
	}
	id, err := beadsID(out)
	if err != nil {
		d.say("bd is installed but its 'bd create --json' output is not understood, so the beads part is skipped: %v", err)
		return nil
	}
	data, err := files.ReadFile("scripts/docs.beads.toml")
	if err != nil {
		return err
	}
	data = bytes.ReplaceAll(data, []byte("@TASK@"), []byte(id))
	if err := os.WriteFile(filepath.Join(d.repo, ".swarm", "scripts", "docs.toml"), data, 0o644); err != nil {
		return err
	}
	d.task = id
	d.say("bd is installed: filed beads task %s for docs to claim and close", id)
	return nil
}

// beadsID reads the id from `bd create --json`: an object, or an array of
// one (bd 1.x), possibly in bd 2.0's {"schema_version", "data"} envelope.
func beadsID(out []byte) (string, error) {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(out, &env) == nil && len(env.Data) > 0 {
		out = env.Data
	}
	var one struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(out, &one) == nil && one.ID != "" {
		return one.ID, nil
	}
	var many []struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(out, &many) == nil && len(many) > 0 && many[0].ID != "" {
		return many[0].ID, nil
	}
	return "", fmt.Errorf("no id in %q", strings.TrimSpace(string(out)))
}

// swarm runs one swarm command in the repository and returns its stdout.
func (d *demo) swarm(ctx context.Context, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, d.bin, args...)
	cmd.Dir = d.repo
	cmd.Env = d.env()
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("swarm %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// env is the environment of every swarm process: the user's, without
// anything that would point swarm at another repository.
func (d *demo) env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "SWARM_ROOT" || k == "SWARM_DB" || k == "SWARM_AGENT"
	})
	return append(env, "NO_COLOR=1")
}

func (d *demo) startUp() error {
	logs := filepath.Join(d.repo, ".swarm", "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(logs, "up.out"))
	if err != nil {
		return err
	}
	cmd := exec.Command(d.bin, "up", "--no-tui")
	cmd.Dir = d.repo
	cmd.Env = d.env()
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C in the terminal reaches the demo,
	// which stops swarm up itself and waits for it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start swarm up: %w", err)
	}
	d.up, d.upOut, d.upErr = cmd, f, make(chan error, 1)
	go func() { d.upErr <- cmd.Wait() }()
	return nil
}

// waitUp waits for swarm up to exit, and requires exit status 0.
func (d *demo) waitUp(timeout time.Duration) error {
	if d.up == nil {
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-d.upErr:
		d.up = nil
		d.upOut.Close()
		if err != nil {
			return fmt.Errorf("swarm up exited with %v; see .swarm/logs/up.out", err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("swarm up did not exit within %s", timeout)
	}
}

// stopUp stops a swarm up that is still running: SIGINT (a graceful stop),
// then SIGKILL for its whole process group.
func (d *demo) stopUp() error {
	if d.up == nil {
		return nil
	}
	pid := d.up.Process.Pid
	_ = d.up.Process.Signal(os.Interrupt)
	if err := d.waitUp(stopTimeout); err == nil {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	err := <-d.upErr
	d.up = nil
	d.upOut.Close()
	return fmt.Errorf("swarm up did not stop on SIGINT within %s and was killed (%v)", stopTimeout, err)
}

type status struct {
	Running bool          `json:"running"`
	Agents  []agentStatus `json:"agents"`
}

type agentStatus struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	SessionSeq int64  `json:"session_seq"`
	Pending    int    `json:"pending"`
	Activity   string `json:"activity"`
}

func (s status) agent(name string) agentStatus {
	for _, a := range s.Agents {
		if a.Name == name {
			return a
		}
	}
	return agentStatus{}
}

// waitStatus polls `swarm status --json` until ok holds, swarm up exits,
// or stepTimeout passes.
func (d *demo) waitStatus(ctx context.Context, what string, ok func(status) bool) error {
	deadline := time.Now().Add(stepTimeout)
	var last string
	for {
		out, err := d.swarm(ctx, "status", "--json")
		if err != nil {
			return err
		}
		var s status
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			return fmt.Errorf("swarm status --json: %w", err)
		}
		if ok(s) {
			return nil
		}
		last = out
		select {
		case err := <-d.upErr:
			d.upErr <- err
			return fmt.Errorf("waiting for %s: swarm up exited (%v); see .swarm/logs/up.out", what, err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; last status:\n%s", what, context.Cause(ctx), last)
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s; last status:\n%s", stepTimeout, what, last)
		}
	}
}

type event struct {
	ID    int64     `json:"id"`
	At    time.Time `json:"at"`
	Agent string    `json:"agent"`
	From  *string   `json:"from"`
	To    string    `json:"to"`
	Cause string    `json:"cause"`
	Seq   int64     `json:"session_seq"`
}

type message struct {
	ID        int64     `json:"id"`
	ThreadID  int64     `json:"thread_id"`
	ReplyTo   *int64    `json:"reply_to"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Urgency   string    `json:"urgency"`
	Body      string    `json:"body"`
	State     string    `json:"state"`
	Seq       *int64    `json:"session_seq"`
	CreatedAt time.Time `json:"created_at"`
}
