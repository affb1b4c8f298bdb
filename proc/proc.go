// Package proc starts child processes the way every swarm child must run:
// in its own process group, with the whole group signalled on cancel
// (SIGTERM, then SIGKILL after a grace period), and with exec.Cmd.WaitDelay
// set so a grandchild holding a pipe open cannot keep Wait from returning.
//
// Measured: exec.CommandContext on a shell script that runs `sleep 60`
// returned only after 60 s, because the grandchild held stdout open. With
// the group kill and WaitDelay it returns at once.
//
// Run also removes credentials from the child's environment (Scrub): they
// are recognised by whole words of their names or by URLs carrying a
// password, and Spec.Pass (the [env] pass allow list) lets names through.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/swarmhq/swarm/internal/text"
)

// DefaultGrace is how long a cancelled group gets between SIGTERM and SIGKILL.
const DefaultGrace = 2 * time.Second

// Command is exec.CommandContext with Configure applied.
func Command(ctx context.Context, grace time.Duration, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	Configure(cmd, grace)
	return cmd
}

// Configure puts cmd in its own process group and makes cancellation
// signal the whole group. cmd must have been made with exec.CommandContext
// for cancellation to apply.
func Configure(cmd *exec.Cmd, grace time.Duration) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		time.AfterFunc(grace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		return nil
	}
	// After the grace, Wait stops waiting for pipes that a surviving
	// grandchild may hold, and the leader is killed.
	cmd.WaitDelay = grace + 100*time.Millisecond
}

// KillGroup sends SIGKILL to a process group. A group that no longer exists
// is not an error.
func KillGroup(pgid int) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to kill process group %d", pgid)
	}
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// KillSessionGroup kills process group pgid only if it still belongs to
// the session: one of its processes has marker (SWARM_SESSION_ID=<id>) in
// its environment. A recorded pgid may have been reused by an unrelated
// group since the session ended, and must not be killed then. Where
// environments cannot be read (no /proc), a live group is killed as before.
// It reports whether it sent the signal.
func KillSessionGroup(pgid int, marker string) (bool, error) {
	if !GroupAlive(pgid) {
		return false, nil
	}
	if known, has := groupHas(pgid, marker); known && !has {
		return false, nil
	}
	return true, KillGroup(pgid)
}

// Alive reports whether a process with this pid exists on this host.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// GroupAlive reports whether any process of the group still exists.
func GroupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Result is the outcome of Run.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int // -1 when the process did not exit normally
}

// ExitError is a child that ran but failed.
type ExitError struct {
	Name     string
	ExitCode int
	Stderr   string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		return fmt.Sprintf("%s exited with status %d", e.Name, e.ExitCode)
	}
	return fmt.Sprintf("%s exited with status %d: %s", e.Name, e.ExitCode, text.FirstLine(msg))
}

// Spec describes one run.
type Spec struct {
	Dir     string
	Env     []string // nil: inherit; credentials are removed either way
	Pass    []string // names let through Scrub anyway ([env] pass)
	Stdin   []byte
	Timeout time.Duration // 0: none beyond ctx
	Grace   time.Duration
	// UserEnv keeps the credentials: for the commands that act as the
	// user towards the outside (git push and fetch authenticate with
	// them), never for one an agent's files can steer into running code.
	UserEnv bool
}

// Run runs name with args and captures its output. The whole process group
// is killed when ctx is done or the timeout passes. A non-zero exit is an
// *ExitError; a timeout returns context.DeadlineExceeded (or ctx's cause).
func Run(ctx context.Context, spec Spec, name string, args ...string) (Result, error) {
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, spec.Timeout, fmt.Errorf("%s timed out after %s: %w", name, spec.Timeout, context.DeadlineExceeded))
		defer cancel()
	}
	cmd := Command(ctx, spec.Grace, name, args...)
	cmd.Dir = spec.Dir
	// Nothing swarm runs itself (git, bd, uname) needs an API key, and an
	// agent can influence what git runs (hooks, fsmonitor).
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = env
	if !spec.UserEnv {
		cmd.Env = Scrub(env, spec.Pass)
	}
	if spec.Stdin != nil {
		cmd.Stdin = bytes.NewReader(spec.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		// Reap stragglers the leader left in its group.
		_ = KillGroup(cmd.Process.Pid)
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return res, &ExitError{Name: name, ExitCode: res.ExitCode, Stderr: stderr.String()}
	}
	if err != nil {
		return res, err
	}
	return res, nil
}

// AwaitGroupsGone waits until none of the process groups has a process
// left, checking every poll, for at most max; it reports whether they
// went. SIGKILL is delivered asynchronously: a git killed in the middle of
// a commit may still write its index.lock after the signal was sent, so a
// caller that cleans up after it waits first. A zombie nobody reaps keeps
// its group "alive" to kill(2), so zombies count as gone where /proc
// tells them apart; elsewhere the bound keeps the wait short.
func AwaitGroupsGone(groups []int, poll, max time.Duration, sleep func(time.Duration)) bool {
	for waited := time.Duration(0); ; waited += poll {
		alive := false
		for _, pg := range groups {
			if known, running := groupRunning(pg); known {
				alive = alive || running
			} else {
				alive = alive || GroupAlive(pg)
			}
		}
		if !alive {
			return true
		}
		if waited >= max {
			return false
		}
		sleep(poll)
	}
}
