package proc

import (
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
