// Package promptpipe builds the prompt an agent gets at the start of every
// session: up to 14 numbered sections (DESIGN §5), rebuilt from nothing
// each time so the agent always sees the current mail, tasks and
// repository state.
//
// The work is split in two:
//
//   - Gathering (Builder.Gather) reads the environment: the kernel's
//     release (`uname -r`, read once per process), `git status --short`, the last five commits, AGENTS.md at the repo root and
//     `bd ready`. Sources run in parallel (errgroup), each under its own
//     timeout (git_timeout, also used for uname; bd_timeout for bd). A
//     source that is slow, missing or failing leaves its field or section
//     out and is logged; it never fails the build. Every child process runs
//     through proc (own process group, killed whole on timeout, WaitDelay
//     set).
//   - Rendering (Render) is pure: given the same PromptContext, Sources,
//     configuration and clock it returns the same text, which is what the
//     golden files test.
//
// Design decisions:
//
//   - Recent commits are read in-process with go-git (0.2 ms against
//     2.5 ms for a `git log` process), opened with EnableDotGitCommonDir so
//     linked worktrees work; go-git takes no context, so the read runs in a
//     goroutine that the timeout abandons. `git status` uses the git CLI
//     (go-git's Status is ~10× slower) with GIT_OPTIONAL_LOCKS=0, so
//     building a prompt never takes the index lock from under an agent.
//   - Tasks come through the TaskSource interface (beads.Client or, in the
//     supervisor, the singleflight beads.Shared). bd not installed or not
//     initialised is logged at debug/info level only: it is a normal setup,
//     not a failure. Tasks are sorted by priority then id, because bd's
//     order among equal priorities changes between runs.
//   - Mail is message.Message (not the mailbox, which would pull SQLite
//     into this package). Messages are sorted urgent first, then oldest.
//   - Embedded documents (role text, AGENTS.md, message bodies) have their
//     Markdown headings moved down two levels, outside code fences, so they
//     nest under their section and can never pose as one of the prompt's
//     own `## ` sections.
//   - TokensEstimate is characters / 4, the rule the size budget uses: the
//     base prompt (no AGENTS.md, mail or tasks) stays under about 2,000.
package promptpipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// Section numbers, fixed by DESIGN §5 whether or not a section is present.
const (
	SecIdentity            = 1
	SecAgentRole           = 2
	SecModeInstructions    = 3
	SecWorkflowContext     = 4
	SecProjectInstructions = 5
	SecCoreMandates        = 6
	SecDoingTasks          = 7
	SecToolUsagePolicy     = 8
	SecSwarmWorkflow       = 9
	SecToneStyle           = 10
	SecEnvironment         = 11
	SecMessages            = 12
	SecTasks               = 13
	SecSessionContext      = 14
)

// Titles are the section headers without "## ", indexed by number.
var Titles = [...]string{
	SecIdentity:            "Identity",
	SecAgentRole:           "Agent Role",
	SecModeInstructions:    "Mode Instructions",
	SecWorkflowContext:     "Workflow Context",
	SecProjectInstructions: "Project Instructions",
	SecCoreMandates:        "Core Mandates",
	SecDoingTasks:          "Doing Tasks",
	SecToolUsagePolicy:     "Tool Usage Policy",
	SecSwarmWorkflow:       "Swarm Workflow",
	SecToneStyle:           "Tone & Style",
	SecEnvironment:         "Environment",
	SecMessages:            "Messages from teammates",
	SecTasks:               "Available Tasks (from beads)",
	SecSessionContext:      "Session Context",
}

