package main

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMergeScripts runs the merge queue's journeys in testdata/merge
// (DESIGN §14): agents' branches queued with swarm land, tested on top of
// the base branch and landed by the running supervisor, checked from
// outside with the CLI and git.
func TestMergeScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts supervisors")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "merge"),
		RequireExplicitExec: true,
		Setup:               setupJourney,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":       cmdJSONQ,
			"waitjson":    cmdWaitJSON,
			"waitmatch":   cmdWaitMatch,
			"exitcode":    cmdExitCode,
			"door":        cmdDoor,
			"waitfile":    cmdWaitFile,
			"mkworktree":  cmdMkworktree,
			"agentcommit": cmdAgentCommit,
		},
	})
}
