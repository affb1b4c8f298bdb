package swarm

import (
	"context"
	"encoding/json"
	"fmt"
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

// TestHandleDoorCall: a typed verb call runs as the door's session; one
// whose arguments name an identity is refused before any verb runs, and
// an unknown verb is refused by its name.
func TestHandleDoorCall(t *testing.T) {
	dev := identity.Session("dev", 3, mode.Vector{mode.CanMessage: true})
	var called []string
	call := func(ctx context.Context, c identity.Caller, req control.CallRequest) (control.RunResult, error) {
		if req.Verb != "send_message" {
			return control.RunResult{}, fmt.Errorf("unknown verb %q on a session's door", req.Verb)
		}
		called = append(called, req.Verb+" by "+c.By())
		return control.RunResult{Stdout: "{}"}, nil
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  control.Request
		want string // "" means answered OK
	}{
		{"a verb", control.Request{Op: control.OpCall, Call: &control.CallRequest{Verb: "send_message", Args: json.RawMessage(`{"to":"critic","body":"hi"}`)}}, ""},
		{"a verb from operator", control.Request{Op: control.OpCall, Call: &control.CallRequest{Verb: "send_message", Args: json.RawMessage(`{"to":"critic","body":"hi","from":"operator"}`)}}, "names an identity (from)"},
		{"a verb as a teammate", control.Request{Op: control.OpCall, Call: &control.CallRequest{Verb: "send_message", Args: json.RawMessage(`{"to":"critic","body":"hi","agent":"critic"}`)}}, "names an identity (agent)"},
		{"a forged session", control.Request{Op: control.OpCall, Call: &control.CallRequest{Verb: "send_message", Args: json.RawMessage(`{"to":"critic","body":"hi","session_id":"critic-9"}`)}}, "names an identity (session_id)"},
		{"an unknown verb", control.Request{Op: control.OpCall, Call: &control.CallRequest{Verb: "retire", Args: json.RawMessage(`{}`)}}, `unknown verb "retire"`},
		{"a call without a verb", control.Request{Op: control.OpCall}, "call without a verb"},
	} {
		resp := HandleDoorCall(ctx, dev, tc.req, nil, call)
		switch {
		case tc.want == "" && !resp.OK:
			t.Errorf("%s: refused: %s", tc.name, resp.Error)
		case tc.want != "" && (resp.OK || !strings.Contains(resp.Error, tc.want)):
			t.Errorf("%s: %+v, want an error with %q", tc.name, resp, tc.want)
		}
	}
	if len(called) != 1 || called[0] != "send_message by dev/dev-3" {
		t.Errorf("called %v; want one send_message by dev/dev-3", called)
	}
	if resp := HandleDoor(ctx, dev, control.Request{Op: control.OpCall, Call: &control.CallRequest{Verb: "send_message"}}, nil); resp.OK {
		t.Errorf("a door without verbs answered a call: %+v", resp)
	}
}
