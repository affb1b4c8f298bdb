package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestWorkflowScripts runs the workflow journeys in testdata/workflow:
// swarm up with scripted agents driving dev-review and dev-qa items
// (DESIGN §9.3), checked from outside with the CLI.
func TestWorkflowScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts supervisors")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "workflow"),
		RequireExplicitExec: true,
		Setup:               setupJourney,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitjson":  cmdWaitJSON,
			"waitmatch": cmdWaitMatch,
			"exitcode":  cmdExitCode,
			"door":      cmdDoor,
			"waitfile":  cmdWaitFile,
			"alone":     cmdAlone,
		},
	})
}

// cmdAlone checks, on `swarm events --json` (in stdout), that no two of
// the named agents were ever Running at the same time: alone <agent>...
func cmdAlone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: alone <agent> <agent>... (on the stdout of swarm events --json)")
	}
	var evs []struct {
		ID      int64     `json:"id"`
		At      time.Time `json:"at"`
		Kind    string    `json:"subject_kind"`
		Subject string    `json:"subject"`
		To      string    `json:"to"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile("stdout")), &evs); err != nil {
		ts.Fatalf("alone: stdout is not swarm events --json: %v", err)
	}
	watched := map[string]bool{}
	for _, a := range args {
		watched[a] = true
	}
	running := map[string]bool{}
	sessions := 0
	for _, e := range evs {
		if e.Kind != "agent" || !watched[e.Subject] {
			continue
		}
		running[e.Subject] = e.To == "Running"
		if e.To == "Running" {
			sessions++
		}
		var on []string
		for a, r := range running {
			if r {
				on = append(on, a)
			}
		}
		if len(on) > 1 {
			ts.Fatalf("alone: at event %d (%s) %v were Running together", e.ID, e.At.Format(time.RFC3339Nano), on)
		}
	}
	if sessions == 0 {
		ts.Fatalf("alone: none of %v ever ran", args)
	}
	ts.Logf("alone: %d sessions of %v, never two at once", sessions, args)
}
