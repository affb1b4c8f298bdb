package promptpipe

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/beads"
)

// toolsPath makes a directory with only the named tools linked into it, to
// use as PATH: what is not linked is missing.
func toolsPath(t *testing.T, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s is needed for this test: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeBDScript writes an executable bd that runs script.
func fakeBDScript(t *testing.T, script string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestSourcesFailingBD runs real bd executables that fail in the ways bd
// does, through the real client: each drops the task section, says why at
// the documented level, keeps the rest of the prompt, and returns at once.
func TestSourcesFailingBD(t *testing.T) {
	dir := gitRepo(t, "one")
	for _, tc := range []struct {
		name, script string
		log          string
		warn         bool
	}{
		{"garbage", "echo 'this is not json'\n", `unreadable bd output`, true},
		{"truncated json", `printf '[{"id": "x-1", "title": "cut'` + "\n", `unreadable bd output`, true},
		{"json error object", `echo '{"error": "database is locked"}'; exit 1` + "\n", `exit status 1: database is locked`, true},
		{"no database", "echo 'Error: no beads database found' >&2; exit 1\n", `no task section: no beads database here`, false},
		{"killed", "kill -9 $$\n", `source=bd`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, logs := logBuffer()
			b := &Builder{Tasks: &beads.Client{Dir: dir, Bin: fakeBDScript(t, tc.script)}, Config: defaultConfig,
				Now: func() time.Time { return now }, Logger: logger}
			start := time.Now()
			p, err := b.Build(context.Background(), contextFor(dir))
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("Build took %s", el)
			}
			if _, ok := p.Section(SecTasks); ok || p.TaskIDs != nil {
				t.Error("task section present")
			}
			if _, ok := p.Section(SecEnvironment); !ok {
				t.Error("environment missing")
			}
			if !strings.Contains(logs.String(), tc.log) || strings.Contains(logs.String(), "level=WARN") != tc.warn {
				t.Errorf("logs (want %q, warning %v):\n%s", tc.log, tc.warn, logs)
			}
		})
	}
}

// TestSourcesBDMissing: no bd on PATH is not a failure: no task section,
// a debug line, no warning.
func TestSourcesBDMissing(t *testing.T) {
	dir := gitRepo(t, "one")
	t.Setenv("PATH", toolsPath(t, "git", "uname"))
	logger, logs := logBuffer()
	b := &Builder{Tasks: &beads.Client{Dir: dir}, Config: defaultConfig, Now: func() time.Time { return now }, Logger: logger}
	p, err := b.Build(context.Background(), contextFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Section(SecTasks); ok {
		t.Error("task section present")
	}
	if !strings.Contains(logs.String(), "level=DEBUG msg=\"no task section: bd is not installed\"") || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("logs:\n%s", logs)
	}
}

// TestSourcesBDIgnoresSIGTERM: a bd that ignores SIGTERM and leaves a child
// holding its stdout is cut at bd_timeout through the shared call the
// supervisor uses, and its whole group is gone after the grace period.
func TestSourcesBDIgnoresSIGTERM(t *testing.T) {
	dir := gitRepo(t, "one")
	pids := filepath.Join(t.TempDir(), "pids")
	bin := fakeBDScript(t, "trap '' TERM\necho $$ > '"+pids+"'\nsleep 60 &\necho $! >> '"+pids+"'\nwait\n")
	logger, logs := logBuffer()
	cfg := defaultConfig
	cfg.BDTimeout = 200 * time.Millisecond
	shared := beads.NewShared(&beads.Client{Dir: dir, Bin: bin, Timeout: cfg.BDTimeout})
	b := &Builder{Tasks: shared, Config: cfg, Now: func() time.Time { return now }, Logger: logger}
	start := time.Now()
	p, err := b.Build(context.Background(), contextFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Build took %s with a 200ms bd_timeout", el)
	}
	if _, ok := p.Section(SecTasks); ok {
		t.Error("task section present")
	}
	if !strings.Contains(logs.String(), "bd ready took longer than bd_timeout (200ms)") {
		t.Errorf("logs:\n%s", logs)
	}
	// The bd and its child: killed with their group once the grace passes.
	var alive []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive = alive[:0]
		data, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(data)) {
			pid, _ := strconv.Atoi(f)
			if pid > 1 && processAlive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(data) > 0 && len(alive) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the process table
	}
	if len(alive) > 0 {
		t.Errorf("bd processes %v still alive 10 s after the timeout", alive)
		for _, pid := range alive {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// processAlive reports whether pid is a live process (not a zombie).
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.EPERM)
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || len(stat) < i+3 || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

// TestSourcesGitMissing: without git the git status field is dropped with
// a warning; the commits, read in-process, and the rest stay.
func TestSourcesGitMissing(t *testing.T) {
	dir := gitRepo(t, "one", "two")
	t.Setenv("PATH", toolsPath(t, "uname"))
	logger, logs := logBuffer()
	b := &Builder{Config: defaultConfig, Now: func() time.Time { return now }, Logger: logger}
	p, err := b.Build(context.Background(), contextFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	env, _ := p.Section(SecEnvironment)
	if strings.Contains(env.Body, "Git status") || !strings.Contains(env.Body, " two\n") || !strings.Contains(env.Body, "OS version") {
		t.Errorf("environment:\n%s", env.Body)
	}
	if !strings.Contains(logs.String(), `source=git_status error="exec: \"git\": executable file not found`) {
		t.Errorf("logs:\n%s", logs)
	}
}

// TestOSVersionOncePerProcess: the kernel's release is read once, not by
// a `uname -r` process per prompt build.
func TestOSVersionOncePerProcess(t *testing.T) {
	dir := gitRepo(t, "one")
	tools := toolsPath(t, "git")
	log := filepath.Join(t.TempDir(), "uname.log")
	real, err := exec.LookPath("uname")
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho run >> " + log + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(tools, "uname"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", tools)
	b := &Builder{Config: defaultConfig, Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)}
	for range 3 {
		p, err := b.Build(context.Background(), contextFor(dir))
		if err != nil {
			t.Fatal(err)
		}
		if env, _ := p.Section(SecEnvironment); !strings.Contains(env.Body, "OS version") {
			t.Fatalf("no OS version:\n%s", env.Body)
		}
	}
	runs, _ := os.ReadFile(log)
	if n := strings.Count(string(runs), "run"); n > 1 {
		t.Fatalf("uname ran %d times for 3 prompts, want at most once per process", n)
	}
}
