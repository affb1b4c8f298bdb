// Package merge is the merge queue (DESIGN §14) as a typed domain: a
// candidate (an agent's branch at a commit, waiting to land on the base
// branch), its states and events, the candidates' fsm table, and the
// bisection of a failing batch as a pure function.
//
// A candidate is queued, claimed for testing (alone or in a batch), and
// then landed, or sent back to its agent (conflict, failed), or cancelled
// by the operator. A candidate whose base moved between its test and its
// landing goes back to queued and is tested again, never forced.
package merge

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/internal/text"
)

// State is where a candidate stands. The words are part of the JSON
// contract and of the database's CHECK constraint.
type State string

// The candidate states.
const (
	Queued    State = "queued"
	Testing   State = "testing"
	Landed    State = "landed"
	Conflict  State = "conflict"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// States lists every state.
var States = []State{Queued, Testing, Landed, Conflict, Failed, Cancelled}

// Valid reports whether s is a known state.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Live reports whether the candidate is still in the queue.
func (s State) Live() bool { return s == Queued || s == Testing }

// Event is what moves a candidate.
type Event string

// The candidate events.
const (
	Enqueue   Event = "Enqueue"   // swarm land, an approved item, QA_PASSED
	Claim     Event = "Claim"     // the queue took it into a batch to test
	Land      Event = "Land"      // the base branch holds it
	Conflicts Event = "Conflicts" // it does not merge on the base
	Fail      Event = "Fail"      // [merge] ci failed for it
	Retest    Event = "Retest"    // the base moved before the landing, or a crash: test again
	Cancel    Event = "Cancel"    // the operator took it out
)

// Table is the candidates' machine.
var Table = func() *fsm.Table[State, Event] {
	t := fsm.NewTable[State, Event]("merge candidate")
	t.Add("", Enqueue, Queued)
	t.Add(Queued, Claim, Testing)
	t.Add(Testing, Land, Landed)
	t.Add(Testing, Conflicts, Conflict)
	t.Add(Testing, Fail, Failed)
	t.Add(Testing, Retest, Queued)
	t.Add(Queued, Cancel, Cancelled)
	t.Add(Testing, Cancel, Cancelled)
	return t
}()

// Source says where a candidate came from.
type Source string

// The sources.
const (
	FromLand Source = "land" // swarm land
	FromItem Source = "item" // an approved dev-review item (its reviewed commit)
	FromQA   Source = "qa"   // a dev-qa item at QA_PASSED ([merge] after_qa)
)

// Valid reports whether s is a known source.
func (s Source) Valid() bool { return s == FromLand || s == FromItem || s == FromQA }

// Candidate is one stored candidate row. State moves only through Table;
// the rest is saved beside it.
type Candidate struct {
	ID     int64  `json:"id"`
	Agent  string `json:"agent"`
	Commit string `json:"commit"`
	Source Source `json:"source"`
	Item   string `json:"item,omitempty"` // the workflow item, for item and qa
	By     string `json:"requested_by"`   // operator, or <agent>/<session>
	State  State  `json:"state"`
	// Reason says why it left the queue other than landed.
	Reason string   `json:"reason,omitempty"`
	Files  []string `json:"files,omitempty"`   // the conflicting files
	CITail string   `json:"ci_tail,omitempty"` // the failing CI output's tail
	// Batch names the batch that tested it last (the landing's key).
	Batch string `json:"batch,omitempty"`
	// CIRuns counts the CI runs this candidate was part of.
	CIRuns int `json:"ci_runs"`
	// Claim is the holder that claimed it for testing ("" while queued):
	// two hosts never test the same candidate.
	Claim     string     `json:"claim,omitempty"`
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	// LandedAs is the commit on the base branch that holds it.
	LandedAs  string    `json:"landed_commit,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Subject is the events' subject of candidate id.
func Subject(id int64) string { return strconv.FormatInt(id, 10) }

// Key names the landing journal entry of a batch whose first candidate is
// id and whose attempt is n ("merge-12-1").
func Key(first int64, attempt int) string { return fmt.Sprintf("merge-%d-%d", first, attempt) }

// Short is a commit's first 10 characters, for messages.
func Short(commit string) string { return text.Short(commit, 10) }
