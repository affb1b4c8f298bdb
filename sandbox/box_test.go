package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/gittest"
)

// usable returns bwrap's path, or skips the test with one line when
// bubblewrap cannot run here (it fails instead with SWARM_REQUIRE_SANDBOX).
func usable(t *testing.T) string {
	t.Helper()
	d, err := Decide(context.Background(), Bwrap, func(string) string { return "" })
	if err != nil {
		if os.Getenv("SWARM_REQUIRE_SANDBOX") != "" {
			t.Fatalf("SWARM_REQUIRE_SANDBOX is set, but %v", err)
		}
		t.Skipf("bubblewrap is not usable here (%s): %v", Fix, err)
	}
	return d.Bwrap
}

// TestBoxContains runs a shell in a session's box over a real repository
// and worktree: the worktree and a commit on the agent's branch work;
// .swarm shows only the worktree's mount point and the door; the
// checkout, .git/hooks and .git/config are read-only; the supervisor is
// not visible; /tmp is the session's own.
func TestBoxContains(t *testing.T) {
	bwrap := usable(t)
	root, wt := gittest.Worktree(t, "alice", map[string]string{"swarm.toml": "[[agent]]\nname = \"alice\"\n"})
	state := filepath.Join(root, ".swarm")
	gittest.WriteFile(t, filepath.Join(state, "swarm.db"), "the database")
	door := filepath.Join(state, "doors", "alice-1", "door.sock")
	gittest.WriteFile(t, door, "")
	gittest.WriteFile(t, "/tmp/swarm-box-test-outside", "outside")
	box, err := New(Spec{Bwrap: bwrap, Root: root, Worktree: wt, Branch: "swarm/alice", Door: door,
		Hidden: []string{state}, Home: t.TempDir(), Path: os.Getenv("PATH"), TmpDir: t.TempDir(), Name: "alice-1"})
	if err != nil {
		t.Fatal(err)
	}
	script := `
echo "state: $(ls -A ` + state + ` | tr '\n' ' ')"
echo "doors: $(ls -A ` + filepath.Dir(door) + `)"
touch ` + filepath.Join(filepath.Dir(door), "probe") + ` && echo door-writable
(echo x >> ` + filepath.Join(root, "swarm.toml") + `) 2>/dev/null && echo toml-written || echo toml-refused
(echo x > ` + filepath.Join(state, "swarm.db") + `) 2>/dev/null && echo db-written || echo db-refused
(echo x > ` + filepath.Join(root, ".git", "hooks", "post-commit") + `) 2>/dev/null && echo hook-written || echo hook-refused
(echo x >> ` + filepath.Join(root, ".git", "config") + `) 2>/dev/null && echo config-written || echo config-refused
ls /tmp/swarm-box-test-outside 2>/dev/null && echo tmp-shared || echo tmp-private
echo mine > /tmp/mine && echo tmp-writable
echo "tmpdir=$TMPDIR cache=$XDG_CACHE_HOME"
kill -0 ` + itoa(os.Getpid()) + ` 2>/dev/null && echo supervisor-visible || echo supervisor-hidden
[ -e /proc/self/fd/3 ] && echo lifeline-visible || echo lifeline-hidden
echo hi > inside.txt && git add inside.txt && git -c user.name=a -c user.email=a@b commit -qm inside && echo committed
`
	argv, err := box.Command([]string{"sh", "-c", script}, Extra{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	box.Attach(cmd)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"state: doors worktrees \n", "doors: door.sock\n", "door-writable", "toml-refused", "db-refused", "hook-refused", "config-refused",
		"tmp-private", "tmp-writable", "tmpdir=/tmp cache=/tmp/.cache", "supervisor-hidden", "lifeline-hidden", "committed"} {
		if !strings.Contains(got, want) {
			t.Errorf("inside the box: no %q in:\n%s", want, got)
		}
	}
	if log := gittest.Git(t, root, "log", "--format=%s", "-1", "swarm/alice"); log != "inside" {
		t.Errorf("swarm/alice's last commit is %q, want the one made inside", log)
	}
	if _, err := os.Stat(filepath.Join(box.Dir(), "tmp", "mine")); err != nil {
		t.Errorf("the session's /tmp is not its host directory: %v", err)
	}
	if err := box.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(box.Dir()); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", box.Dir(), err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestBoxEndsWithItsSupervisor: a box whose supervisor is killed (kill -9:
// here a process holding the lifeline's write end, as the supervisor
// does) ends with everything in it, a detached background process too.
// bubblewrap alone would not: its --die-with-parent does not fire for a
// parent of its own once it changed its credentials.
func TestBoxEndsWithItsSupervisor(t *testing.T) {
	bwrap := usable(t)
	root, wt := gittest.Worktree(t, "alice", nil)
	box, err := New(Spec{Bwrap: bwrap, Root: root, Worktree: wt, Branch: "swarm/alice",
		Home: t.TempDir(), Path: os.Getenv("PATH"), TmpDir: t.TempDir(), Name: "alice-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	// The stand-in supervisor holds the write end; this test drops its own.
	holder := exec.Command("sleep", "1000")
	holder.ExtraFiles = []*os.File{box.lifeW}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	holderDone := make(chan struct{})
	go func() { _ = holder.Wait(); close(holderDone) }()
	defer func() { _ = holder.Process.Kill(); <-holderDone }()
	box.lifeW.Close()

	ready := filepath.Join(wt, "ready")
	argv, err := box.Command([]string{"sh", "-c", "setsid sleep 200 & touch " + ready + "; sleep 100"}, Extra{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	box.Attach(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) { // polling the file the box writes
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the box did not start its command within 10 s")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the box ended while its supervisor lived: %v", err)
	default:
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the box still ran 10 s after its supervisor was killed")
	}
}