// PromptContext is what the caller knows about the agent and its session.
type PromptContext struct {
	Agent    string
	Role     string // the role text, already read from an @file
	TreeRoot string // execute/tree: the beads task whose subtree the agent owns
	Mode     mode.Mode
	Strategy mode.Strategy // "" means the mode's default
	// Caps is the session's capability vector, derived once when it
	// started; nil derives it from Mode and Strategy (a preview).
	Caps mode.Vector
	// CLI is what an external CLI agent gives the session (an exec
	// engine); nil for the in-process engines, whose tools the vector
	// names.
	CLI        *mode.CLITools
	SessionID  string // empty in a preview
	SessionSeq int64  // 1, 2, … per agent
	DBPath     string // the mailbox database
	Worktree   string // where the agent works; the environment is read here
	Root       string // the repository root, for AGENTS.md; empty means Worktree
	Branch     string // the agent's branch; empty means swarm/<agent>
	BaseBranch string // the branch agents must not commit to, if known
	Teammates  []string
	// MoreTeammates counts the teammates not named in Teammates (a big
	// swarm names only some); the identity section says how many.
	MoreTeammates int
	// Beads reports whether bd is installed, so the mode's beads tools are
	// offered. It must agree with what the engine offers.
	Beads     bool
	Workflow  *WorkflowContext  // section 4 appears only when set
	Interrupt *InterruptContext // set when the last session was interrupted
	// Decisions are the operator's answers to escalations about the agent
	// that no earlier prompt carried: section 14 shows them under
	// "### Operator Decision".
	Decisions []OperatorDecision
	// Messages is the mail to show: the queued mail that is delivered into
	// this session. Shown > 0 marks mail an earlier, unfinished session saw.
	Messages []message.Message
	// Integration is what swarm did to the agent's branch before the
	// session and what its trial merges found; the Environment section
	// names it. Nil shows nothing.
	Integration *Integration
	// Reservations are the file reservations live when the prompt is
	// built (DESIGN §14), the agent's own included: Environment lists
	// them.
	Reservations []Reservation
}

// Reservation is one live file reservation: Agent holds the files Glob
// matches until Until (zero: until released).
type Reservation struct {
	Agent     string
	Glob      string
	Exclusive bool
	Until     time.Time
	Reason    string
}

// WorkflowContext places the agent in a workflow (DESIGN §9.3): the
// workflow and stage, the item and its criteria, the inputs forwarded
// verbatim (the last verdict's issues, QA's feedback, CI's output), the
// constraints and the exact commands that end the stage.
type WorkflowContext struct {
	Workflow    string // the [[workflow]]'s name; "" renders no header line
	Kind        string // dev-review or dev-qa
	Stage       string
	Item        string
	Title       string
	Risk        string
	Criteria    []string
	Inputs      []string
	Constraints []string
	Commands    []string
}

// InterruptContext says why the previous session was cut short.
type InterruptContext struct {
	MessageID int64 // the urgent message, if one caused it
	From      string
	Body      string
	When      time.Time // when the session was interrupted
	Reason    string    // e.g. "urgent message"
}

// OperatorDecision is the operator's answer to one escalation about the
// agent (DESIGN §9.1).
type OperatorDecision struct {
	Escalation int64  // its id
	Kind       string // agent, branch_violation, ...
	Summary    string
	Decision   string // resume, abort, approve or reject
	Note       string // the operator's note; may be empty
	When       time.Time
}

// EnvironmentInfo is the state of the machine and the worktree. A field
// whose source failed is left empty (or its Has flag false) and not shown.
type EnvironmentInfo struct {
	Platform      string // GOOS/GOARCH
	OSVersion     string // uname -r
	Shell         string // $SHELL
	Cwd           string
	GitStatus     string // git status --short; empty when clean
	HasGitStatus  bool
	RecentCommits []string // "<short hash> <subject>", newest first
	HasCommits    bool
	Date          time.Time
}

// Sources is everything gathered for one prompt besides the context.
type Sources struct {
	Env EnvironmentInfo
	// ProjectInstructions is AGENTS.md at the repo root; empty when the
	// file is missing or blank.
	ProjectInstructions string
	// Tasks is `bd ready`; nil when bd is missing, slow or failing.
	Tasks []beads.Issue
	// Graph is `bd list` (every open task with its dependencies), read
	// for the dag, intelligent-batching and tree strategies; HasGraph
	// says bd answered.
	Graph    []beads.Issue
	HasGraph bool
}

