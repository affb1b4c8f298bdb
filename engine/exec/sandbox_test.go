package exec_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/sandbox"
)

// TestSandboxedCLI runs an exec agent in a session's bubblewrap: it writes
// its worktree but not the operator's checkout, and the setsid'd process
// it leaves behind ends with it, by the PID namespace alone (no sweep).
func TestSandboxedCLI(t *testing.T) {
	d, err := sandbox.Decide(context.Background(), sandbox.Bwrap, func(string) string { return "" })
	if err != nil {
		if os.Getenv("SWARM_REQUIRE_SANDBOX") != "" {
			t.Fatalf("SWARM_REQUIRE_SANDBOX is set, but %v", err)
		}
		t.Skipf("bubblewrap is not usable here (%s): %v", sandbox.Fix, err)
	}
	root, wt := gittest.Worktree(t, "alice", nil)
	s := newSession(t, "the prompt")
	s.Root, s.Worktree, s.ID = root, wt, "alice-sandboxed-"+filepath.Base(t.TempDir())
	s.Env = engine.SessionEnv(os.Environ(), s.Session)
	box, err := sandbox.New(sandbox.Spec{Bwrap: d.Bwrap, Root: root, Worktree: wt, Branch: "swarm/alice",
		Hidden: []string{filepath.Join(root, ".swarm")}, Path: os.Getenv("PATH"), TmpDir: t.TempDir(), Name: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	s.Sandbox = box
	e, err := execengine.New(execengine.Options{Name: "sh", Command: shell(`
cat > prompt.txt
r=refused; (echo planted >> "$SWARM_ROOT/README.md") 2>/dev/null && r=written; echo "root=$r"
setsid sh -c 'sleep 300' &
echo started`)})
	if err != nil {
		t.Fatal(err)
	}
	res := e.Run(context.Background(), s.Session)
	if res.Outcome != engine.Success {
		t.Fatalf("outcome %s: %v\n%s", res.Outcome, res.Err, s.log.String())
	}
	log := s.log.String()
	if !strings.Contains(log, "root=refused") || !strings.Contains(log, "started") {
		t.Errorf("the CLI was not contained:\n%s", log)
	}
	if got := readFile(t, filepath.Join(wt, "prompt.txt")); got != "the prompt" {
		t.Errorf("the worktree's prompt.txt = %q", got)
	}
	if pids, _ := proc.Marked("SWARM_SESSION_ID=" + s.ID); len(pids) > 0 {
		t.Errorf("processes of the session outlived it: %v", pids)
	}
}
