package mode

import (
	"slices"
	"strings"
	"testing"
)

func TestModeTools(t *testing.T) {
	tests := []struct {
		mode  Mode
		beads bool
		want  []string
	}{
		{Code, true, []string{Bash, ReadFile, WriteFile, EditFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, Swarm, BDClaim, BDClose, BDShow}},
		{Code, false, []string{Bash, ReadFile, WriteFile, EditFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, Swarm}},
		{Delegate, true, []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, Swarm, BDClaim, BDClose, BDShow}},
		{Delegate, false, []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, Swarm}},
		{Review, true, []string{ReadFile, ListFiles, Grep, GitDiff, GitShow, SendMessage, SendProtocol, Ack, Escalate, Swarm}},
		{ExecuteMode, true, []string{Bash, ReadFile, WriteFile, EditFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, Swarm, BDClaim, BDClose, BDShow}},
		{CoordinateMode, true, []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, Swarm, BDClaim, BDClose, BDShow}},
	}
	for _, tt := range tests {
		if got := tt.mode.Tools(tt.beads); !slices.Equal(got, tt.want) {
			t.Errorf("%s.Tools(%v) = %v, want %v", tt.mode, tt.beads, got, tt.want)
		}
	}
}

func TestModeRules(t *testing.T) {
	if Review.CanWrite() || Delegate.CanWrite() || !Code.CanWrite() {
		t.Error("only code mode may write")
	}
	if Review.ClaimsTasks() || !Code.ClaimsTasks() || !Delegate.ClaimsTasks() {
		t.Error("review must not claim tasks; code and delegate may")
	}
	if Delegate.Kind() != Coordinate || Code.Kind() != Execute || Review.Kind() != Execute {
		t.Error("mode kinds are wrong")
	}
	if Code.Profile() != Code || ExecuteMode.Profile() != "" || CoordinateMode.Kind() != Coordinate {
		t.Error("profiles are wrong")
	}
}

func TestParse(t *testing.T) {
	for _, n := range Names() {
		if _, err := Parse(n); err != nil {
			t.Errorf("Parse(%q): %v", n, err)
		}
	}
	if _, err := Parse("yolo"); err == nil {
		t.Error("Parse(yolo) succeeded")
	}
}

// TestVectorDefaults is DESIGN §9.4's table, row by row.
func TestVectorDefaults(t *testing.T) {
	on := func(cs ...Capability) Vector {
		v := Vector{}
		for _, c := range Capabilities {
			v[c] = slices.Contains(cs, c)
		}
		return v
	}
	common := []Capability{CanMessage, CanReportTaskLevel, CanReportSessionLevel, CanEscalate}
	executor := append([]Capability{CanEditFiles, CanRunCommands, CanClaimTasks, CanLand}, common...)
	coordinator := append([]Capability{CanClaimTasks, CanDispatch, CanEditTasks, CanSpawnSessions}, common...)
	tests := []struct {
		spec Spec
		want Vector
	}{
		{Spec{Mode: ExecuteMode}, on(executor...)},
		{Spec{Mode: ExecuteMode, Strategy: Simple}, on(executor...)},
		{Spec{Mode: ExecuteMode, Strategy: Tree}, on(executor...)},
		{Spec{Mode: ExecuteMode, Strategy: Queue}, on(append(executor, CanUseQueue)...)},
		{Spec{Mode: Code}, on(executor...)},
		{Spec{Mode: CoordinateMode}, on(coordinator...)},
		{Spec{Mode: CoordinateMode, Strategy: DAG}, on(coordinator...)},
		{Spec{Mode: CoordinateMode, Strategy: IntelligentBatching}, on(coordinator...)},
		{Spec{Mode: Delegate}, on(coordinator...)},
		{Spec{Mode: Review}, on(common...)},
		{Spec{Mode: Review, Strategy: Queue}, on(common...)},
		{Spec{Mode: ExecuteMode, Overrides: map[Capability]bool{CanRunCommands: false, CanSpawnSessions: true}},
			on(CanEditFiles, CanClaimTasks, CanLand, CanSpawnSessions, CanMessage, CanReportTaskLevel, CanReportSessionLevel, CanEscalate)},
	}
	for _, tt := range tests {
		got := tt.spec.Vector()
		if len(got) != len(Capabilities) {
			t.Errorf("%+v: vector has %d entries, want every capability", tt.spec, len(got))
		}
		for _, c := range Capabilities {
			if got[c] != tt.want[c] {
				t.Errorf("%s/%s %v: %s = %v, want %v", tt.spec.Mode, tt.spec.EffectiveStrategy(), tt.spec.Overrides, c, got[c], tt.want[c])
			}
		}
	}
}

