package swarm

import (
	"context"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/promptpipe"
)

// The supervisor reaches worktrees, prompts and tasks through these small
// interfaces; wire.go adapts the real packages, and tests pass fakes.

// Worktrees gives each agent its own checkout and guards the base branch.
type Worktrees interface {
	// Preflight reports problems that must stop `swarm up` before anything
	// is created (no commits, detached HEAD, old git, ...).
	Preflight(ctx context.Context) error
	// Ensure creates or reuses the agent's worktree and returns its path
	// and branch.
	Ensure(ctx context.Context, agent string) (path, branch string, err error)
	Lock(ctx context.Context, agent, reason string) error
	Unlock(ctx context.Context, agent string) error
	// Guard records the base tip and the agent's branch before a session.
	Guard(ctx context.Context, agent string) (Guard, error)
	// RemoveStaleLock removes a git lock a crashed session left in the
	// agent's worktree, reporting whether there was one.
	RemoveStaleLock(agent string) (bool, error)
	// Push publishes the agent's branch to the git remote ([worktree]
	// push).
	Push(ctx context.Context, remote, agent string) error
}

// Guard is one session's base-branch guard (worktree.SessionGuard): made
// before the session, checked after it, also after an interrupted one.
type Guard interface {
	// Prior lists what the guard found, when it was made, about the time
	// since the agent's previous session: changes no session of it made
	// (a detached commit that landed after the last check, a move made
	// while swarm was down).
	Prior() []Finding
	// Check lists, after the session, Prior and every finding that concerns
	// the agent in what changed during it. The error is for failing to
	// look, not for what was found.
	Check(ctx context.Context) ([]Finding, error)
}

// Finding is one thing the guard found (worktree.Violation or
// worktree.Tamper).
type Finding interface {
	// Escalation is the kind of escalation it raises: "branch_violation"
	// or "repo_tamper".
	Escalation() string
	// Blame lists the agents the evidence names; empty means every agent
	// whose session overlapped the change.
	Blame() []string
	// Dedupe names the event, the same whichever agent's guard found it.
	Dedupe() string
	// String is one sentence for the operator: what happened and how to
	// undo it.
	String() string
}

// Prompts builds the prompt of a session.
type Prompts interface {
	Build(ctx context.Context, req PromptRequest) (Prompt, error)
}

// PromptRequest is what a prompt is built from.
type PromptRequest struct {
	Agent     config.Agent
	SessionID string
	Seq       int64
	Worktree  string
	Teammates []string
	// MoreTeammates counts the teammates beyond Teammates, which names at
	// most 50.
	MoreTeammates int
	Mail          []message.Message
	Interrupt     *Interrupt
	BeadsOK       bool
	// Decisions are the operator's decisions on escalations about the
	// agent that no prompt has carried yet.
	Decisions []escalation.Escalation
	// Caps is the session's capability vector, derived once when the
	// session is built; nil in a preview, which derives it the same way.
	Caps mode.Vector
	// CLI is what the agent's external CLI gives the session (an exec
	// engine, engine.CLI); nil for the in-process engines.
	CLI *mode.CLITools
	// Integration is what swarm did to the agent's branch before the
	// session and what the trial merges found (current.go); nil: nothing.
	Integration *promptpipe.Integration
}

// Prompt is a built prompt.
type Prompt struct {
	Text    string
	TaskIDs []string // ready tasks it listed
}

// Interrupt says why the previous session was cut short.
type Interrupt struct {
	Seq     int64 // the interrupted session
	Message message.Message
	Reason  string
	// At is when it was interrupted; nil means when Message was sent.
	At *time.Time
}

// Tasks is the shared `bd ready` call: the ids of ready tasks. ok is false
// when bd is not installed or did not answer.
type Tasks interface {
	ReadyIDs(ctx context.Context) (ids []string, ok bool)
	// Board returns the task board an agent's tools use, or nil.
	Board(agent, worktree string) engine.TaskBoard
}

// Engines makes the engine for an agent.
type Engines func(a config.Agent) (engine.Engine, error)

// Clock is the supervisor's time source.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) *time.Timer
}

type realClock struct{}

func (realClock) Now() time.Time                       { return time.Now() }
func (realClock) NewTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }
