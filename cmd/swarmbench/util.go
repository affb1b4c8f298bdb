package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// env is the environment of every child the bench starts: the caller's,
// without anything that would point swarm or git elsewhere, with a fixed
// git identity and no user or system git configuration.
func (b *bench) env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "SWARM_"), strings.HasPrefix(k, "GIT_"),
			k == "GEMINI_API_KEY", k == "GOOGLE_API_KEY", k == "GOOGLE_GEMINI_BASE_URL", k == "HOME":
			continue
		}
		out = append(out, kv)
	}
	if b.dbURL != "" {
		out = append(out, "SWARM_DB_URL="+b.dbURL)
	}
	out = append(out,
		"HOME="+b.home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=Bench", "GIT_COMMITTER_EMAIL=bench@example.com",
	)
	return append(out, extra...)
}

// git runs git in dir and returns its trimmed output.
func (b *bench) git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = b.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// swarm runs the swarm binary in dir and returns its stdout.
func (b *bench) swarm(dir string, args ...string) (string, error) {
	cmd := exec.Command(b.bin, args...)
	cmd.Dir = dir
	cmd.Env = b.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("swarm %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// newRepo makes a git repository with files spread over dirs and one
// commit on main. files == 0 makes an empty first commit.
func (b *bench) newRepo(name string, files, size int) (string, error) {
	dir := filepath.Join(b.tmp, b.prefix+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := b.git(dir, "init", "-q", "-b", "main"); err != nil {
		return "", err
	}
	line := strings.Repeat("x", 63) + "\n"
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%50), fmt.Sprintf("file%04d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		body := fmt.Sprintf("// file %d\n", i) + strings.Repeat(line, max(1, size/len(line)))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	if files > 0 {
		if _, err := b.git(dir, "add", "-A"); err != nil {
			return "", err
		}
	}
	if _, err := b.git(dir, "commit", "-q", "--allow-empty", "-m", "first commit"); err != nil {
		return "", err
	}
	return dir, nil
}

// proc is a child process the bench started; stop reaps it.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	out  *os.File
}

// start starts the swarm binary in dir with its output in logName.
func (b *bench) start(dir, logName string, args ...string) (*proc, error) {
	out, err := os.Create(filepath.Join(b.tmp, b.prefix+logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.bin, args...)
	cmd.Dir = dir
	cmd.Env = b.env()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), out: out}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	b.procs = append(b.procs, p)
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGINT and waits up to d for a graceful exit, then kills.
// It returns how long the graceful stop took.
func (p *proc) stop(d time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if p.exited() {
		return 0, p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		return time.Since(t0), p.err
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		return time.Since(t0), fmt.Errorf("%s did not stop within %s after SIGINT; killed", p.cmd.Path, d)
	}
}

// waitFor polls cond every interval until it holds, fails, or timeout
// passes.
func waitFor(ctx context.Context, timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// vmHWM reads a process's peak resident set size in bytes.
func vmHWM(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// dist summarizes samples.
type dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	Min float64 `json:"min_ms"`
}

func summarize(samples []time.Duration) dist {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return dist{}
	}
	return dist{N: len(s), P50: ms(percentile(s, 50)), P99: ms(percentile(s, 99)), Max: ms(s[len(s)-1]), Min: ms(s[0])}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
