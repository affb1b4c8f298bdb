package team_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/swarmhq/swarm/team"
)

// rows is the launch's whole table, row by row (DESIGN §9.5): every
// (from, event) → to the launch may take, and nothing else.
var rows = [][3]string{
	{"", "Create", "INIT"},
	{"INIT", "Probe", "TEAM_PROBED"},
	{"TEAM_PROBED", "Lock", "TEAM_READY"},
	{"TEAM_READY", "Members", "MEMBERS_READY"},
	{"TEAM_READY", "Breach", "TEAM_READY"},
	{"MEMBERS_READY", "CoreAck", "MEMBERS_READY"},
	{"MEMBERS_READY", "Breach", "MEMBERS_READY"},
	{"MEMBERS_READY", "CoreDone", "CORE_READY"},
	{"MEMBERS_READY", "GiveUp", "FALLBACK"},
	{"CORE_READY", "Run", "RUNNING"},
	{"FALLBACK", "CoreAck", "FALLBACK"},
	{"FALLBACK", "CoreDone", "CORE_READY"},
	{"FALLBACK", "Resume", "RUNNING"},
	{"INIT", "Restart", "INIT"},
	{"TEAM_PROBED", "Restart", "INIT"},
	{"TEAM_READY", "Restart", "INIT"},
	{"MEMBERS_READY", "Restart", "INIT"},
	{"CORE_READY", "Restart", "INIT"},
	{"RUNNING", "Restart", "INIT"},
	{"FALLBACK", "Restart", "INIT"},
}

var events = []team.Event{team.Create, team.Probe, team.Lock, team.Members, team.CoreAck, team.CoreDone,
	team.Run, team.Breach, team.GiveUp, team.Resume, team.Restart}

// TestTableRowByRow checks every (from, event, to) there is: the rows
// above are legal, every other triple is not.
func TestTableRowByRow(t *testing.T) {
	legal := map[[3]string]bool{}
	for _, r := range rows {
		legal[r] = true
	}
	from := append([]team.State{""}, team.States...)
	checked := 0
	for _, f := range from {
		for _, e := range events {
			for _, to := range team.States {
				key := [3]string{string(f), string(e), string(to)}
				err := team.Table.Check(f, e, to)
				if legal[key] && err != nil {
					t.Errorf("%s --%s--> %s refused: %v", f, e, to, err)
				}
				if !legal[key] && err == nil {
					t.Errorf("%s --%s--> %s allowed; it is not a row of the launch's table", f, e, to)
				}
				checked++
			}
		}
	}
	if want := (len(team.States) + 1) * len(events) * len(team.States); checked != want {
		t.Fatalf("checked %d triples, want %d", checked, want)
	}
}

func TestStates(t *testing.T) {
	for _, s := range team.States {
		if !s.Valid() {
			t.Errorf("%s is not valid", s)
		}
		if s.Released() != (s == team.Running) {
			t.Errorf("%s.Released() = %v", s, s.Released())
		}
	}
	if team.State("").Valid() || team.State("running").Valid() {
		t.Error("an unknown state is valid")
	}
}

func TestCodes(t *testing.T) {
	for agent, want := range map[string]string{"lead": "LEAD_CORE_READY_ACK", "db-admin": "DB_ADMIN_CORE_READY_ACK", "qa_2": "QA_2_CORE_READY_ACK"} {
		if got := team.AckCode(agent); got != want {
			t.Errorf("AckCode(%q) = %q, want %q", agent, got, want)
		}
	}
	if team.TaskID("core") != "team-core" || team.Subject("core") != "core" {
		t.Errorf("TaskID = %q, Subject = %q", team.TaskID("core"), team.Subject("core"))
	}
}

// The record's JSON is the contract `swarm team --json` prints (seed 003).
func TestRecordJSON(t *testing.T) {
	at := time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		name          string
		core, members []string
		l             *team.Launch
		want          string
	}{
		{"before the first launch", []string{"lead", "db-admin"}, nil, nil,
			`{"state":"INIT","team_name":"core","launch_mode":"team_launch","launch_method":"supervisor","selected_domains":[],` +
				`"active_core_members":["lead","db-admin"],"core_ready_ack":{"DB_ADMIN_CORE_READY_ACK":false,"LEAD_CORE_READY_ACK":false},` +
				`"breaches":[],"relaunches":0,"escalation":null,"updated_at":null}`},
		{"a fallback", []string{"lead", "db-admin"}, []string{"web"}, &team.Launch{
			Name: "core", State: team.Fallback, Relaunches: 2, Escalation: 9, UpdatedAt: at,
			Pings:    map[string]team.Ping{"lead": {MsgID: "ping-1", Acked: true, At: &at, Session: 3}, "db-admin": {MsgID: "ping-2"}},
			Breaches: []team.BreachRecord{{Code: team.BreachCoreNotReady, At: at, Agent: "db-admin"}}},
			`{"state":"FALLBACK","team_name":"core","launch_mode":"team_launch","launch_method":"supervisor","selected_domains":["web"],` +
				`"active_core_members":["lead","db-admin"],"core_ready_ack":{"DB_ADMIN_CORE_READY_ACK":false,"LEAD_CORE_READY_ACK":true},` +
				`"breaches":[{"code":"PROTOCOL_BREACH_CORE_NOT_READY","at":"2026-11-28T09:30:00Z","agent":"db-admin"}],` +
				`"relaunches":2,"escalation":9,"updated_at":"2026-11-28T09:30:00Z"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(team.RecordOf("core", c.core, c.members, c.l))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.want {
				t.Errorf("JSON =\n%s\nwant\n%s", b, c.want)
			}
		})
	}
	// The record copies: changing the caller's slices later changes nothing.
	core := []string{"lead"}
	r := team.RecordOf("core", core, nil, nil)
	core[0] = "x"
	if fmt.Sprint(r.ActiveCoreMembers) != "[lead]" {
		t.Errorf("record shares the caller's slice: %v", r.ActiveCoreMembers)
	}
}

func TestPingJSON(t *testing.T) {
	at := time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		p    team.Ping
		want string
	}{
		{team.Ping{MsgID: "ping-1"}, `{"msg_id":"ping-1","acked":false}`},
		{team.Ping{MsgID: "ping-1", Acked: true, At: &at, Session: 3}, `{"msg_id":"ping-1","acked":true,"acked_at":"2026-11-28T09:30:00Z","session_seq":3}`},
	} {
		b, _ := json.Marshal(c.p)
		if string(b) != c.want {
			t.Errorf("JSON = %s, want %s", b, c.want)
		}
	}
}
