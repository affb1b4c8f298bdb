// Package fsm is the one state-machine helper that swarm's lifecycles share:
// the agent lifecycle, and the workflow items, escalations, team launch
// and merge queue candidates of the coordination layer.
//
// A machine is data: a Table of (from, event) → allowed targets. A
// transition is checked against the table and then persisted by a Recorder
// (the store) by compare-and-set, which writes the row's new state and the
// event in one transaction. An illegal transition never reaches the store.
// Every recorded transition is an Event with the subject it is about, so
// one events table serves every kind of subject.
package fsm

import (
	"fmt"
	"slices"
	"time"
)

// SubjectKind says what an event is about.
type SubjectKind string

// The kinds of subject whose transitions are recorded.
const (
	SubjectAgent      SubjectKind = "agent"
	SubjectItem       SubjectKind = "item"
	SubjectEscalation SubjectKind = "escalation"
	SubjectTeam       SubjectKind = "team"
	SubjectMerge      SubjectKind = "merge" // a merge queue candidate (its id)
)

// SubjectKinds lists every kind.
var SubjectKinds = []SubjectKind{SubjectAgent, SubjectItem, SubjectEscalation, SubjectTeam, SubjectMerge}

// Valid reports whether k is a known kind.
func (k SubjectKind) Valid() bool { return slices.Contains(SubjectKinds, k) }

// Table is one machine's transitions. Build it once, at package init, and
// only read it afterwards.
type Table[S, E ~string] struct {
	name  string
	edges map[edge[S, E]][]S
}

type edge[S, E ~string] struct {
	from  S
	event E
}

// NewTable returns an empty table; name appears in errors.
func NewTable[S, E ~string](name string) *Table[S, E] {
	return &Table[S, E]{name: name, edges: map[edge[S, E]][]S{}}
}

// Add allows event to move from to any of to. Adding the same edge again
// extends its targets.
func (t *Table[S, E]) Add(from S, event E, to ...S) *Table[S, E] {
	k := edge[S, E]{from, event}
	for _, s := range to {
		if !slices.Contains(t.edges[k], s) {
			t.edges[k] = append(t.edges[k], s)
		}
	}
	return t
}

// Next returns the states event may lead to from from; none means illegal.
func (t *Table[S, E]) Next(from S, event E) []S {
	return slices.Clone(t.edges[edge[S, E]{from, event}])
}

// Check validates one transition.
func (t *Table[S, E]) Check(from S, event E, to S) error {
	if !slices.Contains(t.edges[edge[S, E]{from, event}], to) {
		return &IllegalTransitionError{Machine: t.name, From: string(from), Event: string(event), To: string(to)}
	}
	return nil
}

// IllegalTransitionError is a (state, event, target) the table does not
// allow.
type IllegalTransitionError struct {
	Machine string
	From    string
	Event   string
	To      string
}

func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("illegal %s transition %s --%s--> %s", e.Machine, e.From, e.Event, e.To)
}

// Change is one compare-and-set transition of a subject: it moves from From
// to To only if the subject is in From now. From is empty for a subject's
// first transition when it has no row yet.
type Change struct {
	Kind    SubjectKind
	Subject string
	From    string
	To      string
	Cause   string
	Seq     int64 // the agent's session number, for agent events; 0 otherwise
	// By names who triggered an item's change (an agent, swarm or
	// operator); item events keep it as their agent.
	By string
}

// Event is one persisted transition. The JSON names are a contract that
// `swarm events --json` prints.
type Event struct {
	ID          int64       `json:"id"`
	At          time.Time   `json:"at"`
	SubjectKind SubjectKind `json:"subject_kind"`
	Subject     string      `json:"subject"`
	// Agent is set for agent events, for other subjects that belong to
	// one agent, and for item events it names who triggered the change (an
	// agent, swarm or operator); nil otherwise.
	Agent      *string `json:"agent"`
	From       *string `json:"from"` // nil for a subject's first event
	To         string  `json:"to"`
	Cause      string  `json:"cause"`
	SessionSeq int64   `json:"session_seq"`
}

// AgentName returns the event's agent, or "" when it has none.
func (e Event) AgentName() string {
	if e.Agent == nil {
		return ""
	}
	return *e.Agent
}

// Recorder persists a checked change: compare-and-set of the subject's
// state plus its event row, in one transaction. The store's transaction
// implements it.
type Recorder interface {
	Transition(c Change) (Event, error)
}

// ApplyBy is Apply for a change someone triggered (items): by is kept as
// the event's agent.
func ApplyBy[S, E ~string](r Recorder, t *Table[S, E], kind SubjectKind, subject string, from S, event E, to S, cause, by string) (Event, error) {
	if err := t.Check(from, event, to); err != nil {
		return Event{}, err
	}
	if cause == "" {
		cause = string(event)
	}
	return r.Transition(Change{Kind: kind, Subject: subject, From: string(from), To: string(to), Cause: cause, By: by})
}

// Apply checks from --event--> to against t and records it through r. It
// is the only way a machine's subject changes state.
func Apply[S, E ~string](r Recorder, t *Table[S, E], kind SubjectKind, subject string, from S, event E, to S, cause string, seq int64) (Event, error) {
	if err := t.Check(from, event, to); err != nil {
		return Event{}, err
	}
	if cause == "" {
		cause = string(event)
	}
	return r.Transition(Change{Kind: kind, Subject: subject, From: string(from), To: string(to), Cause: cause, Seq: seq})
}
