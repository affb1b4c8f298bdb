// Package workflow is the typed domain of gated workflows (DESIGN §9.3):
// the two built-in kinds as data (one fsm table each), a work item and the
// history rows the commands print.
//
// dev-review is seed 000's coordinator loop: a task goes to a dev, then to
// a reviewer, and back until it is approved or locked at its reject limit.
// dev-qa is seed 001's orchestrator: items go through the seed's states one
// at a time, moved by the stage's agent's signals.
//
// It is a domain leaf: items are stored by the mailbox, moved through
// fsm.Apply by the supervisor (package swarm), which also sends the
// workflow's messages from the runtime's address.
package workflow

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/fsm"
)

// Kind is a built-in workflow kind.
type Kind string

// The kinds.
const (
	DevReview Kind = "dev-review" // seed 000's coordinator loop
	DevQA     Kind = "dev-qa"     // seed 001's orchestrator
)

// Kinds lists every kind.
var Kinds = []Kind{DevReview, DevQA}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// Roles lists the roles a kind binds to agents: required ones first, then
// the optional ones.
func (k Kind) Roles() (required, optional []string) {
	switch k {
	case DevReview:
		return []string{"dev", "reviewer"}, nil
	case DevQA:
		return []string{"dev", "qa"}, []string{"initializer"}
	}
	return nil, nil
}

// State is a work item's state; each kind has its own set.
type State string

// dev-review's states.
const (
	Dispatched State = "dispatched"
	InProgress State = "in_progress"
	InReview   State = "in_review"
	Approved   State = "approved"
	Merged     State = "merged"
	Rejected   State = "rejected"
	Locked     State = "locked"
	Aborted    State = "aborted" // both kinds: the operator ended the item
)

// dev-qa's states: seed 001's, by their names.
const (
	Start       State = "START"
	Initializer State = "INITIALIZER"
	DevReady    State = "DEV_READY"
	Dev         State = "DEV"
	QAReady     State = "QA_READY"
	QA          State = "QA"
	QAPassed    State = "QA_PASSED"
	DevFeedback State = "DEV_FEEDBACK"
	Complete    State = "COMPLETE" // the workflow's, when no item is left
)

// States lists every item state of every kind (the store's CHECK).
var States = []State{Dispatched, InProgress, InReview, Approved, Merged, Rejected, Locked, Aborted,
	Start, Initializer, DevReady, Dev, QAReady, QA, QAPassed, DevFeedback}

// Event moves an item.
type Event string

// The events.
const (
	Create    Event = "start"     // swarm workflow start stored the item
	Acked     Event = "ack"       // dev acknowledged the dispatch
	Result    Event = "result"    // dev's task_result (and CI) passed: off to review
	CIFailed  Event = "ci_failed" // CI failed: a repair dispatch went out
	Approve   Event = "approve"   // the reviewer approved
	Reject    Event = "reject"    // the reviewer rejected
	Redo      Event = "redispatch"
	Lock      Event = "lock"   // the reject limit was reached
	Resume    Event = "resume" // the operator resumed a lock
	Merge     Event = "merge"
	Abort     Event = "abort"
	Signal    Event = "signal"     // dev-qa: the stage's agent signalled
	Begin     Event = "begin"      // dev-qa: the item's turn came
	StageOpen Event = "session"    // dev-qa: the stage's agent started its session
	Finish    Event = "initialize" // dev-qa: the initializer finished
)

// ReviewTable is dev-review (seed 000, the coordinator as code).
var ReviewTable = func() *fsm.Table[State, Event] {
	t := fsm.NewTable[State, Event]("dev-review item")
	t.Add("", Create, Dispatched) // the item's row is stored with its dispatch
	t.Add(Dispatched, Acked, InProgress)
	t.Add(Dispatched, Result, InReview) // a result acknowledges its dispatch
	t.Add(Dispatched, CIFailed, InProgress)
	t.Add(InProgress, Result, InReview)
	t.Add(InProgress, CIFailed, InProgress)
	t.Add(InReview, Approve, Approved)
	t.Add(InReview, Reject, Rejected)
	t.Add(Rejected, Redo, InProgress)
	t.Add(Rejected, Lock, Locked)
	t.Add(Locked, Resume, InProgress)
	t.Add(InProgress, Resume, InProgress) // CI kept failing; the operator resumed
	t.Add(Approved, Merge, Merged)
	for _, s := range []State{Dispatched, InProgress, InReview, Approved, Rejected, Locked} {
		t.Add(s, Abort, Aborted)
	}
	return t
}()

