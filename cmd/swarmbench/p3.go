package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/promptpipe"
)

type p3Details struct {
	Messages      int     `json:"messages"`
	Tasks         int     `json:"tasks"`
	RepoFiles     int     `json:"repo_files"`
	PromptBytes   int     `json:"prompt_bytes"`
	FastBD        dist    `json:"fast_bd"`
	FastBDProcess dist    `json:"fast_bd_process_alone"`
	NoBD          dist    `json:"no_bd"`
	SlowBD        dist    `json:"slow_bd"`
	SlowDelayMs   float64 `json:"slow_bd_delay_ms"`
	SlowBDAlone   dist    `json:"slow_bd_process_alone"`
	// Each source alone, for where the time goes: the processes a build
	// starts (uname, git status; bd above) and the pure rendering.
	UnameProcess     dist    `json:"uname_process_alone"`
	GitStatusProcess dist    `json:"git_status_process_alone"`
	GoGitLog         dist    `json:"go_git_log_alone"`
	RenderOnly       dist    `json:"render_only"`
	Concurrent       int     `json:"concurrent_builders"`
	ConcurrentRun    int     `json:"concurrent_bd_runs"`
	ConcurrentMs     float64 `json:"concurrent_wall_ms"`
}

const bdDelay = 300 * time.Millisecond

