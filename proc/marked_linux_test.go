package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestEndMarkedReachesSetsid: a process that left its session's group with
// setsid (as Claude Code's Bash tool does) survives the group kill, but not
// EndMarked; as a subreaper, the test process inherits it and reaps its
// zombie; a process of another session is left alone.
func TestEndMarkedReachesSetsid(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Fatalf("BecomeSubreaper: %v", err)
	}
	dir := t.TempDir()
	start := func(id, root string) int {
		pidFile := filepath.Join(dir, id+filepath.Base(root))
		// The shell starts a setsid'd sleep and exits at once: the
		// sleep is an orphan in a session of its own.
		cmd := exec.Command("sh", "-c", "setsid sh -c 'echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+" && exec sleep 300' &")
		cmd.Env = append(os.Environ(), "SWARM_SESSION_ID="+id, "SWARM_ROOT="+root)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pid := waitForPid(t, pidFile)
		_ = KillGroup(cmd.Process.Pid)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); ReapOrphans() })
		return pid
	}
	// The same session id in another repository is another session.
	mine, other, elsewhere := start("alice-3", "/r1"), start("bob-1", "/r1"), start("alice-3", "/r2")
	if !processExists(mine) {
		t.Fatal("the setsid'd process did not survive its group's kill: the test shows nothing")
	}
	if st, ok := readStat(mine); !ok || st.ppid != os.Getpid() {
		t.Fatalf("the orphan was not reparented to the subreaper: %+v", st)
	}
	killed, gone := EndMarked(5*time.Second, "SWARM_SESSION_ID=alice-3", "SWARM_ROOT=/r1")
	if len(killed) != 1 || killed[0] != mine || !gone {
		t.Fatalf("EndMarked = %v, %v; want [%d], true", killed, gone, mine)
	}
	// Gone, and reaped: no zombie left.
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(mine))); !os.IsNotExist(err) {
		t.Fatalf("process %d is still in /proc (a zombie nobody reaped?): %v", mine, err)
	}
	if !processExists(other) || !processExists(elsewhere) {
		t.Fatal("another session's process was killed")
	}
}

// TestReapLoopCoalesces: SIGCHLDs that come while a pass is spaced out
// make one more pass, not one each (a pass reads every child's stat).
func TestReapLoopCoalesces(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1) // as signal.Notify's: one pending at most
	reaped := make(chan struct{})
	asked := make(chan struct{})
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		reapLoop(ctx, sigs, func() { reaped <- struct{}{} }, func(d time.Duration) <-chan time.Time {
			if d != reapEvery {
				t.Errorf("waits %s, want %s", d, reapEvery)
			}
			asked <- struct{}{}
			return tick
		})
	}()
	recv := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
		}
	}
	recv(reaped, "first pass")
	sigs <- syscall.SIGCHLD
	recv(reaped, "pass for the first signal")
	recv(asked, "spacing after a pass")
	// The loop waits for the tick now: a burst of signals leaves one
	// pending, as the kernel and os/signal coalesce them.
	for range 100 {
		select {
		case sigs <- syscall.SIGCHLD:
		default:
		}
	}
	tick <- time.Now()
	recv(reaped, "one pass for the burst")
	recv(asked, "spacing after it")
	if len(sigs) != 0 {
		t.Fatalf("%d signal(s) left pending after the pass", len(sigs))
	}
	cancel()
	recv(done, "the loop's end")
}