func TestCheckStrategy(t *testing.T) {
	for _, m := range []Mode{ExecuteMode, Code, Review} {
		for _, s := range []Strategy{"", Simple, Queue, Tree} {
			if err := CheckStrategy(m, s); err != nil {
				t.Errorf("%s/%s: %v", m, s, err)
			}
		}
		if err := CheckStrategy(m, DAG); err == nil || !strings.Contains(err.Error(), "does not fit") {
			t.Errorf("%s/dag: %v", m, err)
		}
	}
	for _, m := range []Mode{CoordinateMode, Delegate} {
		if err := CheckStrategy(m, Queue); err == nil {
			t.Errorf("%s/queue accepted", m)
		}
		if err := CheckStrategy(m, IntelligentBatching); err != nil {
			t.Error(err)
		}
	}
	if err := CheckStrategy(ExecuteMode, "dagg"); err == nil || !strings.Contains(err.Error(), "unknown strategy") {
		t.Errorf("dagg: %v", err)
	}
}

func TestVectorJSONRoundTrip(t *testing.T) {
	v := Spec{Mode: CoordinateMode, Strategy: DAG}.Vector()
	got, err := ParseVector(v.JSON())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Capabilities {
		if got[c] != v[c] {
			t.Errorf("%s: %v after a round trip, want %v", c, got[c], v[c])
		}
	}
	if _, err := ParseVector(`{"can_fly":true}`); err == nil {
		t.Error("unknown capability accepted")
	}
}

func TestCommandsFollowTheVector(t *testing.T) {
	for _, s := range []Spec{{Mode: Code}, {Mode: Review}, {Mode: Delegate}, {Mode: ExecuteMode, Strategy: Queue}} {
		v := s.Vector()
		for _, c := range v.Commands(true) {
			if c.Pending {
				t.Errorf("%s: pending command %s listed", s.Mode, c.ID)
			}
			if c.Capability != "" && !v[c.Capability] {
				t.Errorf("%s: %s listed without %s", s.Mode, c.ID, c.Capability)
			}
			if !strings.HasPrefix(c.Syntax, c.Program+" "+strings.Join(c.Args, " ")) {
				t.Errorf("%s: syntax %q does not start with its argv", c.ID, c.Syntax)
			}
		}
		for _, c := range v.Commands(false) {
			if c.Program == "bd" {
				t.Errorf("%s: bd command %s without bd", s.Mode, c.ID)
			}
		}
	}
}

