package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
