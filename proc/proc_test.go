package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunCapturesOutput(t *testing.T) {
	res, err := Run(context.Background(), Spec{}, "sh", "-c", "echo out; echo err >&2")
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 0 {
		t.Fatalf("res = %+v", res)
	}
}

func TestRunExitError(t *testing.T) {
	_, err := Run(context.Background(), Spec{}, "sh", "-c", "echo 'no database' >&2; exit 3")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 3 || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("err = %v", err)
	}
}

// A grandchild holding stdout open must not keep Run waiting: the timeout
// kills the whole group and Run returns. The grandchild writes its pid so the
// test can check it is gone, without timing anything.
func TestTimeoutKillsTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := "sleep 60 & echo $! > " + pidFile + "; wait"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Spec{Grace: 50 * time.Millisecond}, "sh", "-c", script)
		done <- err
	}()
	pid := waitForPid(t, pidFile)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	waitGone(t, pid)
}

func TestTimeoutCause(t *testing.T) {
	_, err := Run(context.Background(), Spec{Timeout: 20 * time.Millisecond, Grace: 20 * time.Millisecond}, "sleep", "60")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v", err)
	}
}

func waitForPid(t *testing.T, path string) int {
	t.Helper()
	for range 500 {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("child never wrote its pid")
	return 0
}

// waitGone polls until pid no longer exists (bounded), since the kernel
// reaps asynchronously.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 500 {
		if !processExists(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d survived the group kill", pid)
}

func processExists(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return GroupAlive(pid) // non-Linux fallback
	}
	// A zombie (state Z) is dead for our purposes.
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestRunScrubsCredentials(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "sk-test-SECRET")
	t.Setenv("MY_SERVICE_TOKEN", "tok")
	t.Setenv("SWARM_AGENT", "alpha")
	t.Setenv("GITHUB_PAT", "ghp-passed")
	for _, env := range [][]string{nil, append(os.Environ(), "OPENAI_API_KEY=sk-2")} {
		res, err := Run(context.Background(), Spec{Env: env, Pass: []string{"GITHUB_PAT"}}, "env")
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Stdout)
		if strings.Contains(out, "SECRET") || strings.Contains(out, "MY_SERVICE_TOKEN") || strings.Contains(out, "sk-2") {
			t.Fatalf("a credential reached the child:\n%s", out)
		}
		if !strings.Contains(out, "SWARM_AGENT=alpha") {
			t.Fatal("the rest of the environment is missing")
		}
		if !strings.Contains(out, "GITHUB_PAT=ghp-passed") {
			t.Fatal("Spec.Pass did not let GITHUB_PAT through")
		}
	}
}

func TestKillSessionGroupChecksTheSession(t *testing.T) {
	dir := t.TempDir()
	start := func(id string) (*exec.Cmd, int) {
		pidFile := filepath.Join(dir, id)
		cmd := exec.Command("sh", "-c", "sleep 60 & echo $! > "+pidFile+"; wait")
		cmd.Env = append(os.Environ(), "SWARM_SESSION_ID="+id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { KillGroup(cmd.Process.Pid); cmd.Wait() })
		return cmd, waitForPid(t, pidFile)
	}
	other, otherSleep := start("bob-1")
	// A group that is not the session's (a reused pgid) is left alone.
	if killed, err := KillSessionGroup(other.Process.Pid, "SWARM_SESSION_ID=alice-3"); err != nil || killed {
		t.Fatalf("killed an unrelated group: %v, %v", killed, err)
	}
	if !processExists(otherSleep) {
		t.Fatal("the unrelated group's process died")
	}
	mine, mySleep := start("alice-3")
	if killed, err := KillSessionGroup(mine.Process.Pid, "SWARM_SESSION_ID=alice-3"); err != nil || !killed {
		t.Fatalf("did not kill the session's group: %v, %v", killed, err)
	}
	mine.Wait()
	waitGone(t, mySleep)
	// A group that no longer exists is not an error.
	if killed, err := KillSessionGroup(mine.Process.Pid, "SWARM_SESSION_ID=alice-3"); err != nil || killed {
		t.Fatalf("dead group: %v, %v", killed, err)
	}
}

// TestAwaitGroupsGone: a killed group is waited for until it is gone; a
// live one makes the bounded wait give up.
func TestAwaitGroupsGone(t *testing.T) {
	cmd := Command(context.Background(), 0, "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pg := cmd.Process.Pid
	waited := 0
	if AwaitGroupsGone([]int{pg}, time.Millisecond, 5*time.Millisecond, func(d time.Duration) { waited++; time.Sleep(d) }) {
		t.Fatal("a live group counted as gone")
	}
	if waited == 0 {
		t.Fatal("gave up without waiting")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // the test is its parent: reap it
	if err := KillGroup(pg); err != nil {
		t.Fatal(err)
	}
	if !AwaitGroupsGone([]int{pg}, time.Millisecond, 10*time.Second, time.Sleep) {
		t.Fatal("the killed group never went")
	}
	<-done
	// A zombie nobody reaps is gone too: its group holds no running process.
	z := Command(context.Background(), 0, "sh", "-c", "exit 0")
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	zpg := z.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for !zombie(zpg) {
		if time.Now().After(deadline) {
			t.Fatal("the child never became a zombie")
		}
		time.Sleep(time.Millisecond) // polling the kernel, bounded
	}
	if !GroupAlive(zpg) {
		t.Fatal("kill(2) no longer sees zombies: this test checks nothing")
	}
	if !AwaitGroupsGone([]int{zpg}, time.Millisecond, 0, time.Sleep) {
		t.Fatal("an unreaped zombie's group counted as running")
	}
	z.Wait()
	if !AwaitGroupsGone(nil, time.Millisecond, 0, time.Sleep) {
		t.Fatal("no groups is not gone")
	}
}

// zombie reports whether pid is a zombie (Linux).
func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z")
}
