package promptpipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// gitRepo makes a repository with the given commit subjects, oldest first,
// one minute apart so the order is certain.
func gitRepo(t testing.TB, subjects ...string) string {
	t.Helper()
	dir := t.TempDir()
	runGit(t, dir, "init", "-q", "-b", "main")
	for i, s := range subjects {
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		commitAll(t, dir, i, s)
	}
	return dir
}

func commitAll(t testing.TB, dir string, minute int, subject string) {
	t.Helper()
	date := fmt.Sprintf("GIT_COMMITTER_DATE=2026-11-21T10:%02d:00Z", minute)
	runGitEnv(t, dir, []string{date}, "add", "-A")
	runGitEnv(t, dir, []string{date}, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", subject+"\n\nbody line")
}

func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return runGitEnv(t, dir, nil, args...)
}

func runGitEnv(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// fakeTasks is a TaskSource that returns fixed answers, or blocks until
// its context ends.
type fakeTasks struct {
	issues []beads.Issue
	err    error
	block  bool
	calls  int
	mu     sync.Mutex
}

func (f *fakeTasks) Ready(ctx context.Context) ([]beads.Issue, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return f.issues, f.err
}

// logBuffer captures a Builder's logs.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

func contextFor(dir string) PromptContext {
	pc := freshContext()
	pc.Worktree, pc.Root = dir, dir
	return pc
}

func TestBuildGathersEverySource(t *testing.T) {
	dir := gitRepo(t, "one", "two", "three", "four", "five", "six")
	if err := os.WriteFile(filepath.Join(dir, "new.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("Run make test.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logger, logs := logBuffer()
	tasks := &fakeTasks{issues: readyTasks(t)}
	b := &Builder{Tasks: tasks, Config: defaultConfig, Now: func() time.Time { return now }, Logger: logger,
		Getenv: func(k string) string { return map[string]string{"SHELL": "/bin/zsh"}[k] }}
	p, err := b.Build(context.Background(), contextFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	checkStructure(t, p)
	envSec, _ := p.Section(SecEnvironment)
	head := runGit(t, dir, "rev-parse", "--short=7", "HEAD")
	for _, want := range []string{
		"Shell: /bin/zsh\n", "Working directory: " + dir + "\n", "Date: Saturday 2026-11-21 15:45 UTC\n",
		", OS version ", "Git status (`git status --short`):\n  ?? AGENTS.md\n  ?? new.go\n",
		"Recent commits:\n  " + head + " six\n", " three\n", " two",
	} {
		if !strings.Contains(envSec.Body, want) {
			t.Errorf("environment lacks %q:\n%s", want, envSec.Body)
		}
	}
	if strings.Contains(envSec.Body, " one\n") || strings.Count(envSec.Body, "\n  ") != 2+5 {
		t.Errorf("want exactly the 5 newest commits:\n%s", envSec.Body)
	}
	if s, ok := p.Section(SecProjectInstructions); !ok || !strings.HasSuffix(s.Body, "\n\nRun make test.") {
		t.Errorf("project instructions: %q", s.Body)
	}
	if !slices.Equal(p.TaskIDs, []string{"demo-6fx", "demo-9z2.1"}) {
		t.Errorf("TaskIDs = %v", p.TaskIDs)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("warnings with every source healthy:\n%s", logs)
	}
}

// Recent commits come from go-git, which must open a linked worktree too.
func TestRecentCommitsInLinkedWorktree(t *testing.T) {
	dir := gitRepo(t, "one", "two")
	wt := filepath.Join(t.TempDir(), "backend")
	runGit(t, dir, "worktree", "add", "-q", "-b", "swarm/backend", wt)
	if err := os.WriteFile(filepath.Join(wt, "g.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, wt, 30, "on the branch")
	got, err := readCommits(wt, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !strings.HasSuffix(got[0], " on the branch") || !strings.HasSuffix(got[2], " one") {
		t.Fatalf("commits = %q", got)
	}
	// From a subdirectory too.
	sub := filepath.Join(wt, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if again, err := readCommits(sub, 5); err != nil || !slices.Equal(again, got) {
		t.Fatalf("from a subdirectory: %q, %v", again, err)
	}
}

func TestBuildInFreshRepo(t *testing.T) {
	dir := t.TempDir()
	runGit(t, dir, "init", "-q", "-b", "main")
	b := &Builder{Config: defaultConfig, Now: func() time.Time { return now }}
	p, err := b.Build(context.Background(), contextFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.Section(SecEnvironment)
	if !strings.HasSuffix(s.Body, "Git status: clean\nRecent commits: none yet") {
		t.Fatalf("environment:\n%s", s.Body)
	}
}

// Outside a repository the git fields are dropped and logged; the prompt
// is still built.
func TestBuildOutsideRepoDropsGitFields(t *testing.T) {
	logger, logs := logBuffer()
	b := &Builder{Config: defaultConfig, Now: func() time.Time { return now }, Logger: logger}
	p, err := b.Build(context.Background(), contextFor(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.Section(SecEnvironment)
	if strings.Contains(s.Body, "Git status") || strings.Contains(s.Body, "commits") {
		t.Fatalf("environment:\n%s", s.Body)
	}
	for _, source := range []string{"git_status", "git_log"} {
		if !strings.Contains(logs.String(), "level=WARN msg=\"prompt source dropped\" agent=backend source="+source+" error=") {
			t.Errorf("no warning for %s:\n%s", source, logs)
		}
	}
}

// A bd that never answers drops the task section when bd_timeout passes;
// Build returns and the rest of the prompt is there. The fake bd is a real
// process that would sleep 60 s; its whole group is killed.
func TestBuildDropsHangingBD(t *testing.T) {
	dir := gitRepo(t, "one")
	bin := filepath.Join(t.TempDir(), "bd")
	marker := filepath.Join(t.TempDir(), "finished")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nsleep 60 & wait\ntouch '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	logger, logs := logBuffer()
	cfg := defaultConfig
	cfg.BDTimeout = 100 * time.Millisecond
	b := &Builder{Tasks: &beads.Client{Dir: dir, Bin: bin, Actor: "backend", Timeout: time.Minute}, Config: cfg,
		Now: func() time.Time { return now }, Logger: logger}
	start := time.Now()
	p, err := b.Build(context.Background(), contextFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Build took %s with a 100ms bd_timeout", el)
	}
	if _, ok := p.Section(SecTasks); ok {
		t.Fatal("task section present")
	}
	if _, ok := p.Section(SecEnvironment); !ok {
		t.Fatal("environment missing")
	}
	if !strings.Contains(logs.String(), `source=bd error="bd ready --json: bd ready took longer than bd_timeout (100ms)`) {
		t.Fatalf("logs:\n%s", logs)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the fake bd ran to completion")
	}
}

func TestBuildTaskSourceOutcomes(t *testing.T) {
	dir := gitRepo(t, "one")
	tests := []struct {
		name  string
		tasks *fakeTasks
		cfgBD time.Duration
		log   string // expected in the logs
		warn  bool
	}{
		{"not installed", &fakeTasks{err: beads.ErrNotInstalled}, 0, "level=DEBUG msg=\"no task section: bd is not installed\"", false},
		{"no database", &fakeTasks{err: &beads.Error{Command: "bd ready --json", ExitCode: 1, Err: beads.ErrNoDatabase}}, 0, "level=INFO msg=\"no task section: no beads database here", false},
		{"failing", &fakeTasks{err: &beads.Error{Command: "bd ready --json", ExitCode: 2, Stderr: "boom"}}, 0, `source=bd error="bd ready --json: exit status 2: boom"`, true},
		{"blocks until cancelled", &fakeTasks{block: true}, 20 * time.Millisecond, "bd ready took longer than bd_timeout (20ms)", true},
		{"no tasks", &fakeTasks{issues: []beads.Issue{}}, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, logs := logBuffer()
			cfg := defaultConfig
			if tt.cfgBD > 0 {
				cfg.BDTimeout = tt.cfgBD
			}
			b := &Builder{Tasks: tt.tasks, Config: cfg, Now: func() time.Time { return now }, Logger: logger}
			p, err := b.Build(context.Background(), contextFor(dir))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := p.Section(SecTasks); ok || p.TaskIDs != nil {
				t.Fatal("task section present")
			}
			if tt.tasks.calls != 1 {
				t.Fatalf("bd asked %d times", tt.tasks.calls)
			}
			if !strings.Contains(logs.String(), tt.log) || strings.Contains(logs.String(), "level=WARN") != tt.warn {
				t.Fatalf("logs (want %q, warn=%v):\n%s", tt.log, tt.warn, logs)
			}
		})
	}
}

func TestBuildFailsOnlyForItsOwnReasons(t *testing.T) {
	dir := gitRepo(t, "one")
	b := &Builder{Now: func() time.Time { return now }}
	bad := []func(*PromptContext){
		func(pc *PromptContext) { pc.Agent = "" },
		func(pc *PromptContext) { pc.Mode = "sing" },
		func(pc *PromptContext) { pc.Worktree = "" },
		func(pc *PromptContext) { pc.SessionSeq = 0 },
	}
	for i, edit := range bad {
		pc := contextFor(dir)
		edit(&pc)
		if _, err := b.Build(context.Background(), pc); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("shutting down")
	cancel(stop)
	logger, logs := logBuffer()
	b.Logger = logger
	if _, err := b.Build(ctx, contextFor(dir)); !errors.Is(err, stop) {
		t.Fatalf("cancelled build err = %v", err)
	}
	// Sources cut short by the caller are not reported as failing.
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("warnings for a cancelled build:\n%s", logs)
	}
}

func TestWithinAbandonsSlowWork(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	_, err := within(context.Background(), 10*time.Millisecond, "git log", func() (int, error) {
		<-release
		return 1, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "git log timed out after 10ms") {
		t.Fatalf("err = %v", err)
	}
	if v, err := within(context.Background(), time.Minute, "x", func() (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Fatalf("within = %d, %v", v, err)
	}
}

func pendingMail(n int) []message.Message {
	ms := make([]message.Message, n)
	for i := range ms {
		ms[i] = msg(int64(i+1), "frontend", i%10 == 0, time.Duration(n-i)*time.Minute, fmt.Sprintf("message %d: the /users endpoint returns 500 after the migration; please check db/migrations/%04d.sql", i, i))
	}
	return ms
}

// BenchmarkBuild is one whole Build with 100 pending messages and a fast
// in-process task source: uname, git status and go-git in parallel, then
// rendering.
func BenchmarkBuild(b *testing.B) {
	dir := gitRepo(b, "one", "two", "three", "four", "five", "six")
	pc := contextFor(dir)
	pc.Messages = pendingMail(100)
	bld := &Builder{Tasks: &fakeTasks{issues: readyTasks(b)}, Config: defaultConfig, Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	for b.Loop() {
		p, err := bld.Build(ctx, pc)
		if err != nil || len(p.TaskIDs) != 2 {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildFakeBD adds a real (fake) bd process that prints the ready
// fixture at once, through beads.Client.
func BenchmarkBuildFakeBD(b *testing.B) {
	dir := gitRepo(b, "one", "two", "three", "four", "five", "six")
	fixture, err := filepath.Abs(filepath.Join("testdata", "ready.json"))
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "bd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec cat '"+fixture+"'\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	pc := contextFor(dir)
	pc.Messages = pendingMail(100)
	bld := &Builder{Tasks: &beads.Client{Dir: dir, Bin: bin}, Config: defaultConfig, Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	for b.Loop() {
		p, err := bld.Build(ctx, pc)
		if err != nil || len(p.TaskIDs) != 2 {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender is rendering alone, 100 messages and the ready tasks.
func BenchmarkRender(b *testing.B) {
	pc := freshContext()
	pc.Messages = pendingMail(100)
	src := Sources{Env: env(), Tasks: readyTasks(b)}
	for b.Loop() {
		Render(pc, src, defaultConfig, now)
	}
}

func TestModesAreAllCovered(t *testing.T) {
	// The golden and exact-tools tests iterate these; a new mode must be
	// added there too (and its strategies to modeSpecs).
	if got := mode.Names(); !slices.Equal(got, []string{"code", "coordinate", "delegate", "execute", "review"}) {
		t.Fatalf("modes = %v: extend the promptpipe tests", got)
	}
}

// Both beads entry points serve as task sources.
var (
	_ TaskSource = (*beads.Client)(nil)
	_ TaskSource = (*beads.Shared)(nil)
)

// ownTimeoutTasks is a task source whose call gives up by its own timer,
// set to the same bd_timeout, as the shared bd client does: it returns
// its own error once the builder's deadline has passed.
type ownTimeoutTasks struct{}

func (ownTimeoutTasks) Ready(ctx context.Context) ([]beads.Issue, error) {
	<-ctx.Done()
	return nil, errors.New("bd ready --json: bd timed out after 100ms: context deadline exceeded")
}

// TestBuildSaysBDTookTooLongWhicheverTimerFires: the message names
// bd_timeout whether the builder's timer or the client's noticed first.
func TestBuildSaysBDTookTooLongWhicheverTimerFires(t *testing.T) {
	dir := gitRepo(t, "one")
	logger, logs := logBuffer()
	cfg := defaultConfig
	cfg.BDTimeout = 100 * time.Millisecond
	b := &Builder{Tasks: ownTimeoutTasks{}, Config: cfg, Now: func() time.Time { return now }, Logger: logger}
	if _, err := b.Build(context.Background(), contextFor(dir)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `source=bd error="bd ready took longer than bd_timeout (100ms)`) {
		t.Fatalf("logs:\n%s", logs)
	}
}