func TestMatch(t *testing.T) {
	review := Spec{Mode: Review}.Vector()
	if _, err := review.Match([]string{"swarm", "report", "progress", "T-1", "x"}, true); err != nil {
		t.Error(err)
	}
	if _, err := review.Match([]string{"swarm", "queue", "top"}, true); err == nil || !strings.Contains(err.Error(), "can_use_queue") {
		t.Errorf("review ran the queue: %v", err)
	}
	if _, err := review.Match([]string{"bd", "update", "x", "--claim"}, true); err == nil || !strings.Contains(err.Error(), "can_claim_tasks") {
		t.Errorf("review claimed: %v", err)
	}
	code := Spec{Mode: Code}.Vector()
	if _, err := code.Match([]string{"bd", "update", "x", "--claim"}, true); err != nil {
		t.Error(err)
	}
	if _, err := code.Match([]string{"bd", "update", "x", "--status", "closed"}, true); err == nil {
		t.Error("bd update without --claim matched the claim command")
	}
	if _, err := code.Match([]string{"bd", "ready"}, false); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("bd without bd: %v", err)
	}
	if _, err := code.Match([]string{"rm", "-rf", "/"}, true); err == nil {
		t.Error("rm matched")
	}
	if _, err := code.Match(nil, true); err == nil {
		t.Error("empty argv matched")
	}
	// The most specific row decides: a dispatch is a dispatch, whoever may
	// send mail.
	for _, argv := range [][]string{
		{"swarm", "send", "bob", "do T-1", "--kind", "task"},
		{"swarm", "send", "bob", "do T-1", "--kind=task"},
		{"swarm", "send", "bob", "--type", "task_dispatch", "--task", "T-1", "--payload", "{}"},
	} {
		if _, err := code.Match(argv, true); err == nil || !strings.Contains(err.Error(), "can_dispatch") {
			t.Errorf("%v from code: %v, want a refusal naming can_dispatch", argv, err)
		}
		if c, err := (Spec{Mode: CoordinateMode}).Vector().Match(argv, true); err != nil || c.Capability != CanDispatch {
			t.Errorf("%v from coordinate: %+v, %v", argv, c, err)
		}
	}
	for _, argv := range [][]string{
		{"swarm", "send", "bob", "note", "--kind", "status"},
		{"swarm", "send", "bob", "--type", "task_result", "--task", "T-1", "--payload", "{}"},
		{"swarm", "ack", "task_dispatch-T-1-1"},
		{"swarm", "reply", "12", "ok"},
		{"swarm", "escalate", "which schema?", "--hold"},
	} {
		if _, err := review.Match(argv, true); err != nil {
			t.Errorf("%v from review: %v", argv, err)
		}
	}
}

func TestUsable(t *testing.T) {
	coord := Spec{Mode: CoordinateMode}.Vector()
	if !coord.Usable(CanSpawnSessions, false) {
		t.Error("can_spawn_sessions is not usable although swarm spawn exists")
	}
	if !coord.Usable(CanDispatch, true) || !coord.Usable(CanEditTasks, true) || coord.Usable(CanEditTasks, false) {
		t.Error("can_dispatch or can_edit_tasks (with and without bd) is wrong")
	}
	code := Spec{Mode: Code}.Vector()
	if !code.Usable(CanEditFiles, false) || !code.Usable(CanRunCommands, false) || code.Usable(CanDispatch, true) {
		t.Error("code's file and command capabilities should be usable, and dispatch not")
	}
}

func TestMCPTools(t *testing.T) {
	all := []string{"send_message", "send_protocol", "reply", "ack", "inbox", "escalate", "report"}
	for _, tt := range []struct {
		spec Spec
		want []string
	}{
		{Spec{Mode: Code}, all},
		{Spec{Mode: Review}, append(slices.Clone(all), "diff")},
		{Spec{Mode: CoordinateMode}, append(slices.Clone(all), "spawn", "diff")},
		{Spec{Mode: Code, Overrides: map[Capability]bool{CanMessage: false, CanEscalate: false}}, []string{"inbox", "report"}},
		{Spec{Mode: Code, Overrides: map[Capability]bool{CanReportTaskLevel: false, CanReportSessionLevel: false, CanMessage: false, CanEscalate: false}}, []string{"inbox"}},
	} {
		if got := tt.spec.Vector().MCPTools(); !slices.Equal(got, tt.want) {
			t.Errorf("%+v: MCPTools %v, want %v", tt.spec, got, tt.want)
		}
	}
}
