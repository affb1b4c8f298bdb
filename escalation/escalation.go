// Package escalation is the operator's desk as a typed domain (DESIGN
// §9.1): an escalation's kinds, severities and decisions, its state machine
// (open → acked → resolved) as an fsm table, the draft every trigger raises
// and the row the store keeps, whose JSON is the contract `swarm
// escalations --json` and the notify hooks print.
//
// It is a domain leaf: storage lives in the mailbox, raising and deciding
// in the supervisor (package swarm), so every trigger (the CLI, the
// engines' escalate tool, the base-branch guard, the error thresholds, the
// stalled check) goes through the same rules.
package escalation

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/message"
)

// Kind says why an escalation was raised. The words are part of the JSON
// contract and of the database's CHECK constraint.
type Kind string

// The kinds of DESIGN §9.1. Not every kind has a trigger yet; the store
// accepts them all so that later triggers need no migration.
const (
	KindAgent             Kind = "agent"              // swarm escalate, or the escalate tool
	KindAckTimeout        Kind = "ack_timeout"        // a protocol message not acknowledged in time
	KindBranchViolation   Kind = "branch_violation"   // the base-branch guard fired
	KindHallucinationLock Kind = "hallucination_lock" // a work item reached its reject limit
	KindStageTimeout      Kind = "stage_timeout"      // a workflow stage ran past its timeout
	KindCIFailure         Kind = "ci_failure"         // a workflow's CI failed too often
	KindStalled           Kind = "stalled"            // a running session shows no activity
	KindErrors            Kind = "errors"             // an agent stopped at its error thresholds
	KindProtocolBreach    Kind = "protocol_breach"    // a team launch failed its handshake
	KindBudget            Kind = "budget"             // a token budget tripped
	KindRepoTamper        Kind = "repo_tamper"        // a session changed the shared .git
	KindApproval          Kind = "approval"           // a step needs the operator's yes
	KindReservation       Kind = "reservation"        // a session committed under a teammate's exclusive reservation
)

// Kinds lists every kind.
var Kinds = []Kind{KindAgent, KindAckTimeout, KindBranchViolation, KindHallucinationLock, KindStageTimeout,
	KindCIFailure, KindStalled, KindErrors, KindProtocolBreach, KindBudget, KindRepoTamper, KindApproval, KindReservation}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// Severity is how much an escalation matters: info < warning < critical.
type Severity string

// The severities, least severe first.
const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

// Severities lists every severity, least severe first.
var Severities = []Severity{Info, Warning, Critical}

// Valid reports whether s is a known severity.
func (s Severity) Valid() bool { return slices.Contains(Severities, s) }

// Rank orders severities: 0 for info, 2 for critical, -1 when unknown.
func (s Severity) Rank() int { return slices.Index(Severities, s) }

// ParseSeverity returns the named severity, or an error naming the valid ones.
func ParseSeverity(s string) (Severity, error) {
	v := Severity(strings.ToLower(strings.TrimSpace(s)))
	if !v.Valid() {
		return "", fmt.Errorf("unknown severity %q (valid: info, warning, critical)", s)
	}
	return v, nil
}

// State is where an escalation stands.
type State string

// The states: open until the operator sees it (acked) or decides it
// (resolved). Open and acked are both unresolved: a hold lasts until the
// escalation is resolved.
const (
	Open     State = "open"
	Acked    State = "acked"
	Resolved State = "resolved"
)

// States lists every state.
var States = []State{Open, Acked, Resolved}

// Unresolved reports whether the escalation still waits for a decision.
func (s State) Unresolved() bool { return s == Open || s == Acked }

// Decision is how the operator resolved an escalation: stored exactly as
// one of these words.
type Decision string

// The decisions.
const (
	Resume  Decision = "resume"  // release the hold; the agent carries on with the note
	Abort   Decision = "abort"   // end the held work; a held agent goes Idle
	Approve Decision = "approve" // yes to an approval; releases like resume
	Reject  Decision = "reject"  // no to an approval; ends like abort
)

// Decisions lists every decision.
var Decisions = []Decision{Resume, Abort, Approve, Reject}

// Valid reports whether d is a known decision.
func (d Decision) Valid() bool { return slices.Contains(Decisions, d) }

// Releases reports whether the decision lets a held agent carry on
// (resume, approve) rather than end its held work (abort, reject).
func (d Decision) Releases() bool { return d == Resume || d == Approve }

// Event is what moves an escalation: it is raised, acked, or decided
// (one event per decision).
type Event string

// The events besides the decisions, which are events too (Event(d)).
const (
	Raise Event = "raise"
	Ack   Event = "ack"
	// Clear resolves an escalation whose cause is gone (a budget no
	// longer spent), by swarm rather than the operator: it has no
	// decision, and the event's cause says why.
	Clear Event = "clear"
)

