package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/mode"
)

// fakeSwarm writes a stand-in swarm binary that prints its arguments and
// the session's agent, and fails for "fail".
func fakeSwarm(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "swarm")
	script := "#!/bin/sh\necho \"args: $*\"\necho \"agent: $SWARM_AGENT session: $SWARM_SESSION_ID\"\n[ \"$2\" = fail ] && exit 3\nexit 0\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSwarmToolRunsAllowedCommands(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.Mode = mode.Review // no bash, no edits: acts only through the swarm tool
	s.SwarmBin = fakeSwarm(t)

	r := runTool(t, s, mode.Swarm, map[string]any{"argv": []any{"swarm", "report", "progress", "T-1", "half done; $(rm -rf /)"}})
	if r.Error != "" || !strings.Contains(r.Output, "args: report progress T-1 half done; $(rm -rf /)") || !strings.Contains(r.Output, "agent: alice session: alice-1") {
		t.Fatalf("report through the swarm tool: %+v", r)
	}
	for _, argv := range [][]any{
		{"swarm", "queue", "top"},           // can_use_queue is off
		{"bd", "update", "bd-1", "--claim"}, // can_claim_tasks is off for review
		{"sh", "-c", "touch x"},             // not a swarm or bd command
		{"swarm", "down"},                   // not a command agents run
	} {
		r := runTool(t, s, mode.Swarm, map[string]any{"argv": argv})
		if r.Error == "" || r.Output != "" {
			t.Errorf("%v ran: %+v", argv, r)
		}
	}
	if r := runTool(t, s, mode.Swarm, map[string]any{"argv": "swarm status"}); !strings.Contains(r.Error, "must be an array of strings") {
		t.Errorf("a string argv: %+v", r)
	}
	if r := runTool(t, s, mode.Swarm, map[string]any{"argv": []any{}}); !strings.Contains(r.Error, "must not be empty") {
		t.Errorf("empty argv: %+v", r)
	}
}

func TestSwarmToolReportsFailure(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.SwarmBin = fakeSwarm(t)
	r := runTool(t, s, mode.Swarm, map[string]any{"argv": []any{"swarm", "queue", "fail", "bd-1"}})
	// code has no queue: refused before it runs.
	if !strings.Contains(r.Error, "can_use_queue") {
		t.Fatalf("queue without the capability: %+v", r)
	}
	s.Strategy = mode.Queue
	r = runTool(t, s, mode.Swarm, map[string]any{"argv": []any{"swarm", "queue", "fail", "bd-1", "--reason", "x"}})
	if !strings.Contains(r.Error, "exit status 3") || !strings.Contains(r.Output, "args: queue fail bd-1 --reason x") {
		t.Fatalf("failing command: %+v", r)
	}
}

// The file tools follow the vector, overrides included.
func TestFileToolsFollowTheVector(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.Caps = mode.Spec{Mode: mode.Code, Overrides: map[mode.Capability]bool{mode.CanEditFiles: false}}.Vector()
	for _, tool := range []string{mode.WriteFile, mode.EditFile} {
		r := runTool(t, s, tool, map[string]any{"path": "x.txt", "content": "x", "old": "a", "new": "b"})
		if !strings.Contains(r.Error, "not allowed") {
			t.Errorf("%s without can_edit_files: %+v", tool, r)
		}
	}
	if fileExists(filepath.Join(wt, "x.txt")) {
		t.Error("x.txt was written")
	}
	if r := runTool(t, s, mode.Bash, map[string]any{"command": "true"}); r.Error != "" {
		t.Errorf("bash with can_run_commands: %+v", r)
	}
}
