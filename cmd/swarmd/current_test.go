package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMergeCurrentScripts runs the journeys of agents kept current with
// the base branch and warned of overlapping work (DESIGN §14) in
// testdata/merge_current: `swarm up` with scripted agents, the operator
// moving main by hand, and what the agents' prompts say.
func TestMergeCurrentScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for the CLI tests")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "merge_current"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupRepo,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitstate": cmdWaitState,
		},
	})
}
