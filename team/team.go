// Package team is the team launch (DESIGN §9.5) as a typed domain: its
// states and events, the launch's fsm table, the stored launch row, the
// breach codes and the RUNNING record that `swarm team --json` prints.
//
// The supervisor drives a launch through this table with fsm.Apply, like
// every other machine: INIT → TEAM_PROBED → TEAM_READY → MEMBERS_READY →
// CORE_READY → RUNNING, or FALLBACK when the core never became ready. A
// breach and a core agent's ACK are events too, each a transition of the
// launch onto its own state with the code as the cause.
package team

import (
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/fsm"
)

// State is where a launch stands. The words are part of the JSON contract
// and of the database's CHECK constraint.
type State string

// The launch states.
const (
	Init         State = "INIT"
	Probed       State = "TEAM_PROBED"
	Ready        State = "TEAM_READY"
	MembersReady State = "MEMBERS_READY"
	CoreReady    State = "CORE_READY"
	Running      State = "RUNNING"
	Fallback     State = "FALLBACK"
)

// States lists every state, in launch order.
var States = []State{Init, Probed, Ready, MembersReady, CoreReady, Running, Fallback}

// Valid reports whether s is a known state.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Released reports whether the members may start: the core is ready, or
// the operator resumed a fallback (RUNNING either way).
func (s State) Released() bool { return s == Running }

// Event is what moves a launch.
type Event string

// The launch events.
const (
	Create   Event = "Create"   // a launch row is made (first event, from nothing)
	Probe    Event = "Probe"    // the preflight passed
	Lock     Event = "Lock"     // the lock and the database are held
	Members  Event = "Members"  // every member's worktree exists
	CoreAck  Event = "CoreAck"  // one core agent acknowledged its ping (a self-loop)
	CoreDone Event = "CoreDone" // every core agent acknowledged
	Run      Event = "Run"      // the members start
	Breach   Event = "Breach"   // a protocol breach is recorded (a self-loop)
	GiveUp   Event = "GiveUp"   // max_relaunch relaunches failed too
	Resume   Event = "Resume"   // the operator resumed the fallback's escalation
	Restart  Event = "Restart"  // a new swarm up after a clean stop launches again
)

// Table is the launch's machine.
var Table = func() *fsm.Table[State, Event] {
	t := fsm.NewTable[State, Event]("team launch")
	t.Add("", Create, Init)
	t.Add(Init, Probe, Probed)
	t.Add(Probed, Lock, Ready)
	t.Add(Ready, Members, MembersReady)
	t.Add(Ready, Breach, Ready)
	t.Add(MembersReady, CoreAck, MembersReady)
	t.Add(MembersReady, Breach, MembersReady)
	t.Add(MembersReady, CoreDone, CoreReady)
	t.Add(MembersReady, GiveUp, Fallback)
	t.Add(CoreReady, Run, Running)
	t.Add(Fallback, CoreAck, Fallback)
	t.Add(Fallback, CoreDone, CoreReady)
	t.Add(Fallback, Resume, Running)
	for _, s := range States {
		t.Add(s, Restart, Init)
	}
	return t
}()

// Breach codes, recorded as the cause of a Breach event and in the row.
const (
	BreachPartialLaunch = "PROTOCOL_BREACH_PARTIAL_ATOMIC_LAUNCH"
	BreachCoreNotReady  = "PROTOCOL_BREACH_CORE_NOT_READY"
)

// PingCode is the code of the ping each core agent gets.
const PingCode = "CORE_BOOTSTRAP_PING"

// AckCode is the record of a core agent's ACK: the name upper-cased, '-'
// as '_', then _CORE_READY_ACK.
func AckCode(agent string) string {
	return strings.ToUpper(strings.ReplaceAll(agent, "-", "_")) + "_CORE_READY_ACK"
}

// TaskID is the task of the launch's pings: team-<name>.
func TaskID(name string) string { return "team-" + name }

// Subject is the events' subject of a launch: its team's name.
func Subject(name string) string { return name }

// Ping is one core agent's current ping and whether it was acknowledged.
type Ping struct {
	MsgID string     `json:"msg_id"`
	Acked bool       `json:"acked"`
	At    *time.Time `json:"acked_at,omitempty"`
	// Session is the agent's session that acknowledged it.
	Session int64 `json:"session_seq,omitempty"`
}

// BreachRecord is one recorded breach.
type BreachRecord struct {
	Code  string    `json:"code"`
	At    time.Time `json:"at"`
	Agent string    `json:"agent"`
}

// Launch is the stored launch row. State moves only through Table; the
// rest is saved beside it.
type Launch struct {
	Name     string
	State    State
	Pings    map[string]Ping // by core agent
	Breaches []BreachRecord
	// Relaunches counts the relaunches of silent core agents so far.
	Relaunches int
	// Escalation is the fallback's protocol_breach escalation, 0 when none.
	Escalation int64
	UpdatedAt  time.Time
}

// Record is the RUNNING record of seed 003 that `swarm team --json`
// prints. The JSON names are a contract.
type Record struct {
	State             State           `json:"state"`
	TeamName          string          `json:"team_name"`
	LaunchMode        string          `json:"launch_mode"`
	LaunchMethod      string          `json:"launch_method"`
	SelectedDomains   []string        `json:"selected_domains"`
	ActiveCoreMembers []string        `json:"active_core_members"`
	CoreReadyAck      map[string]bool `json:"core_ready_ack"`
	Breaches          []BreachRecord  `json:"breaches"`
	Relaunches        int             `json:"relaunches"`
	Escalation        *int64          `json:"escalation"`
	UpdatedAt         *time.Time      `json:"updated_at"`
}

// RecordOf is the record of a launch of the team whose core and members
// (the non-core agents, in config order) are given; l is nil before the
// first launch.
func RecordOf(name string, core, members []string, l *Launch) Record {
	r := Record{State: Init, TeamName: name, LaunchMode: "team_launch", LaunchMethod: "supervisor",
		SelectedDomains: slices.Clone(members), ActiveCoreMembers: slices.Clone(core),
		CoreReadyAck: map[string]bool{}, Breaches: []BreachRecord{}}
	if r.SelectedDomains == nil {
		r.SelectedDomains = []string{}
	}
	for _, c := range core {
		r.CoreReadyAck[AckCode(c)] = false
	}
	if l == nil {
		return r
	}
	r.State, r.Relaunches = l.State, l.Relaunches
	for _, c := range core {
		r.CoreReadyAck[AckCode(c)] = l.Pings[c].Acked
	}
	r.Breaches = append(r.Breaches, l.Breaches...)
	if l.Escalation != 0 {
		id := l.Escalation
		r.Escalation = &id
	}
	at := l.UpdatedAt
	r.UpdatedAt = &at
	return r
}
