package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/merge"
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

// The live view's merge queue lines: live candidates only, first in first
// out, then how far the checkout is behind.
func TestMergeLines(t *testing.T) {
	got := mergeLines(mergesJSON{
		Candidates: []merge.Candidate{
			{ID: 3, Agent: "alpha", Commit: "1a2b3c4d5e6f", State: merge.Testing, By: "operator"},
			{ID: 4, Agent: "bravo", Commit: "5e6f7a8b9c0d", State: merge.Queued, Item: "T-1", By: "operator"},
			{ID: 2, Agent: "carol", Commit: "0d0d0d0d0d0d", State: merge.Landed, By: "carol/7"},
		},
		Checkout: checkoutJSON{Base: "main", Behind: 2},
	})
	want := []string{
		"#3 alpha 1a2b3c4d testing (swarm land by operator)",
		"#4 bravo 5e6f7a8b queued (item T-1)",
		"checkout behind main by 2: git switch main (your uncommitted changes come along)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("mergeLines =\n%q\nwant\n%q", got, want)
	}
	if got := mergeLines(mergesJSON{}); len(got) != 0 {
		t.Fatalf("an empty queue gave %q", got)
	}
}
