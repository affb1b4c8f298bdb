package lifecycle

import (
	"errors"
	"slices"
	"testing"

	"github.com/swarmhq/swarm/fsm"
)

// TestTransitionTable checks every row of DESIGN §3, one case per row.
func TestTransitionTable(t *testing.T) {
	type row struct {
		from  State
		event Event
		to    []State
	}
	rows := []row{
		{Stopped, Start, []State{Initializing}},
		{Initializing, WorktreeReady, []State{BuildingPrompt}},
		{BuildingPrompt, PromptReady, []State{Spawning}},
		{BuildingPrompt, NoWork, []State{Idle}},
		{Spawning, SessionStarted, []State{Running}},
		{Spawning, StartFailed, []State{CoolingDown, Stopped}},
		{Running, SessionExitedOK, []State{SessionComplete}},
		{Running, SessionExitedError, []State{CoolingDown, Stopped}},
		{Running, UrgentMail, []State{Interrupting}},
		{Running, UrgentInjected, []State{Running}},
		{Interrupting, SessionExited, []State{BuildingPrompt}},
		{Interrupting, GraceExceeded, []State{BuildingPrompt}},
		{SessionComplete, WorkWaiting, []State{BuildingPrompt}},
		{SessionComplete, NoWork, []State{Idle}},
		{Idle, Wake, []State{BuildingPrompt}},
		{CoolingDown, BackoffElapsed, []State{BuildingPrompt}},
		{CoolingDown, UrgentMail, []State{BuildingPrompt}},
		{Paused, Resume, []State{BuildingPrompt, Idle}},
		{Initializing, NoWork, []State{Idle}},
		{Initializing, AwaitCore, []State{Waiting}},
		{Waiting, CoreReady, []State{BuildingPrompt}},
		{Held, Release, []State{BuildingPrompt}},
		{Held, Abort, []State{Idle}},
	}
	for _, s := range States {
		if s != Stopped {
			rows = append(rows, row{s, Recover, []State{Initializing}})
		}
		if s != Stopped && s != Held {
			rows = append(rows, row{s, Hold, []State{Held}})
		}
		if s != Stopped && s != Paused {
			rows = append(rows, row{s, Pause, []State{Paused}})
		}
		if s != Stopped {
			rows = append(rows, row{s, BudgetExceeded, []State{Stopped}})
		}
		rows = append(rows, row{s, OperatorStop, []State{Stopped}}, row{s, FatalError, []State{Stopped}})
	}
	legal := map[[2]string]bool{}
	for _, r := range rows {
		t.Run(string(r.from)+"/"+string(r.event), func(t *testing.T) {
			for _, to := range r.to {
				if err := Check(r.from, r.event, to); err != nil {
					t.Errorf("Check(%s, %s, %s) = %v", r.from, r.event, to, err)
				}
			}
			if got := Next(r.from, r.event); !slices.Equal(got, r.to) {
				t.Errorf("Next = %v, want %v", got, r.to)
			}
			// The other targets of a legal pair are still illegal.
			for _, to := range States {
				if !slices.Contains(r.to, to) && Check(r.from, r.event, to) == nil {
					t.Errorf("%s --%s--> %s accepted", r.from, r.event, to)
				}
			}
		})
		legal[[2]string{string(r.from), string(r.event)}] = true
	}
	n := 0
	for _, from := range States {
		for _, ev := range Events {
			if len(Next(from, ev)) > 0 {
				n++
			}
		}
	}
	if len(legal) != n {
		t.Errorf("the table has %d rows, the test knows %d", n, len(legal))
	}
}

// TestIllegalTransitionsRejected tries every (state, event) pair that is not
// in the table, against every target.
func TestIllegalTransitionsRejected(t *testing.T) {
	n := 0
	for _, from := range States {
		for _, ev := range Events {
			if len(Next(from, ev)) > 0 {
				continue
			}
			for _, to := range States {
				err := Check(from, ev, to)
				var ite *fsm.IllegalTransitionError
				if !errors.As(err, &ite) {
					t.Errorf("%s --%s--> %s: err = %v, want IllegalTransitionError", from, ev, to, err)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no illegal pairs were tried")
	}
}
