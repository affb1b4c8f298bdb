package workflow

import (
	"errors"
	"testing"

	"github.com/swarmhq/swarm/fsm"
)

// move is one (kind, from, event, to) of a table.
type move struct {
	k    Kind
	from State
	ev   Event
	to   State
}

func TestTables(t *testing.T) {
	legal := []move{
		{DevReview, "", Create, Dispatched},
		{DevReview, Dispatched, Acked, InProgress},
		{DevReview, InProgress, Result, InReview},
		{DevReview, InReview, Reject, Rejected},
		{DevReview, Rejected, Lock, Locked},
		{DevReview, Rejected, Redo, InProgress},
		{DevReview, Locked, Resume, InProgress},
		{DevReview, InReview, Approve, Approved},
		{DevReview, Approved, Merge, Merged},
		{DevQA, "", Create, Start},
		{DevQA, Start, Begin, Initializer},
		{DevQA, Start, Begin, DevReady},
		{DevQA, DevReady, StageOpen, Dev},
		{DevQA, Dev, Signal, QAReady},
		{DevQA, QA, Signal, DevFeedback},
		{DevQA, QA, Signal, QAPassed},
		{DevQA, DevFeedback, StageOpen, Dev},
	}
	for _, c := range legal {
		if err := c.k.Table().Check(c.from, c.ev, c.to); err != nil {
			t.Errorf("%s: %v", c.k, err)
		}
	}
	illegal := []move{
		{DevReview, InReview, Approve, Merged}, // a merge needs the approved state first
		{DevReview, Locked, Redo, InProgress},  // only the operator's resume unlocks
		{DevReview, Merged, Abort, Aborted},    // finished is finished
		{DevQA, Dev, Signal, QAPassed},         // dev cannot pass its own work
		{DevQA, QA, Signal, QAReady},
		{DevQA, QAPassed, Signal, DevReady},
		{DevQA, DevReady, Signal, QAReady}, // nobody works in a READY state
	}
	for _, c := range illegal {
		var ie *fsm.IllegalTransitionError
		if err := c.k.Table().Check(c.from, c.ev, c.to); !errors.As(err, &ie) {
			t.Errorf("%s %s --%s--> %s allowed", c.k, c.from, c.ev, c.to)
		}
	}
}

func TestStageAndTerminal(t *testing.T) {
	if r, w := Stage(QA); r != "qa" || !w {
		t.Errorf("Stage(QA) = %s %v", r, w)
	}
	if r, w := Stage(DevFeedback); r != "dev" || w {
		t.Errorf("Stage(DEV_FEEDBACK) = %s %v", r, w)
	}
	for _, s := range []State{Merged, Aborted, QAPassed} {
		if !Terminal(s) {
			t.Errorf("%s not terminal", s)
		}
	}
	if err := ValidID("bd-12"); err != nil {
		t.Error(err)
	}
	if err := ValidID("a b"); err == nil {
		t.Error("an id with a space passed")
	}
}
