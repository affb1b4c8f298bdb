package swarm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mode"
)

// TestHandleDoor: a session's door runs commands as its session whatever
// the request says, and refuses every other operation and any request
// that names an identity, with the rule.
func TestHandleDoor(t *testing.T) {
	dev := identity.Session("dev", 3, mode.Vector{mode.CanMessage: true})
	var ran []identity.Caller
	run := func(ctx context.Context, c identity.Caller, req control.RunRequest) control.RunResult {
		ran = append(ran, c)
		return control.RunResult{Stdout: strings.Join(req.Args, " ")}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  control.Request
		want string // "" means answered OK
	}{
		{"ping", control.Request{Op: control.OpPing}, ""},
		{"a command", control.Request{Op: control.OpRun, Run: &control.RunRequest{Args: []string{"send", "critic", "hi"}}}, ""},
		{"a command naming an identity", control.Request{Op: control.OpRun, Run: &control.RunRequest{Args: []string{"status"}, Env: map[string]string{"SWARM_AGENT": "critic"}}}, "names an identity (SWARM_AGENT=critic)"},
		{"a forged session id", control.Request{Op: control.OpRun, Run: &control.RunRequest{Args: []string{"ack", "--all"}, Env: map[string]string{"SWARM_SESSION_ID": "critic-9"}}}, "names an identity (SWARM_SESSION_ID=critic-9)"},
		{"another database", control.Request{Op: control.OpRun, Run: &control.RunRequest{Args: []string{"status"}, Target: "/tmp/other.db"}}, "names a database"},
		{"another repository", control.Request{Op: control.OpRun, Run: &control.RunRequest{Args: []string{"--dir", "/elsewhere", "status"}}}, "--dir names another repository"},
		{"a run without a command", control.Request{Op: control.OpRun}, "run without a command"},
		{"stop", control.Request{Op: control.OpStop}, "the control operation stop is refused for dev/dev-3"},
		{"pause", control.Request{Op: control.OpPause}, "the control operation pause is refused"},
		{"resume", control.Request{Op: control.OpResume}, "the control operation resume is refused"},
		{"retire", control.Request{Op: control.OpRetire}, "the control operation retire is refused"},
		{"spawn", control.Request{Op: control.OpSpawn}, "the control operation spawn is refused"},
		{"a decision", control.Request{Op: control.OpEscalation}, "the control operation escalation is refused"},
		{"a mail notice", control.Request{Op: control.OpMail}, "the control operation mail is refused"},
		{"a watch", control.Request{Op: control.OpWatch}, "the control operation watch is refused"},
		{"naming an agent", control.Request{Op: control.OpRetire, Agent: "critic"}, "a request naming agent critic is refused"},
		{"naming mail", control.Request{Op: control.OpPing, Escalation: 4}, "naming escalation 4"},
		{"an unknown operation", control.Request{Op: "frobnicate"}, `unknown operation "frobnicate" on a session's door`},
	} {
		resp := HandleDoor(ctx, dev, tc.req, run)
		switch {
		case tc.want == "" && !resp.OK:
			t.Errorf("%s: refused: %s", tc.name, resp.Error)
		case tc.want != "" && (resp.OK || !strings.Contains(resp.Error, tc.want)):
			t.Errorf("%s: %+v, want an error with %q", tc.name, resp, tc.want)
		}
	}
	if len(ran) != 1 || ran[0].By() != "dev/dev-3" {
		t.Errorf("ran as %v; want one command as dev/dev-3", ran)
	}
	var who struct{ Agent, Session string }
	if json.Unmarshal(HandleDoor(ctx, dev, control.Request{Op: control.OpPing}, run).Data, &who); who.Agent != "dev" || who.Session != "dev-3" {
		t.Errorf("ping says %+v", who)
	}
}
