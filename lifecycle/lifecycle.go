// Package lifecycle is the typed domain every layer shares: an agent's
// lifecycle states and events, the transition table (DESIGN §3) as data,
// and the Notice the supervisor reports to the live view, `swarm up`'s
// output and the control socket.
//
// Adding a state is a change here (the constant, States and the table) plus
// a migration that widens the agents.state CHECK; the supervisor, the TUI
// and the CLI use these constants, so the compiler finds the rest, and the
// store's conformance suite stores every state in States.
package lifecycle

import (
	"slices"
	"time"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/message"
)

// State is an agent's lifecycle state. The words are part of the JSON
// contract and of the database's CHECK constraint.
type State string

// The lifecycle states.
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
	// Held: a holding escalation is open about the agent (DESIGN §9.1).
	Held State = "Held"
	// Waiting: a team member waits for the core to be ready (DESIGN §9.5).
	Waiting State = "Waiting"
)

// States lists every state.
var States = []State{Stopped, Initializing, BuildingPrompt, Spawning, Running, Interrupting, SessionComplete, Idle, CoolingDown, Paused, Held, Waiting}

// Valid reports whether s is a known state.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Terminal reports whether the state needs no recovery after a crash.
func (s State) Terminal() bool { return s == Stopped }

// Active reports whether a session of the agent is under way (or about to
// be): the states in which the agent is doing work rather than waiting.
func (s State) Active() bool {
	switch s {
	case BuildingPrompt, Spawning, Running, Interrupting:
		return true
	}
	return false
}

// Event is what makes an agent change state.
type Event string

// The lifecycle events.
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
	Hold               Event = "Hold"
	Release            Event = "Release"
	Abort              Event = "Abort"
	AwaitCore          Event = "AwaitCore"
	CoreReady          Event = "CoreReady"
	OperatorStop       Event = "OperatorStop"
	BudgetExceeded     Event = "BudgetExceeded" // a budget with action stop tripped
	FatalError         Event = "FatalError"
)

// Events lists every event.
var Events = []Event{Start, Recover, WorktreeReady, PromptReady, SessionStarted, StartFailed, SessionExitedOK,
	SessionExitedError, SessionExited, UrgentMail, UrgentInjected, GraceExceeded, WorkWaiting, NoWork, Wake,
	BackoffElapsed, Pause, Resume, Hold, Release, Abort, AwaitCore, CoreReady, OperatorStop, BudgetExceeded, FatalError}

// Table is DESIGN §3. Where a row has two targets, the runner chooses (for
// example CoolingDown or Stopped by the error thresholds).
var Table = func() *fsm.Table[State, Event] {
	t := fsm.NewTable[State, Event]("agent")
	t.Add(Stopped, Start, Initializing)
	t.Add(Initializing, WorktreeReady, BuildingPrompt)
	t.Add(Initializing, NoWork, Idle)
	t.Add(Initializing, AwaitCore, Waiting)
	t.Add(Waiting, CoreReady, BuildingPrompt)
	t.Add(BuildingPrompt, PromptReady, Spawning)
	// A dev-qa workflow runs one agent at a time: a session that may not
	// start yet waits in Idle for its turn (DESIGN §9.3).
	t.Add(BuildingPrompt, NoWork, Idle)
	t.Add(Spawning, SessionStarted, Running)
	t.Add(Spawning, StartFailed, CoolingDown, Stopped)
	t.Add(Running, SessionExitedOK, SessionComplete)
	t.Add(Running, SessionExitedError, CoolingDown, Stopped)
	t.Add(Running, UrgentMail, Interrupting)
	t.Add(Running, UrgentInjected, Running)
	t.Add(Interrupting, SessionExited, BuildingPrompt)
	t.Add(Interrupting, GraceExceeded, BuildingPrompt)
	t.Add(SessionComplete, WorkWaiting, BuildingPrompt)
	t.Add(SessionComplete, NoWork, Idle)
	t.Add(Idle, Wake, BuildingPrompt)
	t.Add(CoolingDown, BackoffElapsed, BuildingPrompt)
	t.Add(CoolingDown, UrgentMail, BuildingPrompt)
	t.Add(Paused, Resume, BuildingPrompt, Idle)
	t.Add(Held, Release, BuildingPrompt)
	t.Add(Held, Abort, Idle)
	for _, s := range States {
		if s != Stopped {
			// A row left non-terminal by a crash is recovered at start-up.
			t.Add(s, Recover, Initializing)
		}
		if s != Stopped && s != Held {
			t.Add(s, Hold, Held)
		}
		if s != Stopped && s != Paused {
			t.Add(s, Pause, Paused)
		}
		t.Add(s, OperatorStop, Stopped)
		if s != Stopped {
			t.Add(s, BudgetExceeded, Stopped)
		}
		t.Add(s, FatalError, Stopped)
	}
	return t
}()

// Next returns the states event may lead to from from; none means illegal.
func Next(from State, event Event) []State { return Table.Next(from, event) }

// Check validates one transition.
func Check(from State, event Event, to State) error { return Table.Check(from, event, to) }

// NoticeKind says what a notice reports.
type NoticeKind string

// The kinds of notice.
const (
	NoticeTransition NoticeKind = "transition"
	NoticeMessage    NoticeKind = "message"
	NoticeInfo       NoticeKind = "info"
	NoticeActivity   NoticeKind = "activity"
	// NoticeEscalation reports an escalation raised, acked or resolved
	// (DESIGN §9.1); Escalation holds the row as it stood then.
	NoticeEscalation NoticeKind = "escalation"
	// NoticeStopped is the last notice a supervisor sends before it exits
	// normally. A watcher whose stream ends without it saw a crash.
	NoticeStopped NoticeKind = "stopped"
)

// Notice is one thing worth telling the operator: a transition, a message,
// an escalation, an agent's activity or an info line. The JSON is the wire format of the
// control socket's watch stream and of `swarm up --json` / `swarm watch
// --json`.
type Notice struct {
	At      time.Time        `json:"at"`
	Agent   string           `json:"agent,omitempty"`
	Kind    NoticeKind       `json:"kind"`
	From    State            `json:"from,omitempty"`
	To      State            `json:"to,omitempty"`
	Cause   string           `json:"cause,omitempty"`
	Seq     int64            `json:"session_seq,omitempty"`
	Message *message.Message `json:"message,omitempty"`
	Text    string           `json:"text,omitempty"`

	Escalation *escalation.Escalation `json:"escalation,omitempty"`
}