// p3 builds prompts the way the supervisor does (promptpipe.Builder over a
// beads.Shared client) for an agent with 100 pending messages and 20 ready
// tasks, in a repository of 300 files. bd is a fake on disk that counts its
// runs: one that answers at once and one that sleeps 300 ms first.
func (b *bench) p3(ctx context.Context) error {
	fastN, slowN := 200, 20
	if b.quick {
		fastN, slowN = 40, 4
	}
	const nFiles = 300
	repo, err := b.newRepo("p3", nFiles, 2048)
	if err != nil {
		return err
	}
	tasks := readyJSON(20)
	dir := filepath.Join(b.tmp, "p3-bd")
	fast, fastCount, err := fakeBD(dir, "fast", tasks, 0)
	if err != nil {
		return err
	}
	slow, slowCount, err := fakeBD(dir, "slow", tasks, bdDelay)
	if err != nil {
		return err
	}
	cfg, err := config.Parse([]byte("[[agent]]\nname = \"backend\"\n"), "swarm.toml", repo)
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	builder := func(bin string) *promptpipe.Builder {
		bb := &promptpipe.Builder{Config: cfg.Prompt, Logger: quiet, Now: time.Now}
		if bin != "" {
			bb.Tasks = beads.NewShared(&beads.Client{Dir: repo, Bin: bin, Timeout: cfg.Prompt.BDTimeout})
		}
		return bb
	}
	pc := promptContext(repo, "backend", 100)
	det := p3Details{Messages: 100, Tasks: 20, RepoFiles: nFiles, SlowDelayMs: ms(bdDelay), Concurrent: 10}

	measure := func(bb *promptpipe.Builder, n, wantTasks int) (dist, error) {
		var ds []time.Duration
		for i := range n + 3 {
			t0 := time.Now()
			p, err := bb.Build(ctx, pc)
			d := time.Since(t0)
			if err != nil {
				return dist{}, err
			}
			if got := len(p.TaskIDs); got != wantTasks {
				return dist{}, fmt.Errorf("the prompt lists %d tasks, want %d", got, wantTasks)
			}
			if got := strings.Count(sectionBody(p, promptpipe.SecMessages), " ago):\n"); got != 100 {
				return dist{}, fmt.Errorf("the prompt shows %d messages, want 100", got)
			}
			det.PromptBytes = len(p.Text)
			if i >= 3 { // the first builds warm the page cache and go-git
				ds = append(ds, d)
			}
		}
		return summarize(ds), nil
	}
	// The fake bd alone, for scale: one process start and a cat.
	alone := func(bin string, n int) (dist, error) {
		c := &beads.Client{Dir: repo, Bin: bin}
		var ds []time.Duration
		for range n {
			t0 := time.Now()
			if _, err := c.Ready(ctx); err != nil {
				return dist{}, err
			}
			ds = append(ds, time.Since(t0))
		}
		return summarize(ds), nil
	}
	if det.FastBD, err = measure(builder(fast), fastN, 20); err != nil {
		return fmt.Errorf("fast bd: %w", err)
	}
	if det.NoBD, err = measure(builder(""), fastN/2, 0); err != nil {
		return fmt.Errorf("no bd: %w", err)
	}
	if det.FastBDProcess, err = alone(fast, fastN/4); err != nil {
		return err
	}
	if det.UnameProcess, err = timeIt(fastN/4, func() error { return exec.Command("uname", "-r").Run() }); err != nil {
		return err
	}
	if det.GitStatusProcess, err = timeIt(fastN/4, func() error {
		cmd := exec.Command("git", "status", "--short")
		cmd.Dir, cmd.Env = repo, append(b.env(), "GIT_OPTIONAL_LOCKS=0")
		return cmd.Run()
	}); err != nil {
		return err
	}
	if det.GoGitLog, err = timeIt(fastN/4, func() error {
		r, err := git.PlainOpenWithOptions(repo, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
		if err != nil {
			return err
		}
		head, err := r.Head()
		if err != nil {
			return err
		}
		it, err := r.Log(&git.LogOptions{From: head.Hash()})
		if err != nil {
			return err
		}
		defer it.Close()
		for range 5 {
			if _, err := it.Next(); err != nil {
				break
			}
		}
		return nil
	}); err != nil {
		return err
	}
	src := builder(fast).Gather(ctx, pc)
	if det.RenderOnly, err = timeIt(fastN/4, func() error {
		promptpipe.Render(pc, src, cfg.Prompt, time.Now())
		return nil
	}); err != nil {
		return err
	}
	if det.SlowBD, err = measure(builder(slow), slowN, 20); err != nil {
		return fmt.Errorf("slow bd: %w", err)
	}
	if det.SlowBDAlone, err = alone(slow, 3); err != nil {
		return err
	}

	// Ten agents build at the same moment through one Shared: one bd run.
	shared := builder(slow)
	before, err := countLines(slowCount)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	gate := make(chan struct{})
	errs := make([]error, det.Concurrent)
	for i := range det.Concurrent {
		apc := promptContext(repo, fmt.Sprintf("agent-%d", i), 100)
		wg.Go(func() {
			<-gate
			p, err := shared.Build(ctx, apc)
			if err == nil && len(p.TaskIDs) != 20 {
				err = fmt.Errorf("agent-%d's prompt lists %d tasks, want 20", i, len(p.TaskIDs))
			}
			errs[i] = err
		})
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	det.ConcurrentMs = ms(time.Since(t0))
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("concurrent build: %w", err)
		}
	}
	after, err := countLines(slowCount)
	if err != nil {
		return err
	}
	det.ConcurrentRun = after - before
	_ = fastCount
	b.details["P3"] = det

	f, s := det.FastBD, det.SlowBD
	limit := 1.1 * ms(bdDelay)
	b.add(row{ID: "P3", Figure: fmt.Sprintf("prompt build, 100 messages + 20 tasks, fast fake bd: p50 / p99 (n=%d)", f.N), Value: f.P50, Unit: "ms",
		Text: fmt.Sprintf("%.1f / %.1f ms", f.P50, f.P99)})
	b.check(row{ID: "P3", Figure: "  fast bd p50", Value: f.P50, Unit: "ms", Text: fmt.Sprintf("%.1f ms", f.P50)}, "< 10 ms", f.P50 < 10)
	b.add(row{ID: "P3", Figure: "  without bd: p50 / p99", Value: det.NoBD.P50, Unit: "ms", Text: fmt.Sprintf("%.1f / %.1f ms", det.NoBD.P50, det.NoBD.P99)})
	b.add(row{ID: "P3", Figure: "  alone, p50: uname · git status · fake bd · go-git log · render", Value: det.RenderOnly.P50, Unit: "ms",
		Text: fmt.Sprintf("%.1f · %.1f · %.1f · %.1f · %.1f ms", det.UnameProcess.P50, det.GitStatusProcess.P50, det.FastBDProcess.P50, det.GoGitLog.P50, det.RenderOnly.P50)})
	b.add(row{ID: "P3", Figure: fmt.Sprintf("prompt build, bd taking 300 ms: p50 / p99 (n=%d)", s.N), Value: s.P50, Unit: "ms",
		Text: fmt.Sprintf("%.0f / %.0f ms", s.P50, s.P99)})
	b.check(row{ID: "P3", Figure: "  slow bd p99 / bd delay", Value: round(s.P99/ms(bdDelay), 2), Unit: "ratio",
		Text: fmt.Sprintf("%.2f ×", s.P99/ms(bdDelay))}, fmt.Sprintf("≤ 1.1 × (%.0f ms)", limit), s.P50 <= limit && s.P99 <= limit)
	b.check(row{ID: "P3", Figure: fmt.Sprintf("10 agents building at once: bd runs (wall %.0f ms)", det.ConcurrentMs), Value: float64(det.ConcurrentRun), Unit: "runs",
		Text: fmt.Sprint(det.ConcurrentRun)}, "= 1", det.ConcurrentRun == 1)
	return nil
}

