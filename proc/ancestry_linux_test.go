package proc

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestInSession: a process whose variables were cleared is still inside
// the session its parent was started in; another repository's session,
// and a process outside any, are not.
func TestInSession(t *testing.T) {
	// The inner shell prints its pid once it runs with the cleared
	// environment, then waits as a child of the outer one.
	cmd, child := startMarked(t, "env -u SWARM_DOOR -u SWARM_SESSION_ID")
	m, in := InSession(child, "/repo")
	if !in || m.Session != "dev-3" || m.Pid != cmd.Process.Pid || m.Door != "/tmp/door/s" {
		t.Errorf("the cleared child: %+v, %v; want the shell %d of dev-3", m, in, cmd.Process.Pid)
	}
	if _, in := InSession(child, "/other"); in {
		t.Error("a session of another repository counted")
	}
	if _, in := InSession(os.Getpid(), "/repo"); in && os.Getenv("SWARM_DOOR") == "" {
		t.Error("the test process counted as a session's")
	}
}

// TestSessionMarks: a process that forges another session's variables
// still has its session's ancestors, which a door reads too.
func TestSessionMarks(t *testing.T) {
	_, child := startMarked(t, "env SWARM_SESSION_ID=critic-2")
	var sessions []string
	for _, m := range SessionMarks(child, "/repo") {
		sessions = append(sessions, m.Session)
	}
	if strings.Join(sessions, ",") != "critic-2,dev-3" {
		t.Errorf("marks %v; want the forged critic-2 and its ancestor's dev-3", sessions)
	}
	if len(SessionMarks(child, "/other")) != 0 {
		t.Error("another repository's marks counted")
	}
}

// startMarked starts a shell of session dev-3 of the swarm at /repo that
// runs, through wrap (an env command), an inner shell; it returns the outer
// shell and the inner one's pid, read once the inner shell runs (it stays:
// an exec'ing process has no environment for a moment). The cleanup ends
// both and their sleep.
func startMarked(t *testing.T, wrap string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", wrap+` sh -c 'echo $$; sleep 30'; :`)
	cmd.Env = append(os.Environ(), "SWARM_DOOR=/tmp/door/s", "SWARM_ROOT=/repo", "SWARM_SESSION_ID=dev-3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, pid
}