// Section is one numbered section of a prompt.
type Section struct {
	Number int    `json:"number"`
	Title  string `json:"title"` // without "## "
	Body   string `json:"body"`
}

// Prompt is a rendered prompt.
type Prompt struct {
	Text           string    `json:"text"`
	Sections       []Section `json:"sections"`
	TokensEstimate int       `json:"tokens_estimate"`
	// TaskIDs are the ready tasks listed, so the supervisor can tell new
	// tasks from ones an earlier session already saw.
	TaskIDs []string `json:"task_ids,omitempty"`
}

// Section returns the section with the given number, if present.
func (p Prompt) Section(n int) (Section, bool) {
	for _, s := range p.Sections {
		if s.Number == n {
			return s, true
		}
	}
	return Section{}, false
}

// TaskSource lists ready tasks: beads.Client, or beads.Shared to run one
// bd for many builders. beads.ErrNotInstalled means no tasks.
type TaskSource interface {
	Ready(ctx context.Context) ([]beads.Issue, error)
}

// Builder gathers sources and renders prompts. Its zero value works: no
// tasks, the real clock, slog.Default and the default timeouts.
type Builder struct {
	Tasks  TaskSource // nil: no task section
	Config config.Prompt
	Now    func() time.Time
	Logger *slog.Logger
	Getenv func(string) string // reads $SHELL; nil means os.Getenv
}

// Default timeouts, used when Config leaves them zero.
const (
	DefaultGitTimeout = 2 * time.Second
	DefaultBDTimeout  = 5 * time.Second
)

func (b *Builder) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

func (b *Builder) logger() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}

func (b *Builder) getenv(k string) string {
	if b.Getenv != nil {
		return b.Getenv(k)
	}
	return os.Getenv(k)
}

func (b *Builder) gitTimeout() time.Duration {
	if b.Config.GitTimeout > 0 {
		return b.Config.GitTimeout
	}
	return DefaultGitTimeout
}

func (b *Builder) bdTimeout() time.Duration {
	if b.Config.BDTimeout > 0 {
		return b.Config.BDTimeout
	}
	return DefaultBDTimeout
}

// Build gathers the sources and renders the prompt. Failing sources only
// drop what they would have shown; Build fails only for a bad context or
// when ctx itself ends.
func (b *Builder) Build(ctx context.Context, pc PromptContext) (Prompt, error) {
	if err := pc.validate(); err != nil {
		return Prompt{}, err
	}
	src := b.Gather(ctx, pc)
	if ctx.Err() != nil {
		return Prompt{}, fmt.Errorf("build prompt for %s: %w", pc.Agent, context.Cause(ctx))
	}
	return Render(pc, src, b.Config, b.now()), nil
}

func (pc PromptContext) validate() error {
	switch {
	case pc.Agent == "":
		return errors.New("build prompt: no agent name")
	case !pc.Mode.Valid():
		return fmt.Errorf("build prompt for %s: %w", pc.Agent, modeError(pc.Mode))
	case pc.Worktree == "":
		return fmt.Errorf("build prompt for %s: no worktree path", pc.Agent)
	case pc.SessionSeq < 1:
		return fmt.Errorf("build prompt for %s: session number %d, want 1 or more", pc.Agent, pc.SessionSeq)
	}
	return nil
}

// Spec is the context's mode and strategy.
func (pc PromptContext) Spec() mode.Spec {
	return mode.Spec{Mode: pc.Mode, Strategy: pc.Strategy, TreeRoot: pc.TreeRoot}
}

// Vector is the capability vector the prompt describes.
func (pc PromptContext) Vector() mode.Vector {
	if pc.Caps != nil {
		return pc.Caps
	}
	return pc.Spec().Vector()
}

func modeError(m mode.Mode) error {
	_, err := mode.Parse(string(m))
	return err
}
