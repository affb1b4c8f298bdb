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
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
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

// report checks what the demo is meant to show and prints it.
func (d *demo) report(ctx context.Context) error {
	var evs []event
	if err := d.swarmJSON(ctx, &evs, "events", "--json"); err != nil {
		return err
	}
	mail := map[int64]message{}
	for _, who := range []string{"lead", "backend", "docs", "operator"} {
		var ms []message
		if err := d.swarmJSON(ctx, &ms, "inbox", who, "--limit", "0", "--json"); err != nil {
			return err
		}
		for _, m := range ms {
			mail[m.ID] = m
		}
	}
	prompt, err := d.swarm(ctx, "prompt", "backend", "--session", "2")
	if err != nil {
		return err
	}
	log1, err := d.swarm(ctx, "logs", "backend", "--session", "1")
	if err != nil {
		return err
	}

	// What must have happened.
	var problems []string
	interrupted := slices.ContainsFunc(evs, func(e event) bool {
		return e.Agent == "backend" && e.To == "Interrupting" && e.Seq == 1
	})
	if !interrupted {
		problems = append(problems, "backend's session 1 was not interrupted")
	}
	if !strings.Contains(log1, "cause: urgent mail #") {
		problems = append(problems, "backend's session 1 log does not end with the urgent interrupt")
	}
	ictx := section(prompt, "### Interrupt Context")
	if ictx == "" || !strings.Contains(ictx, "healthz") {
		problems = append(problems, "backend's session 2 prompt has no Interrupt Context naming the urgent mail")
	}
	var urgent, reply, docsReply *message
	for _, m := range mail {
		switch {
		case m.From == "operator" && m.Urgency == "urgent":
			urgent = &m
		case m.From == "backend" && m.To == "operator" && m.ReplyTo != nil:
			reply = &m
		case m.From == "docs" && m.To == "backend" && m.ReplyTo != nil:
			docsReply = &m
		}
	}
	switch {
	case urgent == nil:
		problems = append(problems, "the urgent mail is not in the mailbox")
	case urgent.State != "done" || urgent.Seq == nil || *urgent.Seq != 2:
		problems = append(problems, fmt.Sprintf("the urgent mail #%d is %s, want done in backend's session 2", urgent.ID, urgent.State))
	}
	if reply == nil || urgent == nil || *reply.ReplyTo != urgent.ID {
		problems = append(problems, "backend did not answer the urgent mail in its thread")
	}
	if docsReply == nil {
		problems = append(problems, "docs did not answer backend in a thread")
	}
	for _, m := range mail {
		// Mail to the operator stays queued: no session reads it.
		if m.To != "operator" && m.State != "done" {
			problems = append(problems, fmt.Sprintf("mail #%d to %s is %s, not done", m.ID, m.To, m.State))
		}
	}
	beads := ""
	if d.task != "" {
		var err error
		if beads, err = d.checkBeads(ctx); err != nil {
			problems = append(problems, err.Error())
		}
	}

	d.printTimeline(evs, mail)
	fmt.Fprintln(d.out, "\nbackend's session 1, cut short (swarm logs backend --session 1, the end):")
	fmt.Fprintln(d.out, indent(lastLines(log1, 6)))
	fmt.Fprintln(d.out, "\nbackend's session 2 prompt (swarm prompt backend --session 2), its Interrupt Context:")
	fmt.Fprintln(d.out, indent(strings.TrimSpace(ictx)))
	// The threads that have replies, as 'swarm thread' prints them.
	fmt.Fprintln(d.out, "\nThreads (swarm thread <id>):")
	roots := map[int64]bool{}
	for _, m := range mail {
		if m.ReplyTo != nil {
			roots[m.ThreadID] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(roots)) {
		tree, err := d.swarm(ctx, "thread", strconv.FormatInt(id, 10))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		fmt.Fprint(d.out, indent(strings.TrimRight(tree, "\n"))+"\n")
	}
	if beads != "" {
		fmt.Fprintf(d.out, "\nBeads: %s\n", beads)
	}
	fmt.Fprintf(d.out, "\nThe repository: %s\n", d.repo)
	fmt.Fprintf(d.out, "  branches    swarm/lead, swarm/backend, swarm/docs (git log swarm/backend; swarm down --merge brings them in)\n")
	fmt.Fprintf(d.out, "  logs        .swarm/logs/supervisor.log, .swarm/logs/up.out, .swarm/logs/<agent>/<session>.log\n")
	// From here, with --dir: no cd, and no path of this machine's build
	// beyond what the reader typed (bin/swarm under the checkout).
	swarm := d.bin
	if p, err := exec.LookPath("swarm"); err == nil && p == d.bin {
		swarm = "swarm"
	} else if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, d.bin); err == nil && filepath.IsLocal(r) {
			swarm = r
		}
	}
	fmt.Fprintf(d.out, "  look around %s --dir %s events && %[1]s --dir %[2]s logs backend --session 2 && %[1]s --dir %[2]s inbox operator\n", swarm, d.repo)
	if len(problems) > 0 {
		return fmt.Errorf("%d thing(s) did not happen:\n  - %s", len(problems), strings.Join(problems, "\n  - "))
	}
	fmt.Fprintf(d.out, "\nDemo OK in %.1fs: no process left running.\n", time.Since(d.start).Seconds())
	return nil
}

