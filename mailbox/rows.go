package mailbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// Spawned is an agent that `swarm spawn` added at run time.
type Spawned struct {
	Name      string
	Role      string
	Mode      string // a mode or profile; empty: [defaults]
	Strategy  string
	Engine    string
	Task      string // the task it was spawned for, if any
	Ephemeral bool   // it retires when it has no work left
	// Configured says swarm.toml configures the name: the agent runs with
	// its configured settings, and the fields above are not used.
	Configured bool
	SpawnedBy  string
	SpawnedAt  time.Time
	RetiredAt  *time.Time
}

// Retired reports whether the agent was retired.
func (s Spawned) Retired() bool { return s.RetiredAt != nil }

// Reservation is an agent's advisory lease on the files a glob matches
// (DESIGN §14): shown to teammates, and when exclusive, a commit of
// another agent's session to one of those files raises a reservation
// escalation. Its JSON is what `swarm reservations --json` prints.
type Reservation struct {
	ID        int64  `json:"id"`
	Agent     string `json:"agent"`
	Glob      string `json:"glob"`
	Exclusive bool   `json:"exclusive"`
	Reason    string `json:"reason"`
	// CreatedAt is when it was taken (refreshing keeps it).
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when it lapses; nil until released.
	ExpiresAt  *time.Time `json:"expires_at"`
	ReleasedAt *time.Time `json:"released_at"`
}

// Live reports whether the reservation holds at now: not released and not
// expired.
func (r Reservation) Live(now time.Time) bool {
	return r.ReleasedAt == nil && (r.ExpiresAt == nil || r.ExpiresAt.After(now))
}

// Feed reports changes made by other processes. One goroutine owns it.
type Feed interface {
	// Wait blocks until something changed since the feed was made or
	// since the previous Wait returned, or ctx ends.
	Wait(ctx context.Context) error
	Close() error
}

// Agent is an agent's row.
type Agent struct {
	Name              string
	State             lifecycle.State
	SessionSeq        int64
	Mode              string
	Engine            string
	Branch            string
	Worktree          string
	ConsecutiveErrors int
	TotalErrors       int
	Tokens            int64
	Nudges            int
	StateSince        *time.Time
	HeartbeatAt       *time.Time
	Activity          string
}

// AgentInfo is the part of an agent's row that comes from configuration.
type AgentInfo struct {
	Name, Mode, Engine, Branch, Worktree string
}

// SessionState is how a session stands or ended.
type SessionState string

// Session states.
const (
	SessionRunning     SessionState = "running"
	SessionCompleted   SessionState = "completed"
	SessionInterrupted SessionState = "interrupted"
	SessionFailed      SessionState = "failed"
	SessionTimeout     SessionState = "timeout"
	SessionCrashed     SessionState = "crashed"
)

// SessionStates lists every session state.
var SessionStates = []SessionState{SessionRunning, SessionCompleted, SessionInterrupted, SessionFailed, SessionTimeout, SessionCrashed}

// Session is a session's row.
type Session struct {
	ID        int64
	Agent     string
	Seq       int64
	State     SessionState
	Engine    string
	StartedAt time.Time
	EndedAt   *time.Time
	Prompt    string
	Tasks     []string
	TokensIn  int64 // input tokens, prompt-cache writes and reads apart
	TokensOut int64
	// CacheWrite and CacheRead are the session's prompt-cache input tokens.
	CacheWrite int64
	CacheRead  int64
	// CostUSD is the session's cost in US dollars; nil while unknown (no
	// price for its model, or recorded before costs were), never 0 for it.
	CostUSD *float64
	Pgids   []int
	Error   string
	// Capabilities is the vector derived when the session started; nil
	// for sessions recorded before capabilities were stored.
	Capabilities mode.Vector
}

// Usage is the tokens of some sessions, the input kinds apart, and their
// cost: CostUSD sums the sessions whose cost is known; Unpriced counts the
// others, whose cost is unknown (so CostUSD is then a lower bound).
type Usage struct {
	Input      int64   `json:"input"`
	Output     int64   `json:"output"`
	CacheWrite int64   `json:"cache_write"`
	CacheRead  int64   `json:"cache_read"`
	CostUSD    float64 `json:"cost_usd"`
	Unpriced   int64   `json:"unpriced_sessions"`
}

// Work is what a budget counts: input, output and cache writes, not cache
// reads (DESIGN §9.6), the same rule as the agent's lifetime tokens.
func (u Usage) Work() int64 { return u.Input + u.Output + u.CacheWrite }

// Add sums usage.
func (u Usage) Add(o Usage) Usage {
	return Usage{Input: u.Input + o.Input, Output: u.Output + o.Output, CacheWrite: u.CacheWrite + o.CacheWrite, CacheRead: u.CacheRead + o.CacheRead,
		CostUSD: u.CostUSD + o.CostUSD, Unpriced: u.Unpriced + o.Unpriced}
}

