package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/team"
)

// TestTeam runs testdata/team: the team launch and spawned agents (DESIGN
// §9.5) on scripted agents, with swarm up in the background.
func TestTeam(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for the CLI tests")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "team"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupJourney,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitjson":  cmdWaitJSON,
			"waitmatch": cmdWaitMatch,
			"exitcode":  cmdExitCode,
			"door":      cmdDoor,
			"waitevent": cmdWaitEvent,
			"waitstate": cmdWaitState,
			"escid":     cmdEscID,
			"coreorder": cmdCoreOrder,
		},
	})
}

// cmdCoreOrder checks the team launch's order in the events: coreorder
// <team> <core...> -- <member...>. Each core agent's <NAME>_CORE_READY_ACK
// is recorded, and no member leaves Waiting before the last of them.
func cmdCoreOrder(ts *testscript.TestScript, neg bool, args []string) {
	i := slices.Index(args, "--")
	if neg || len(args) < 3 || i < 2 {
		ts.Fatalf("usage: coreorder <team> <core...> -- <member...>")
	}
	name, core, members := args[0], args[1:i], args[i+1:]
	st := openScriptStore(ts)
	defer st.Close()
	evs, err := st.Events(context.Background(), mailbox.EventFilter{})
	ts.Check(err)
	lastAck := int64(0)
	for _, c := range core {
		id := int64(0)
		for _, e := range evs {
			if e.SubjectKind == fsm.SubjectTeam && e.Subject == name && e.Cause == team.AckCode(c) {
				id = e.ID
			}
		}
		if id == 0 {
			ts.Fatalf("no %s event for team %s", team.AckCode(c), name)
		}
		lastAck = max(lastAck, id)
	}
	for _, m := range members {
		waited := false
		for _, e := range evs {
			if e.SubjectKind != fsm.SubjectAgent || e.Subject != m || e.From == nil || *e.From != "Waiting" {
				continue
			}
			waited = true
			if e.ID < lastAck && e.To != "Stopped" && e.To != "Initializing" {
				ts.Fatalf("member %s left Waiting (event %d, to %s) before the last core ACK (event %d)", m, e.ID, e.To, lastAck)
			}
		}
		if !waited {
			ts.Fatalf("member %s never waited: no event from Waiting", m)
		}
	}
	ts.Logf("every member left Waiting after the last core ACK (event %s)", strconv.FormatInt(lastAck, 10))
}
