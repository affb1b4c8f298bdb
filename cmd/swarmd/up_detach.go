package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/swarmhq/swarm/repo"
)

// detachWait bounds how long `swarm up -d` waits for the supervisor it
// started to answer: recovery and the control socket come before the
// worktrees, so this is generous.
const detachWait = 60 * time.Second

// upOut is where a detached supervisor's output goes.
func upOut(l repo.Layout) string { return filepath.Join(l.Logs(), "up.out") }

// runUpDetached is `swarm up -d`: it starts `swarm up --no-tui` again as
// a child in a session of its own (setsid: no terminal, so closing this
// one does not stop it), with its output appended to .swarm/logs/up.out,
// waits until the child's control socket answers a ping, prints its pid
// and returns. A child that exits first is reported with the end of its
// output. 'swarm down' stops it as it stops any supervisor.
func runUpDetached(ctx context.Context, opts *UpOptions, l repo.Layout) error {
	app := opts.App
	if p, ok := ping(ctx, l); ok {
		return fmt.Errorf("swarm is already running (pid %d); 'swarm down' stops it, 'swarm watch' shows it", p.Pid)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("swarm up -d: find this program to start it again: %w", err)
	}
	if err := os.MkdirAll(l.Logs(), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", l.Logs(), err)
	}
	out, err := os.OpenFile(upOut(l), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", upOut(l), err)
	}
	defer out.Close()
	start, _ := out.Seek(0, 2) // this run's output starts here
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()

	args := []string{"up", "--no-tui", "--dir", l.Root}
	if opts.Engine != "" {
		args = append(args, "--engine", opts.Engine)
	}
	if len(opts.Agents) > 0 {
		args = append(args, "--agents", strings.Join(opts.Agents, ","))
	}
	if opts.Yes {
		args = append(args, "--yes")
	}
	if opts.Web {
		args = append(args, "--web")
	}
	for range app.Verbose {
		args = append(args, "-v")
	}
	cmd := exec.Command(self, args...)
	cmd.Args[0] = os.Args[0] // the name it was run by (testscript dispatches on it)
	cmd.Dir = l.Root
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("swarm up -d: start the supervisor: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.NewTimer(detachWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if p, ok := ping(ctx, l); ok && p.Pid == pid {
			break
		}
		select {
		case err := <-exited:
			why := "it exited"
			if err != nil {
				why = err.Error()
			}
			return &codeError{code: exitError, err: fmt.Errorf("the supervisor stopped before it answered (%s); its output, from %s:\n%s",
				why, rel(l.Root, upOut(l)), tailOf(upOut(l), start, 10))}
		case <-deadline.C:
			return fmt.Errorf("the supervisor (pid %d) did not answer on its control socket within %s; see %s, and stop it with 'swarm down'", pid, detachWait, rel(l.Root, upOut(l)))
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting for the supervisor (pid %d); it may still start: 'swarm status' tells, 'swarm down' stops it", pid)
		case <-tick.C:
		}
	}
	if app.JSON {
		return app.printJSON(map[string]any{"pid": pid, "log": upOut(l)})
	}
	fmt.Fprintf(app.Stdout, "swarm is running in the background (pid %s); its output goes to %s\n", strconv.Itoa(pid), rel(l.Root, upOut(l)))
	fmt.Fprintln(app.Stdout, "'swarm status' or 'swarm watch' shows it; 'swarm down' stops it.")
	if opts.Web {
		// The desk printed its URL before the supervisor answered.
		if line := webLine(upOut(l), start); line != "" {
			fmt.Fprintln(app.Stdout, line)
		}
	}
	return nil
}

// webLine is the web desk's URL line a supervisor printed in path from
// offset on; "" when there is none.
func webLine(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		if strings.HasPrefix(line, webURLPrefix) {
			return line
		}
	}
	return ""
}

// tailOf is the last n lines of path from offset on, indented.
func tailOf(path string, offset int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return "  (unreadable)"
	}
	b = bytes.TrimRight(b[offset:], "\n")
	if len(b) == 0 {
		return "  (nothing)"
	}
	lines := strings.Split(string(b), "\n")
	lines = lines[max(len(lines)-n, 0):]
	return "  " + strings.Join(lines, "\n  ")
}
