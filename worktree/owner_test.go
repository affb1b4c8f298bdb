package worktree

import (
	"os/exec"
	"testing"
	"time"

	"github.com/swarmhq/swarm/proc"
)

// TestAZombieOwnsNothing: a journal whose writer has ended but was not
// reaped (a supervisor under a PID 1 that never reaps) is interrupted,
// not in progress: recovery may take it over. The writer's own live
// process is in progress.
func TestAZombieOwnsNothing(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	start, ok := proc.StartTime(pid)
	if !ok {
		t.Skip("no /proc: a journal's owner cannot be told apart")
	}
	j := journal{PID: pid, PIDStart: start}
	if !ownerRunning(j) {
		t.Fatal("a running writer is not running")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !proc.Exited(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not end")
		}
		time.Sleep(2 * time.Millisecond) // polling /proc, with a deadline
	}
	if ownerRunning(j) {
		t.Fatal("a zombie writer counts as running: its journal would never be recovered")
	}
}