// Table is the escalation machine: raised (from nothing) to open, open to
// acked, and open or acked to resolved by one of the decisions, or by
// swarm when its cause is gone.
var Table = func() *fsm.Table[State, Event] {
	t := fsm.NewTable[State, Event]("escalation")
	t.Add("", Raise, Open)
	t.Add(Open, Ack, Acked)
	t.Add(Open, Clear, Resolved)
	t.Add(Acked, Clear, Resolved)
	for _, d := range Decisions {
		t.Add(Open, Event(d), Resolved)
		t.Add(Acked, Event(d), Resolved)
	}
	return t
}()

// Escalation is a stored escalation. Its JSON is the contract of `swarm
// escalations --json`, `swarm escalation show --json` and the notify
// hooks' payload (plus "event" there).
type Escalation struct {
	ID        int64           `json:"id"`
	Kind      Kind            `json:"kind"`
	Severity  Severity        `json:"severity"`
	State     State           `json:"state"`
	Hold      bool            `json:"hold"`
	Agent     *string         `json:"agent"` // the agent it is about; nil when about nothing in particular
	Ref       *string         `json:"ref"`   // what else it is about: msg:<id>, item:<id>, session:<agent>-<seq>
	Summary   string          `json:"summary"`
	Details   json.RawMessage `json:"details"` // a JSON object; null when none
	DedupeKey string          `json:"dedupe_key"`
	Count     int             `json:"count"` // how many times it was raised while unresolved
	CreatedAt time.Time       `json:"created_at"`
	AckedAt   *time.Time      `json:"acked_at"`
	// ResolvedAt is set when it is resolved; Decision with it when the
	// operator decided (nil when swarm cleared it: escalation.Clear).
	ResolvedAt *time.Time `json:"resolved_at"`
	Decision   *Decision  `json:"decision"`
	Note       string     `json:"note"` // the operator's note with the ack or the decision

	// Notified is the notifier's bookkeeping, so a restart does not send
	// again what was sent.
	Notified Notified `json:"-"`
	// ShownIn is the agent's session whose prompt carried the decision;
	// 0 while it has not been shown (or there is nothing to show).
	ShownIn int64 `json:"-"`
}

// Notified records what the notifier sent about an escalation.
type Notified struct {
	// State is the last state whose event was sent ("" for none): open
	// after escalation.opened, then acked or resolved.
	State          State
	At             *time.Time // when escalation.opened was sent
	Reminders      int
	LastRemindedAt *time.Time
}

// AgentName is the agent the escalation is about, "" when none.
func (e Escalation) AgentName() string {
	if e.Agent == nil {
		return ""
	}
	return *e.Agent
}

// RefText is the escalation's ref, "" when none.
func (e Escalation) RefText() string {
	if e.Ref == nil {
		return ""
	}
	return *e.Ref
}

// Holds reports whether the escalation holds its agent now: a holding
// escalation that is not resolved, about an agent.
func (e Escalation) Holds() bool { return e.Hold && e.State.Unresolved() && e.Agent != nil }

// About names the agent the escalation is about, marked when it holds
// it ("backend (held)"); empty when it is about no agent.
func (e Escalation) About() string {
	if e.Agent == nil {
		return ""
	}
	if e.Holds() {
		return *e.Agent + " (held)"
	}
	return *e.Agent
}

// Subject is the escalation's subject in the events table.
func Subject(id int64) string { return fmt.Sprint(id) }

// Limits on what a draft may carry.
const (
	MaxSummary = 1000     // bytes
	MaxDetails = 64 << 10 // bytes of JSON
	MaxNote    = 4 << 10  // bytes
	MaxRef     = 200      // bytes
	// MaxDetailsDepth is how deep the details' JSON may nest: deeper
	// output breaks jq and other readers of --json.
	MaxDetailsDepth = 64
)

// DetailsDepthError refuses details that nest deeper than MaxDetailsDepth.
type DetailsDepthError struct{ Depth int }

func (e *DetailsDepthError) Error() string {
	return fmt.Sprintf("the details nest %d levels deep, more than %d: flatten them", e.Depth, MaxDetailsDepth)
}

// CheckDetailsDepth refuses JSON nested deeper than MaxDetailsDepth
// (*DetailsDepthError). It only counts brackets outside strings, so it
// is cheap on any input; whether the JSON is valid is checked elsewhere.
func CheckDetailsDepth(raw []byte) error {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	if deepest > MaxDetailsDepth {
		return &DetailsDepthError{Depth: deepest}
	}
	return nil
}

