// Package swarm is the supervisor: one runner goroutine per agent drives the
// agent through its lifecycle, rebuilding the prompt at every BuildingPrompt,
// running sessions on the agent's engine, interrupting them for urgent mail
// and recovering after a crash.
//
// Lifecycle states are data. The transition table below is the only place
// that says which (state, event) pairs are legal and where they lead; every
// transition is persisted by compare-and-set and logged in the events table.
// The database is the truth: recovery after a crash reads levels (agent
// states, running sessions, delivered mail) and never replays events.
package swarm

import (
	"fmt"
	"slices"
)

// State is a lifecycle state. The words are part of the JSON contract.
type State string

const (
	Stopped         State = "Stopped"
	Initializing    State = "Initializing"
	BuildingPrompt  State = "BuildingPrompt"
	Spawning        State = "Spawning"
	Running         State = "Running"
	Interrupting    State = "Interrupting"
	SessionComplete State = "SessionComplete"
	Idle            State = "Idle"
	CoolingDown     State = "CoolingDown"
	Paused          State = "Paused"
)

// States lists every state.
var States = []State{Stopped, Initializing, BuildingPrompt, Spawning, Running, Interrupting, SessionComplete, Idle, CoolingDown, Paused}

// Event is what makes an agent change state.
type Event string

const (
	Start              Event = "Start"
	Recover            Event = "Recover"
	WorktreeReady      Event = "WorktreeReady"
	PromptReady        Event = "PromptReady"
	SessionStarted     Event = "SessionStarted"
	StartFailed        Event = "StartFailed"
	SessionExitedOK    Event = "SessionExitedOK"
	SessionExitedError Event = "SessionExitedError" // error or timeout
	SessionExited      Event = "SessionExited"      // any end, while Interrupting
	UrgentMail         Event = "UrgentMail"
	UrgentInjected     Event = "UrgentInjected"
	GraceExceeded      Event = "GraceExceeded"
	WorkWaiting        Event = "WorkWaiting"
	NoWork             Event = "NoWork"
	Wake               Event = "Wake"
	BackoffElapsed     Event = "BackoffElapsed"
	Pause              Event = "Pause"
	Resume             Event = "Resume"
	OperatorStop       Event = "OperatorStop"
	FatalError         Event = "FatalError"
)

// Events lists every event.
var Events = []Event{Start, Recover, WorktreeReady, PromptReady, SessionStarted, StartFailed, SessionExitedOK,
	SessionExitedError, SessionExited, UrgentMail, UrgentInjected, GraceExceeded, WorkWaiting, NoWork, Wake,
	BackoffElapsed, Pause, Resume, OperatorStop, FatalError}

type edge struct {
	from  State
	event Event
}

// table is DESIGN §3. Where a row has two targets, the runner chooses (for
// example CoolingDown or Stopped by the error thresholds).
var table = func() map[edge][]State {
	t := map[edge][]State{
		{Stopped, Start}:               {Initializing},
		{Initializing, WorktreeReady}:  {BuildingPrompt},
		{BuildingPrompt, PromptReady}:  {Spawning},
		{Spawning, SessionStarted}:     {Running},
		{Spawning, StartFailed}:        {CoolingDown, Stopped},
		{Running, SessionExitedOK}:     {SessionComplete},
		{Running, SessionExitedError}:  {CoolingDown, Stopped},
		{Running, UrgentMail}:          {Interrupting},
		{Running, UrgentInjected}:      {Running},
		{Interrupting, SessionExited}:  {BuildingPrompt},
		{Interrupting, GraceExceeded}:  {BuildingPrompt},
		{SessionComplete, WorkWaiting}: {BuildingPrompt},
		{SessionComplete, NoWork}:      {Idle},
		{Idle, Wake}:                   {BuildingPrompt},
		{CoolingDown, BackoffElapsed}:  {BuildingPrompt},
		{CoolingDown, UrgentMail}:      {BuildingPrompt},
		{Paused, Resume}:               {BuildingPrompt, Idle},
	}
	for _, s := range States {
		if s != Stopped {
			// A row left non-terminal by a crash is recovered at start-up.
			t[edge{s, Recover}] = []State{Initializing}
		}
		if s != Stopped && s != Paused {
			t[edge{s, Pause}] = []State{Paused}
		}
		t[edge{s, OperatorStop}] = []State{Stopped}
		t[edge{s, FatalError}] = []State{Stopped}
	}
	return t
}()

// IllegalTransitionError is a (state, event, target) the table does not allow.
type IllegalTransitionError struct {
	From  State
	Event Event
	To    State
}

func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("illegal transition %s --%s--> %s", e.From, e.Event, e.To)
}

// Next returns the states event may lead to from from; none means illegal.
func Next(from State, event Event) []State {
	return slices.Clone(table[edge{from, event}])
}

// Check validates one transition.
func Check(from State, event Event, to State) error {
	if !slices.Contains(table[edge{from, event}], to) {
		return &IllegalTransitionError{From: from, Event: event, To: to}
	}
	return nil
}

// Terminal reports whether the state needs no recovery after a crash.
func (s State) Terminal() bool { return s == Stopped }

// Valid reports whether s is a known state.
func (s State) Valid() bool { return slices.Contains(States, s) }
