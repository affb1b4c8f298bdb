//go:build reliability

package reliability

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pathWith makes a PATH of only the given tools (linked into a directory)
// and extra directories in front: whatever is not listed is missing.
func pathWith(t *testing.T, front []string, tools ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tools")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s is needed for this test: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + strings.Join(append(front, dir), string(os.PathListSeparator))
}

// bdDir makes a directory holding a fake bd that runs script.
func bdDir(t *testing.T, script string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bd")
	writeFile(t, filepath.Join(dir, "bd"), "#!/bin/sh\n"+script)
	if err := os.Chmod(filepath.Join(dir, "bd"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

var baseTools = []string{"git", "uname", "sh", "sleep", "cat"}

const tasksTitle = "## Available Tasks (from beads)"

// TestR6Sources drives `swarm prompt` and `swarm up` with bd hanging,
// missing and printing garbage, and with git missing. Each gives the
// documented result (the section dropped with a warning, or a clear error)
// and nothing hangs.
func TestR6Sources(t *testing.T) {
	h := newHarness(t, swarmConfig{agents: []string{"alice"}, toml: "[prompt]\nbd_timeout = \"500ms\"\n\n[liveness]\nnudge_after = \"0s\"\ntask_poll = \"1s\"\n"})
	// bd hanging: a script that ignores SIGTERM and leaves a child holding
	// its output (swarm must SIGKILL the group).
	hang := bdDir(t, "trap '' TERM\nsleep 60 &\nwait\n")
	ready := bdDir(t, `echo '[{"id":"r-1","title":"a ready task","status":"open","priority":1,"issue_type":"task"}]'`+"\n")
	for _, tc := range []struct {
		name   string
		path   string
		code   int
		stdout []string // wanted in stdout; a "!" prefix: must be absent
		stderr []string
		within time.Duration
	}{
		{"bd answers (control)", pathWith(t, []string{ready}, baseTools...), 0,
			[]string{tasksTitle, "- r-1: [open] P1 task: a ready task"}, []string{"!prompt source dropped"}, 10 * time.Second},
		{"bd hangs, ignoring SIGTERM", pathWith(t, []string{hang}, baseTools...), 0,
			[]string{"!" + tasksTitle, "## Environment"}, []string{"source=bd", "bd_timeout (500ms)"}, 5 * time.Second},
		{"bd prints garbage", pathWith(t, []string{bdDir(t, "echo garbage; echo more garbage\n")}, baseTools...), 0,
			[]string{"!" + tasksTitle}, []string{"unreadable bd output"}, 10 * time.Second},
		{"bd missing", pathWith(t, nil, baseTools...), 0,
			[]string{"!" + tasksTitle, "## Environment"}, []string{"!prompt source dropped"}, 10 * time.Second},
		{"git missing", pathWith(t, nil, "uname", "sh"), 0,
			[]string{"!Git status", "Recent commits:"}, []string{"source=git_status", "executable file not found"}, 10 * time.Second},
	} {
		t.Run("prompt/"+tc.name, func(t *testing.T) {
			r := h.swarmEnv([]string{tc.path}, "prompt", "alice")
			if r.code != tc.code || r.took > tc.within {
				t.Fatalf("want exit %d within %s, got %s", tc.code, tc.within, r)
			}
			checkOut(t, "stdout", r.stdout, tc.stdout)
			checkOut(t, "stderr", r.stderr, tc.stderr)
		})
	}

	t.Run("up/git missing", func(t *testing.T) {
		r := h.swarmEnv([]string{pathWith(t, nil, "uname", "sh")}, "up", "--engine", "script", "--no-tui")
		if r.code != 1 || r.took > 10*time.Second || !strings.Contains(r.stderr, "git is not installed or not on PATH") {
			t.Fatalf("want exit 1 saying git is missing, got %s", r)
		}
	})

	// A swarm whose bd hangs: the agent's session runs without the task
	// section, the idle agent's task polls time out, and Ctrl-C still stops
	// everything promptly: the shared bd call in flight at shutdown, with
	// the child its script left, is cancelled and waited for.
	t.Run("up/bd hangs", func(t *testing.T) {
		up, err := h.startUp([]string{pathWith(t, []string{hang}, baseTools...)}, "--engine", "script")
		if err != nil {
			t.Fatal(err)
		}
		st := h.store([]string{"alice"})
		defer st.Close()
		ctx := context.Background()
		h.waitFor(30*time.Second, "alice's session 1 to complete and alice to idle", func() (bool, error) {
			if up.exited() {
				t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
			}
			as, err := agentStates(st)
			if err != nil {
				return false, err
			}
			return as["alice"].State == "Idle", nil
		})
		s, err := st.Session(ctx, "alice", 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.State != "completed" || strings.Contains(s.Prompt, tasksTitle) || !strings.Contains(s.Prompt, "## Environment") {
			t.Fatalf("session 1: %s, prompt:\n%s", s.State, s.Prompt)
		}
		// Let the idle agent's bd poll (every second) be in flight, then stop.
		h.waitFor(10*time.Second, "a bd poll to time out", func() (bool, error) {
			log, _ := os.ReadFile(filepath.Join(h.root, ".swarm", "logs", "supervisor.log"))
			return strings.Count(string(log), "source=bd") >= 1, nil
		})
		t0 := time.Now()
		up.interrupt(t)
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("stopping took %s with a hanging bd", d)
		}
	})
}

func checkOut(t *testing.T, name, got string, want []string) {
	t.Helper()
	for _, w := range want {
		if absent, ok := strings.CutPrefix(w, "!"); ok {
			if strings.Contains(got, absent) {
				t.Errorf("%s contains %q:\n%s", name, absent, tail(got, 3000))
			}
		} else if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", name, w, tail(got, 3000))
		}
	}
}