// QATable is dev-qa (seed 001): the seed's transitions, item by item.
var QATable = func() *fsm.Table[State, Event] {
	t := fsm.NewTable[State, Event]("dev-qa item")
	t.Add("", Create, Start)
	t.Add(Start, Begin, Initializer, DevReady)
	t.Add(Initializer, Signal, DevReady)
	t.Add(DevReady, StageOpen, Dev)
	t.Add(Dev, Signal, QAReady)
	t.Add(QAReady, StageOpen, QA)
	t.Add(QA, Signal, QAPassed, DevFeedback)
	t.Add(DevFeedback, StageOpen, Dev)
	for _, s := range []State{Start, Initializer, DevReady, Dev, QAReady, QA, DevFeedback} {
		t.Add(s, Abort, Aborted)
	}
	return t
}()

// Table returns the kind's table.
func (k Kind) Table() *fsm.Table[State, Event] {
	if k == DevQA {
		return QATable
	}
	return ReviewTable
}

// Terminal reports whether an item in s is finished.
func Terminal(s State) bool {
	return s == Merged || s == Aborted || s == QAPassed
}

// Stage is the dev-qa stage an agent works in while an item is in s, with
// the role that works it; "" when nobody works (a READY state).
func Stage(s State) (role string, working bool) {
	switch s {
	case Initializer:
		return "initializer", true
	case Dev:
		return "dev", true
	case QA:
		return "qa", true
	case DevReady, DevFeedback:
		return "dev", false
	case QAReady:
		return "qa", false
	}
	return "", false
}

// SignalStatus is what the stage's agent says of its stage (seed 001).
type SignalStatus string

// The signal statuses.
const (
	StatusComplete SignalStatus = "COMPLETE"
	StatusError    SignalStatus = "ERROR"
	StatusTimeout  SignalStatus = "TIMEOUT"
)

// ParseStatus returns a signal status, or an error naming the valid ones.
func ParseStatus(s string) (SignalStatus, error) {
	v := SignalStatus(strings.ToUpper(strings.TrimSpace(s)))
	switch v {
	case StatusComplete, StatusError, StatusTimeout:
		return v, nil
	}
	return "", fmt.Errorf("unknown status %q (valid: COMPLETE, ERROR, TIMEOUT)", s)
}

// Risk is a dev-review item's risk level; high needs the operator's
// approval before its merge.
type Risk string

// The risk levels (protocol's risk_level).
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// ParseRisk returns a risk level (medium when empty).
func ParseRisk(s string) (Risk, error) {
	switch v := Risk(strings.ToLower(strings.TrimSpace(s))); v {
	case "":
		return RiskMedium, nil
	case RiskLow, RiskMedium, RiskHigh:
		return v, nil
	}
	return "", fmt.Errorf("unknown risk %q (valid: low, medium, high)", s)
}

// Item is one work item, as the store keeps it. The JSON is the item
// object of `swarm workflow status --json`.
type Item struct {
	ID          string    `json:"id"`
	Workflow    string    `json:"workflow"`
	Kind        Kind      `json:"kind"`
	Title       string    `json:"title"`
	Criteria    []string  `json:"criteria"`
	Risk        Risk      `json:"risk"`
	Complex     bool      `json:"complex"`
	State       State     `json:"state"`
	RejectCount int       `json:"reject_count"`
	CIFailures  int       `json:"ci_failures"`
	Agent       string    `json:"agent"` // whose turn it is; "" when nobody's
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`

	// The engine's bookkeeping (not printed): the protocol messages of the
	// current round, the last inputs forwarded verbatim, the commit the
	// review was computed at, when the current stage began, and the state
	// its agent was last told of.
	Dispatch     string     `json:"-"` // msg_id of the current task_dispatch
	Request      string     `json:"-"` // msg_id of the current review_request
	ResultMsg    string     `json:"-"` // msg_id of dev's task_result being handled
	Inputs       []string   `json:"-"` // the last verdict's issues, QA's feedback, CI's tail
	ReviewCommit string     `json:"-"`
	StageAt      *time.Time `json:"-"`
	Notified     State      `json:"-"`
}

// Live reports whether the item is unfinished.
func (it Item) Live() bool { return !Terminal(it.State) }

// Entry is one transition of an item: `swarm workflow history --json`
// prints them, and dev-qa's transition_history is made of them.
type Entry struct {
	Item        string    `json:"item,omitempty"`
	From        State     `json:"from_state"`
	To          State     `json:"to_state"`
	At          time.Time `json:"timestamp"`
	TriggeredBy string    `json:"triggered_by"`
	Cause       string    `json:"cause"`
}

// Subject is an item's events' subject.
func Subject(id string) string { return id }

// ValidID reports whether id can name an item: a beads id or any short
// word without spaces.
func ValidID(id string) error {
	if id == "" {
		return fmt.Errorf("an item needs an id (--item): a beads id such as bd-12, or any word such as F-1")
	}
	if len(id) > 64 {
		return fmt.Errorf("item id %q is longer than 64 characters", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("item id %q has %q: use letters, digits, '-', '_' and '.'", id, c)
		}
	}
	return nil
}
