// Package engine runs agent sessions. A session is one run of an engine in
// the agent's worktree with a freshly built prompt.
//
// In-process engines (gemini, script) share one tool-using agent loop over
// the narrow Model interface: the loop asks the model for a turn, runs the
// tool calls it makes, appends the results and repeats until the model
// answers without a tool call, the session is cancelled, or max turns or the
// session timeout is reached. External CLI agents (engine/exec) implement
// Engine directly.
//
// The engine never imports the mailbox or beads: it reaches them through the
// Messenger, Escalator and TaskBoard interfaces that the supervisor wires
// in.
//
// The loop offers the model exactly the tools the session's mode grants
// (mode.Mode.Tools, with the beads tools only when a TaskBoard is wired)
// and refuses a call to any other. Tool failures go back to the model as
// the tool's error text; they never end the session. The file tools
// (read_file, write_file, edit_file, list_files, grep) resolve every path,
// symlinks included, refuse anything outside the worktree, and then open
// it through an os.Root on the worktree, so a symlink swapped in meanwhile
// cannot lead them out. Writes replace files by rename and refuse files
// with more than one hard link. bash is not
// confined by the file tools' checks: it runs in the worktree, in its own
// process group (killed on cancel, on its timeout and when it returns),
// with the session environment minus credentials (Scrub), and with the
// user's rights unless the session has a Sandbox: then each command runs
// in a bubblewrap of its own (one PID namespace per call, so nothing it
// started, setsid'd or not, outlives the call; the session's private /tmp
// is shared by its calls). The swarm tool runs swarm's own binary (and
// bd) with an argv the mode allows and no shell; it runs beside the
// sandbox, as the session.
package engine

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/swarmhq/swarm/mode"
	contain "github.com/swarmhq/swarm/sandbox"
)

// Engine runs sessions.
type Engine interface {
	// Name is the engine's configured name (gemini, script, or an
	// [engine.NAME] table's name).
	Name() string
	// Run runs one session and blocks until it ends. It returns promptly
	// when ctx is cancelled, with Outcome Cancelled and Cause set to
	// context.Cause(ctx), so an urgent interrupt can be told from a
	// shutdown.
	Run(ctx context.Context, s *Session) Result
}

// WorkSource is implemented by engines that know of work of their own, such
// as a script with blocks left to play. The supervisor asks it, besides mail
// and ready tasks, whether an agent has work waiting for session seq.
type WorkSource interface {
	HasWork(agent string, seq int64) bool
}

// Preflight is implemented by engines with requirements to check before any
// session starts (an API key, a command on PATH). The error says what is
// missing and how to fix it.
type Preflight interface {
	Preflight(ctx context.Context) error
}

// Unmetered is implemented by engines that may run sessions whose token
// usage nobody reports (an exec engine's custom command): Unmetered says
// so, and the supervisor then counts an estimate against budgets and warns
// the operator once.
type Unmetered interface {
	Unmetered() bool
}

// CLI is an engine that runs an external CLI agent: CLITools says what a
// session with capabilities caps really gets from it (its own tools as
// limited, the swarm MCP server, the limits it cannot keep), so that the
// prompt claims nothing else.
type CLI interface {
	CLITools(caps mode.Vector) mode.CLITools
}

