package main

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestReserveScripts runs the file reservation journeys in
// testdata/reserve (DESIGN §14): reserving, listing and releasing as the
// operator and from a session's door, the refusals of a hostile session,
// and a scripted agent's commit crossing an exclusive reservation under
// `swarm up`.
func TestReserveScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "reserve"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupJourney,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitjson":  cmdWaitJSON,
			"waitmatch": cmdWaitMatch,
			"exitcode":  cmdExitCode,
			"door":      cmdDoor,
			"waitfile":  cmdWaitFile,
		},
	})
}
