package swarm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
)

func TestDownWait(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[defaults]
interrupt_grace = "2s"
[[agent]]
name = "a"
role = "r"
[[agent]]
name = "b"
role = "r"
interrupt_grace = "7s"
`), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := downWait(cfg); got.Seconds() != 12 {
		t.Fatalf("downWait = %s, want 12s (the longest grace + 5s)", got)
	}
}

// TestStopSupervisorWaitsForTheProcess: a supervisor frees its lock a
// moment before its process ends, and until then it may still hold what
// it was doing (the journal of a worktree checkout it was cancelled in
// names its pid). StopSupervisor returns only once the process has ended,
// so swarm down's recovery does not find it "changing the worktree".
func TestStopSupervisorWaitsForTheProcess(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Fatalf("this test needs flock(1) (util-linux): %v", err)
	}
	root := t.TempDir()
	l := repo.At(root, "")
	if err := os.MkdirAll(filepath.Dir(l.Lock()), 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in for a supervisor with no socket: it takes the lock,
	// writes its pid, and on SIGTERM frees the lock, then takes 300 ms
	// to end.
	script := `exec 9>"$1"; "$2" -n 9 || exit 3; echo $$ >&9
trap '"$2" -u 9; sleep 0.3; exit 0' TERM
while :; do sleep 0.02; done`
	cmd := exec.Command("sh", "-c", script, "sh", l.Lock(), flock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid, held := LockHolder(l.Lock()); held && pid == cmd.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stand-in never held the lock")
		}
		time.Sleep(5 * time.Millisecond) // polling its lock file, with a deadline
	}
	stopped, err := StopSupervisor(context.Background(), l, 10*time.Second)
	if err != nil || !stopped {
		t.Fatalf("StopSupervisor: %v, %v", stopped, err)
	}
	if !proc.Exited(cmd.Process.Pid) {
		t.Fatal("StopSupervisor returned while the supervisor's process was still running")
	}
}