// Session is everything an engine needs for one session.
type Session struct {
	Agent string
	ID    string // unique across the swarm; SWARM_SESSION_ID
	Seq   int64  // 1, 2, ... per agent; SWARM_SESSION_SEQ
	Root  string // the repository root; SWARM_ROOT
	DB    string // absolute database path; SWARM_DB
	// Door is the session's own control socket (SWARM_DOOR, DESIGN §13.2):
	// a connection to it is this session. The sandbox keeps its directory
	// reachable; "" when the supervisor opened none (tests of engines).
	Door string
	// Sandbox, when set, contains every process the session starts (the
	// bash tool's commands, an exec agent's CLI): each runs wrapped by
	// Sandbox.Command (DESIGN §13.3). nil: they run with the user's
	// rights.
	Sandbox  *contain.Box
	Agents   []string
	Worktree string // the session's working directory
	Branch   string
	Prompt   string // the system instruction
	Mode     mode.Mode
	Strategy mode.Strategy // "" means the mode's default
	// Caps is the capability vector derived when the session started; it
	// decides the tools offered and the commands the swarm tool runs. nil
	// derives it from Mode and Strategy.
	Caps mode.Vector
	// SwarmBin is the swarm binary the swarm tool runs; empty means this
	// process's own executable.
	SwarmBin  string
	Model     string // model name for model-backed engines
	MaxTurns  int
	Timeout   time.Duration
	Grace     time.Duration // interrupt_grace: SIGTERM to SIGKILL
	Mail      []Mail        // the messages delivered into this session
	Env       []string      // the session environment (see Env)
	EnvPass   []string      // names Scrub lets through to the tools ([env] pass)
	Messenger Messenger
	Escalator Escalator // nil: the escalate tool says so
	Protocol  Protocol  // nil: the send_protocol and ack tools say so
	Tasks     TaskBoard // nil when bd is not installed
	Log       io.Writer // the session log; engines write the conversation here

	// Reviews are the commits the agent is asked to review, the only ones
	// the read-only git tools (git_diff, git_show) read.
	Reviews []Review

	// Interject is called by in-process engines at every tool boundary
	// (after a round of tool results, before the next model request). The
	// texts it returns are added to the conversation as one user turn. The
	// supervisor hands it urgent mail (interrupt = "boundary") and protocol
	// messages that ask for an ACK. May be nil.
	Interject func(ctx context.Context) []string

	// OnProcess is called with the process group id of every long-lived
	// process group the session starts (an exec agent, a bash tool call),
	// so recovery can kill what a crash leaves behind. May be nil.
	OnProcess func(pgid int)

	// OnUsage is called with token usage as the session reports it, each
	// call with what was used since the last one: in-process engines after
	// every model turn, exec engines as their CLI's JSON stream reports it
	// (claude per message; codex per turn; gemini-cli at the end). The sum
	// of the calls is Result.Usage. May be nil.
	OnUsage func(Usage)

	// OnActivity reports what the session is doing ("bash: go test ./...")
	// for status displays. May be nil.
	OnActivity func(summary string)
}

// Vector is the session's capability vector.
func (s *Session) Vector() mode.Vector {
	if s.Caps != nil {
		return s.Caps
	}
	return mode.Spec{Mode: s.Mode, Strategy: s.Strategy}.Vector()
}

// Mail is a message delivered into the session.
type Mail struct {
	ID     int64
	From   string
	Body   string
	Urgent bool
}

// Messenger sends mail from the session's agent.
type Messenger interface {
	// Send stores a message from the agent and returns its id.
	Send(ctx context.Context, to, body string, urgent bool, replyTo int64) (int64, error)
}

// Protocol sends typed protocol messages (AMP/1.0, DESIGN §9.2) and ACKs
// as the session's agent, from this session.
type Protocol interface {
	// Send builds, checks and stores a protocol message. One that fails
	// its checks is not stored, and the error names every failing field
	// by its JSON path.
	Send(ctx context.Context, m ProtocolMessage) (ProtocolSent, error)
	// Ack acknowledges the message ref names (its number or msg_id), or
	// with all every message that awaits the agent's ACK.
	Ack(ctx context.Context, ref string, all bool) ([]ProtocolSent, error)
}

// ProtocolMessage is what the send_protocol tool asks to send. The
// runtime computes the rest of the envelope (msg_id, from, timestamp).
type ProtocolMessage struct {
	To         string // "": the sender of the message answered (ReplyTo)
	Type       string
	TaskID     string // "": the task of the message answered
	Payload    json.RawMessage
	ReplyTo    string // the message answered: its number or msg_id
	ContextRef []string
	AckTimeout time.Duration // 0: the type's default
	NoAck      bool
}

// ProtocolSent is a stored protocol message.
type ProtocolSent struct {
	ID    int64
	MsgID string
	To    string
	// AckTimeout is how long the recipient has to acknowledge it once it
	// is delivered; 0 when it asks for no ACK.
	AckTimeout time.Duration
}

// Escalator raises escalations for the operator, about the session's
// agent (DESIGN §9.1).
type Escalator interface {
	Escalate(ctx context.Context, r EscalationRequest) (EscalationResult, error)
}