// checkBeads confirms that docs claimed and closed the task.
func (d *demo) checkBeads(ctx context.Context) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bd", "show", d.task, "--json")
	cmd.Dir = d.repo
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bd show %s: %v", d.task, err)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(out, &env) == nil && len(env.Data) > 0 {
		out = env.Data
	}
	type issue struct {
		Status   string `json:"status"`
		Assignee string `json:"assignee"`
	}
	var is issue
	if json.Unmarshal(out, &is) != nil || is.Status == "" {
		var many []issue
		if json.Unmarshal(out, &many) == nil && len(many) > 0 {
			is = many[0]
		}
	}
	if is.Status != "closed" {
		return "", fmt.Errorf("beads task %s is %q, want closed by docs", d.task, is.Status)
	}
	return fmt.Sprintf("task %s claimed by %s and closed (bd show %s)", d.task, orDash(is.Assignee), d.task), nil
}

func (d *demo) swarmJSON(ctx context.Context, v any, args ...string) error {
	out, err := d.swarm(ctx, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("swarm %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// printTimeline merges the transitions and the mail, in time order, with
// times relative to the first event.
func (d *demo) printTimeline(evs []event, mail map[int64]message) {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for _, e := range evs {
		from := "-"
		if e.From != nil {
			from = *e.From
		}
		cause := ""
		if e.Cause != "" && e.Cause != e.To && !isEventName(e.Cause) {
			cause = "  (" + e.Cause + ")"
		}
		lines = append(lines, line{e.At, fmt.Sprintf("%-8s s%d %s → %s%s", e.Agent, e.Seq, from, e.To, cause)})
	}
	for _, m := range mail {
		re, urgent := "", ""
		if m.ReplyTo != nil {
			re = fmt.Sprintf(" (reply to #%d)", *m.ReplyTo)
		}
		if m.Urgency == "urgent" {
			urgent = "[URGENT] "
		}
		lines = append(lines, line{m.CreatedAt, fmt.Sprintf("%-8s mail #%d → %s%s: %s%s", m.From, m.ID, m.To, re, urgent, m.Body)})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	fmt.Fprintln(d.out, "\nTimeline (swarm events + the mailbox):")
	if len(lines) == 0 {
		return
	}
	t0 := lines[0].at
	for _, l := range lines {
		fmt.Fprintf(d.out, "  %6.3fs  %s\n", l.at.Sub(t0).Seconds(), l.text)
	}
}

// isEventName reports causes that only repeat the lifecycle event's name
// ("WorktreeReady", "SessionStarted"): the transition says it already.
func isEventName(s string) bool {
	if s == "" || strings.ContainsAny(s, " :") {
		return false
	}
	return s[0] >= 'A' && s[0] <= 'Z'
}

// section returns the lines of a markdown section, header included, up to
// the next header of the same or a higher level.
func section(text, header string) string {
	i := strings.Index(text, "\n"+header+"\n")
	if i < 0 {
		return ""
	}
	rest := text[i+1:]
	level := strings.Count(strings.Fields(header)[0], "#")
	lines := strings.SplitAfter(rest, "\n")
	var b strings.Builder
	b.WriteString(lines[0])
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && strings.Trim(f[0], "#") == "" && len(f[0]) <= level {
			break
		}
		b.WriteString(l)
	}
	return b.String()
}

// leftovers reports processes still running in the demo repository (their
// working directory or command line mentions it). On systems without /proc
// it asks ps.
func leftovers(repo string) error {
	var found []string
	if runtime.GOOS == "linux" {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return fmt.Errorf("check for leftover processes: %w", err)
		}
		self := os.Getpid()
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if cwd == repo || strings.HasPrefix(cwd, repo+"/") || bytes.Contains(cmdline, []byte(repo)) {
				found = append(found, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})))
			}
		}
	} else {
		out, err := exec.Command("ps", "-axo", "pid=,command=").Output()
		if err != nil {
			return fmt.Errorf("check for leftover processes: ps: %w", err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, repo) {
				found = append(found, strings.TrimSpace(l))
			}
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("processes are still running in %s:\n  %s", repo, strings.Join(found, "\n  "))
	}
	return nil
}

func indent(s string) string {
	if s == "" {
		return s
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "" })
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