// Draft is an escalation about to be raised.
type Draft struct {
	Kind     Kind
	Severity Severity // empty: the kind's default
	Hold     bool
	Agent    string // "" when about no agent
	Ref      string
	Summary  string
	Details  json.RawMessage // a JSON object, or empty
	// DedupeKey groups repeats: a draft whose key matches an unresolved
	// escalation only counts it. Empty: DefaultDedupeKey.
	DedupeKey string
}

// DefaultSeverity is the severity of a kind when the trigger names none
// (DESIGN §9.1).
func DefaultSeverity(k Kind) Severity {
	switch k {
	case KindAgent, KindStageTimeout, KindCIFailure, KindReservation:
		return Warning
	case KindApproval:
		return Info
	}
	return Critical
}

// DefaultDedupeKey is kind, agent, ref and summary, as a JSON array so no
// two different drafts share one.
func DefaultDedupeKey(k Kind, agent, ref, summary string) string {
	b, _ := json.Marshal([]string{string(k), agent, ref, summary})
	return string(b)
}

// Normalize fills the defaults: the kind's severity, trimmed text and the
// default dedupe key.
func (d Draft) Normalize() Draft {
	d.Summary = strings.TrimSpace(d.Summary)
	d.Ref = strings.TrimSpace(d.Ref)
	if d.Severity == "" {
		d.Severity = DefaultSeverity(d.Kind)
	}
	if len(d.Details) > 0 && strings.TrimSpace(string(d.Details)) == "null" {
		d.Details = nil
	}
	if d.DedupeKey == "" {
		d.DedupeKey = DefaultDedupeKey(d.Kind, d.Agent, d.Ref, d.Summary)
	}
	return d
}

// Validate checks a normalized draft.
func (d Draft) Validate() error {
	var problems []string
	if !d.Kind.Valid() {
		problems = append(problems, fmt.Sprintf("unknown kind %q", d.Kind))
	}
	if !d.Severity.Valid() {
		problems = append(problems, fmt.Sprintf("unknown severity %q (valid: info, warning, critical)", d.Severity))
	}
	switch {
	case d.Summary == "":
		problems = append(problems, "the summary is empty: say in one line what needs the operator")
	case len(d.Summary) > MaxSummary:
		problems = append(problems, fmt.Sprintf("the summary is %d bytes, more than %d: put the rest in the details", len(d.Summary), MaxSummary))
	case !utf8.ValidString(d.Summary):
		problems = append(problems, "the summary is not valid UTF-8")
	}
	if d.Agent != "" && (d.Agent == message.Operator || !message.ValidName(d.Agent)) {
		problems = append(problems, fmt.Sprintf("%q is not an agent name", d.Agent))
	}
	if len(d.Ref) > MaxRef {
		problems = append(problems, fmt.Sprintf("the ref is longer than %d bytes", MaxRef))
	}
	if len(d.Details) > 0 {
		var obj map[string]any
		switch {
		case len(d.Details) > MaxDetails:
			problems = append(problems, fmt.Sprintf("the details are %d bytes of JSON, more than %d", len(d.Details), MaxDetails))
		case CheckDetailsDepth(d.Details) != nil:
			problems = append(problems, CheckDetailsDepth(d.Details).Error())
		case json.Unmarshal(d.Details, &obj) != nil || obj == nil:
			problems = append(problems, `the details must be a JSON object, such as {"file": "api/users.go"}`)
		}
	}
	if d.Hold && d.Agent == "" {
		problems = append(problems, "a hold needs an agent to hold: raise it from an agent's session (or name the agent)")
	}
	if len(problems) > 0 {
		return errors.New("escalation: " + strings.Join(problems, "; "))
	}
	return nil
}

// Less orders escalations the way `swarm escalations` lists them: the
// most severe first, then the newest first.
func Less(a, b Escalation) bool {
	if ra, rb := a.Severity.Rank(), b.Severity.Rank(); ra != rb {
		return ra > rb
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// Sort orders es as Less does.
func Sort(es []Escalation) {
	slices.SortStableFunc(es, func(a, b Escalation) int {
		switch {
		case Less(a, b):
			return -1
		case Less(b, a):
			return 1
		}
		return 0
	})
}

// Notification events: what a notify hook receives in "event" (and in
// $SWARM_EVENT).
const (
	EventOpened   = "escalation.opened"
	EventReminder = "escalation.reminder"
	EventAcked    = "escalation.acked"
	EventResolved = "escalation.resolved"
)

// Payload is what a notify hook receives for event: the escalation's JSON
// fields exactly as `swarm escalations --json` prints them, plus "event".
func Payload(e Escalation, event string) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	ev, _ := json.Marshal(event)
	m["event"] = ev
	return json.Marshal(m)
}