// EscalationRequest is what the escalate tool asks the operator.
type EscalationRequest struct {
	Summary  string
	Severity string // info, warning or critical; "" for the default
	Hold     bool   // hold the agent until the operator decides
	Approval bool   // a yes/no question: approve or reject answers it
	Ref      string // what it is about: msg:<id>, item:<id>
	Details  json.RawMessage
}

// EscalationResult is the stored escalation, or the unresolved twin that
// was counted instead.
type EscalationResult struct {
	ID      int64
	Count   int  // 1 for a new escalation
	Created bool // false: an unresolved twin was counted; nobody is notified again
	Hold    bool
}

// TaskBoard is the beads task tracker, as the agent's actor.
type TaskBoard interface {
	Claim(ctx context.Context, id string) (json.RawMessage, error)
	Close(ctx context.Context, id, reason string) (json.RawMessage, error)
	Show(ctx context.Context, id string) (json.RawMessage, error)
}

// Outcome is how a session ended.
type Outcome string

const (
	Success   Outcome = "success"   // the model answered without a tool call
	Failed    Outcome = "error"     // an error, max turns, a non-zero exit
	Timeout   Outcome = "timeout"   // the session timeout passed
	Cancelled Outcome = "cancelled" // ctx was cancelled; see Result.Cause
)

// Result is the end of a session.
type Result struct {
	Outcome Outcome
	Err     error // why, for Failed and Timeout
	Cause   error // context.Cause(ctx), for Cancelled
	Usage   Usage
	Turns   int
}

// Usage is token usage for a session. The input kinds do not overlap:
// InputTokens is the input neither written to nor read from a prompt cache.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	CacheWrite   int64 // input tokens written to a prompt cache
	CacheRead    int64 // input tokens read from a prompt cache
	// CostUSD is what the engine reported the session cost in US
	// dollars (Claude Code's total_cost_usd), when Costed. Engines that
	// report no cost leave both zero: swarm prices their tokens from
	// [prices], or records the cost as unknown.
	CostUSD float64
	Costed  bool
}

// Work is the tokens a budget counts: input, output and cache writes. Cache
// reads are left out: they cost a tenth or less of fresh input, and a long
// session rereads its whole conversation every turn.
func (u Usage) Work() int64 { return u.InputTokens + u.OutputTokens + u.CacheWrite }

// Total is Work.
func (u Usage) Total() int64 { return u.Work() }

// IsZero says no tokens were reported.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add sums usage.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:  u.InputTokens + o.InputTokens,
		OutputTokens: u.OutputTokens + o.OutputTokens,
		CacheWrite:   u.CacheWrite + o.CacheWrite,
		CacheRead:    u.CacheRead + o.CacheRead,
		CostUSD:      u.CostUSD + o.CostUSD,
		Costed:       u.Costed || o.Costed,
	}
}

// Model is what an in-process engine asks for each turn.
type Model interface {
	// Generate returns the model's next turn given the system instruction,
	// the conversation so far and the tools on offer.
	Generate(ctx context.Context, req Request) (Response, error)
}

// Request is one model call.
type Request struct {
	Model  string
	System string
	Turns  []Turn
	Tools  []ToolSpec
	// Session identifies the session for models that need it (the script
	// model picks its block by Seq and reads Mail).
	Session *Session
}

// Response is one model turn.
type Response struct {
	Turn  Turn // Role "model"
	Usage Usage
}

// Role of a turn.
const (
	RoleUser  = "user"
	RoleModel = "model"
)

// Turn is one entry of the conversation.
type Turn struct {
	Role  string
	Parts []Part
}

// Part is text, a tool call, or a tool result. Raw keeps a model's own
// encoding of the part, so it can be sent back verbatim (Gemini rejects
// calls whose thought signatures were dropped).
type Part struct {
	Text      string
	Call      *ToolCall
	Result    *ToolResult
	Raw       any
	IsThought bool
}

// ToolCall is a model asking to run a tool.
type ToolCall struct {
	ID   string
	Name string
	Args map[string]any
}

// ToolResult is what a tool returned, sent back to the model.
type ToolResult struct {
	CallID string
	Name   string
	Output string
	Error  string // non-empty when the tool failed; the model sees why
}

// ToolSpec declares a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is a JSON Schema object: {"type":"object","properties":...}.
	Parameters map[string]any
}