// timeIt times n calls of fn.
func timeIt(n int, fn func() error) (dist, error) {
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		if err := fn(); err != nil {
			return dist{}, err
		}
		ds = append(ds, time.Since(t0))
	}
	return summarize(ds), nil
}

func sectionBody(p promptpipe.Prompt, n int) string {
	s, _ := p.Section(n)
	return s.Body
}

// promptContext is an agent's session with n pending messages from its
// teammates, a few urgent, each a few lines long.
func promptContext(repo, agent string, n int) promptpipe.PromptContext {
	team := []string{"lead", "frontend", "reviewer", "qa", "docs"}
	now := time.Now()
	var mail []message.Message
	for i := range n {
		urg := message.Normal
		if i%20 == 0 {
			urg = message.Urgent
		}
		seq := int64(7)
		mail = append(mail, message.Message{
			ID: int64(i + 1), ThreadID: int64(i + 1), From: team[i%len(team)], To: agent, Kind: message.KindMessage, Urgency: urg,
			Body:      fmt.Sprintf("Message %d: the /users endpoint returns 500 when the email has a plus sign.\nSteps: POST /users with a+b@example.com. Expected 201, got 500.\nPlease fix it and tell me when the test passes.", i+1),
			CreatedAt: now.Add(-time.Duration(n-i) * time.Minute), State: message.Delivered, SessionSeq: &seq,
		})
	}
	return promptpipe.PromptContext{
		Agent: agent, Role: "You own the HTTP API in ./api: keep its tests green and tell frontend when an endpoint changes.",
		Mode: mode.Code, SessionID: agent + "-7", SessionSeq: 7, DBPath: filepath.Join(repo, ".swarm", "swarm.db"),
		Worktree: repo, Root: repo, Teammates: team, Beads: true, Messages: mail,
	}
}

// readyJSON is `bd ready --json` (bd 1.x: a bare array) with n tasks.
func readyJSON(n int) []byte {
	type issue struct {
		ID          string   `json:"id"`
		Title       string   `json:"title"`
		Description string   `json:"description"`
		Status      string   `json:"status"`
		Priority    int      `json:"priority"`
		IssueType   string   `json:"issue_type"`
		Owner       string   `json:"owner"`
		CreatedAt   string   `json:"created_at"`
		UpdatedAt   string   `json:"updated_at"`
		Labels      []string `json:"labels"`
		Deps        int      `json:"dependency_count"`
		Dependents  int      `json:"dependent_count"`
		Comments    int      `json:"comment_count"`
	}
	var out []issue
	for i := range n {
		out = append(out, issue{
			ID: fmt.Sprintf("bench-%03d", i+1), Title: fmt.Sprintf("Task %d: handle plus signs in emails", i+1),
			Description: "Reproduce, fix, add a regression test.", Status: "open", Priority: i % 4, IssueType: "task",
			Owner: "bench@example.com", CreatedAt: "2026-11-21T15:41:36Z", UpdatedAt: "2026-11-21T15:41:36Z", Labels: []string{"backend"},
		})
	}
	data, _ := json.MarshalIndent(out, "", "  ")
	return data
}

// fakeBD writes an executable that appends a line to its counter, waits
// delay, and prints data; it returns the executable and the counter file.
func fakeBD(dir, name string, data []byte, delay time.Duration) (bin, counter string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	jsonPath := filepath.Join(dir, name+".json")
	counter = filepath.Join(dir, name+".count")
	bin = filepath.Join(dir, name+"-bd")
	if err := os.WriteFile(jsonPath, data, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(counter, nil, 0o644); err != nil {
		return "", "", err
	}
	var sh bytes.Buffer
	fmt.Fprintf(&sh, "#!/bin/sh\necho \"$*\" >> '%s'\n", counter)
	if delay > 0 {
		fmt.Fprintf(&sh, "sleep %.3f\n", delay.Seconds())
	}
	fmt.Fprintf(&sh, "exec cat '%s'\n", jsonPath)
	if err := os.WriteFile(bin, sh.Bytes(), 0o755); err != nil {
		return "", "", err
	}
	return bin, counter, nil
}

func countLines(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return bytes.Count(data, []byte("\n")), nil
}
