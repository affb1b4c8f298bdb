package proc

import (
	"os/exec"
	"testing"
	"time"
)

// waitExited waits, with a deadline, for pid to have ended (here: to be a
// zombie, since the test does not reap it yet).
func waitExited(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !Exited(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not end", pid)
		}
		time.Sleep(2 * time.Millisecond) // polling /proc, with a deadline
	}
}

// TestAZombieHasExited: a process that ended but is not reaped yet runs
// nothing and holds nothing: Exited says so, and StartTime no longer
// names it, though kill(pid, 0) (Alive) still finds it.
func TestAZombieHasExited(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, ok := StartTime(pid)
	if !ok || start == 0 || Exited(pid) {
		t.Fatalf("running: start %d %v, exited %v", start, ok, Exited(pid))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExited(t, pid)
	if _, ok := StartTime(pid); ok {
		t.Error("StartTime names a zombie")
	}
	if !Alive(pid) {
		t.Error("kill(pid, 0) should still find the zombie: the test proves nothing")
	}
	cmd.Wait()
	if !Exited(pid) || Alive(pid) {
		t.Errorf("reaped: exited %v, alive %v", Exited(pid), Alive(pid))
	}
}