// SessionStart is a session about to run: its prompt, the ready task ids
// the prompt listed and its capability vector.
type SessionStart struct {
	Agent        string
	Seq          int64
	Engine       string
	Prompt       string
	Tasks        []string
	Capabilities mode.Vector
}

// ReportKind is what a report is about.
type ReportKind string

// Report kinds: three about a task, one about the session.
const (
	ReportProgress ReportKind = "progress"
	ReportBlocked  ReportKind = "blocked"
	ReportComplete ReportKind = "complete"
	ReportSession  ReportKind = "session"
)

// ReportKinds lists every report kind.
var ReportKinds = []ReportKind{ReportProgress, ReportBlocked, ReportComplete, ReportSession}

// TaskLevel reports whether the kind is about a task.
func (k ReportKind) TaskLevel() bool { return k != ReportSession }

// Report is what an agent said about a task or its session.
type Report struct {
	ID         int64      `json:"id"`
	Agent      string     `json:"agent"`
	SessionSeq int64      `json:"session_seq,omitempty"`
	Kind       ReportKind `json:"kind"`
	Task       string     `json:"task,omitempty"`
	Message    string     `json:"message"`
	At         time.Time  `json:"at"`
}

// Check is the rule every store applies before it keeps a report: a known
// kind, a task exactly when the kind is about one, and a message.
func (r Report) Check() error {
	if !slices.Contains(ReportKinds, r.Kind) {
		return fmt.Errorf("report of %s: unknown kind %q", r.Agent, r.Kind)
	}
	if r.Kind.TaskLevel() != (r.Task != "") {
		return fmt.Errorf("report of %s: a %s report needs a task exactly when it is about one", r.Agent, r.Kind)
	}
	if r.Message == "" {
		return fmt.Errorf("report of %s: empty message", r.Agent)
	}
	return nil
}

// SessionEnd is how a session ended.
type SessionEnd struct {
	Agent     string
	Seq       int64
	State     SessionState // completed, interrupted, failed, timeout or crashed
	TokensIn  int64        // input tokens, prompt-cache writes and reads apart
	TokensOut int64
	// CacheWrite and CacheRead are prompt-cache input tokens. The agent's
	// lifetime tokens count TokensIn + TokensOut + CacheWrite (work
	// tokens): cache reads are not counted.
	CacheWrite int64
	CacheRead  int64
	// CostUSD is what the session cost in US dollars; nil when unknown.
	CostUSD *float64
	Error   string
}

// Recovered is what RecoverAgent found and fixed for one agent.
type Recovered struct {
	Agent    string
	Sessions []Session // sessions left running, now crashed
	Requeued int64     // delivered mail queued again
}

// Filter selects messages for Inbox.
type Filter struct {
	State message.State // empty: every state
	Sent  bool          // the messages name sent, instead of received
	Limit int           // the newest Limit messages; 0 means all
	// From keeps only the messages this name sent (to the listed
	// recipient); empty: every sender.
	From string
	// Kind keeps only messages of this kind; empty: every kind.
	Kind message.Kind
	// Grep keeps only messages whose body contains this text, exactly
	// (case-sensitive, as grep); empty: every body.
	Grep string
}

// EventFilter selects events.
type EventFilter struct {
	Agent   string // only this agent's events
	SinceID int64  // events with id > SinceID
	Limit   int    // newest Limit; 0 means all
	// Kind keeps only events about subjects of this kind; empty: all.
	Kind fsm.SubjectKind
	// Subjects keeps only events about these subjects (with Kind); empty:
	// all.
	Subjects []string
}

// EscalationFilter selects escalations. The zero filter lists the
// unresolved ones (open and acked).
type EscalationFilter struct {
	All   bool   // resolved ones too
	Agent string // only those about this agent
	// Unshown lists instead the resolved escalations about Agent whose
	// decision no prompt has carried yet.
	Unshown bool
	// Unsettled adds to the unresolved ones those resolved after an
	// announcement of theirs was sent (notified state open or acked): what
	// a notifier may still have to send.
	Unsettled bool
}

// Counts is how much mail an agent has waiting.
type Counts struct {
	Queued    int
	Delivered int
	Urgent    int // queued urgent mail
	Waking    int // queued mail of a kind that wakes an idle agent
}

// Add counts n undone messages of one (state, kind, protocol type,
// urgency) group; pt is "" for mail that is not protocol. The rule of which
// mail wakes an agent lives in message.Wakes, not in each backend's SQL.
func (c *Counts) Add(state message.State, kind message.Kind, pt string, urgency message.Urgency, n int) {
	switch state {
	case message.Queued:
		c.Queued += n
		if urgency == message.Urgent {
			c.Urgent += n
		}
		if message.Wakes(kind, pt) {
			c.Waking += n
		}
	case message.Delivered:
		c.Delivered += n
	}
}
