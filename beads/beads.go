// Package beads adapts the bd (beads) issue tracker CLI: `bd ready --json`
// for the prompt's task list, and claim, close and show for the agents'
// task tools (it satisfies engine.TaskBoard).
//
// Design decisions:
//
//   - bd is optional. When it is not on PATH every call returns
//     ErrNotInstalled, which callers treat as "no tasks", never as a failure.
//     A repository without `bd init` makes bd exit 1 with "no beads
//     database found" on stderr and nothing on stdout; that is an *Error
//     that matches ErrNoDatabase, so callers can tell "not set up" from
//     "broken".
//   - Output is parsed as bd 1.x prints it (a bare JSON array) and as the
//     envelope bd 2.0 will print by default ({"schema_version":1,"data":…}).
//     Unknown fields are ignored; anything that is not one of those shapes is
//     an *Error matching ErrBadOutput. Only the fields swarm uses are decoded,
//     and timestamps are not, so a format change there cannot break parsing.
//   - Every call runs through proc: bd gets its own process group, the whole
//     group is killed when the timeout passes, and WaitDelay stops a
//     grandchild holding a pipe from keeping the call alive. bd takes
//     0.25–0.6 s and ~190 MB per call, so it always has a timeout (5 s unless
//     set).
//   - Calls made for an agent set BD_ACTOR=<agent>, so claims are recorded
//     per agent. BEADS_ACTOR is removed from the inherited environment
//     because bd prefers it over BD_ACTOR.
//   - Shared runs one `bd ready` at a time for all its callers
//     (singleflight): building prompts for several agents at once starts one
//     bd, whose embedded database dislikes many processes at once.
//   - A lost claim makes bd exit 1 with plain text on stderr even with
//     --json; the *Error carries that text.
//
// The package imports neither the mailbox nor SQLite, so its fuzz target
// builds quickly.
package beads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/swarmhq/swarm/proc"
)

// DefaultTimeout bounds a bd call when Client.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// grace is how long bd gets between SIGTERM and SIGKILL after a timeout.
const grace = time.Second

// maxStderr caps the stderr text kept in an error.
const maxStderr = 2 << 10

var (
	// ErrNotInstalled means bd is not on PATH: there are no tasks.
	ErrNotInstalled = errors.New("bd is not installed")
	// ErrNoDatabase means bd found no beads database (no `bd init` here).
	ErrNoDatabase = errors.New("no beads database")
	// ErrBadOutput means bd printed something that is not the expected JSON.
	ErrBadOutput = errors.New("unreadable bd output")
)

// Issue is one beads issue as `bd ready --json` prints it. Only the fields
// swarm reads are decoded; the rest are ignored.
type Issue struct {
	ID              string   `json:"id"`
	Title           string   `json:"title"`
	Description     string   `json:"description,omitempty"`
	Status          string   `json:"status"`
	Priority        int      `json:"priority"`
	IssueType       string   `json:"issue_type"`
	Assignee        string   `json:"assignee,omitempty"`
	Owner           string   `json:"owner,omitempty"`
	Labels          []string `json:"labels,omitempty"`
	Parent          string   `json:"parent,omitempty"`
	DependencyCount int      `json:"dependency_count"`
	DependentCount  int      `json:"dependent_count"`
	CommentCount    int      `json:"comment_count"`
	// Dependencies are the issue's own edges as `bd list --json` and `bd
	// ready --json` print them (`bd show` prints full issues instead).
	Dependencies []Dependency `json:"dependencies,omitempty"`
}

// Dependency is one edge: IssueID depends on DependsOnID. Type "blocks"
// orders work; "parent-child" makes a tree.
type Dependency struct {
	IssueID     string `json:"issue_id"`
	DependsOnID string `json:"depends_on_id"`
	Type        string `json:"type"`
}

// Dependency types.
const (
	DepBlocks      = "blocks"
	DepParentChild = "parent-child"
)

// IsEpic reports whether the issue is an epic, which the prompt leaves out
// unless configured: an epic is a container, not a piece of work.
func (i Issue) IsEpic() bool { return i.IssueType == "epic" }

// Error is a bd call that failed: a non-zero exit or unreadable output.
type Error struct {
	Command  string // e.g. "bd ready --json"
	ExitCode int    // bd's exit status
	Stderr   string // bd's stderr, whitespace collapsed, capped
	Err      error  // ErrNoDatabase, ErrBadOutput, or nil
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Command)
	switch {
	case errors.Is(e.Err, ErrBadOutput):
		fmt.Fprintf(&b, ": %v", e.Err)
	default:
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Client runs bd for one actor in one directory.
type Client struct {
	Dir     string        // where bd runs: the agent's worktree or the repo root
	Actor   string        // BD_ACTOR; empty leaves bd's own default
	Timeout time.Duration // per call; 0 means DefaultTimeout
	Bin     string        // the bd executable; empty means "bd" on PATH
	Env     []string      // the base environment; nil means os.Environ()
}

func (c *Client) bin() string {
	if c.Bin == "" {
		return "bd"
	}
	return c.Bin
}

// Installed reports whether the bd executable can be found.
func (c *Client) Installed() bool {
	_, err := exec.LookPath(c.bin())
	return err == nil
}

func (c *Client) env() []string {
	base := c.Env
	if base == nil {
		base = os.Environ()
	}
	out := make([]string, 0, len(base)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if c.Actor != "" && (k == "BD_ACTOR" || k == "BEADS_ACTOR") {
			continue
		}
		out = append(out, kv)
	}
	if c.Actor != "" {
		out = append(out, "BD_ACTOR="+c.Actor)
	}
	return out
}

// run runs bd with args and returns its stdout.
func (c *Client) run(ctx context.Context, args ...string) ([]byte, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	command := "bd " + strings.Join(args, " ")
	res, err := proc.Run(ctx, proc.Spec{Dir: c.Dir, Env: c.env(), Timeout: timeout, Grace: grace}, c.bin(), args...)
	var pe *proc.ExitError
	switch {
	case err == nil:
		return res.Stdout, nil
	case errors.Is(err, exec.ErrNotFound):
		return nil, ErrNotInstalled
	case errors.As(err, &pe):
		e := &Error{Command: command, ExitCode: pe.ExitCode, Stderr: clean(pe.Stderr)}
		if e.Stderr == "" {
			// Some failures only say why in a JSON error object on stdout.
			e.Stderr = clean(jsonError(res.Stdout))
		}
		if strings.Contains(pe.Stderr, "no beads database found") {
			e.Err = ErrNoDatabase
		}
		return nil, e
	default:
		return nil, fmt.Errorf("%s: %w", command, err)
	}
}

// Ready runs `bd ready --json`: the open issues with no open blockers.
func (c *Client) Ready(ctx context.Context) ([]Issue, error) {
	out, err := c.run(ctx, "ready", "--json")
	if err != nil {
		return nil, err
	}
	issues, err := ParseReady(out)
	if err != nil {
		return nil, &Error{Command: "bd ready --json", Err: err}
	}
	return issues, nil
}

// List runs `bd list --json`: every issue that is not closed, with its
// dependencies, for the task graph.
func (c *Client) List(ctx context.Context) ([]Issue, error) {
	out, err := c.run(ctx, "list", "--json")
	if err != nil {
		return nil, err
	}
	issues, err := ParseReady(out)
	if err != nil {
		return nil, &Error{Command: "bd list --json", Err: err}
	}
	return issues, nil
}

// Claim runs `bd update <id> --claim --json`: the issue becomes in_progress
// and assigned to the actor. A claim lost to another actor is an *Error
// carrying bd's explanation.
func (c *Client) Claim(ctx context.Context, id string) (json.RawMessage, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return c.rawCall(ctx, "update", id, "--claim", "--json")
}

// Close runs `bd close <id> --reason <reason> --json`.
func (c *Client) Close(ctx context.Context, id, reason string) (json.RawMessage, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	args := []string{"close", id}
	if reason != "" {
		// The = form keeps a reason starting with "-" from reading as a flag.
		args = append(args, "--reason="+reason)
	}
	return c.rawCall(ctx, append(args, "--json")...)
}

// SetStatus runs `bd update <id> --status <status> --json`: the queue's
// fail gives a task back as blocked, so `bd ready` does not offer it again
// until someone looks at it.
func (c *Client) SetStatus(ctx context.Context, id, status string) (json.RawMessage, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := checkID(status); err != nil {
		return nil, fmt.Errorf("bad status %q", status)
	}
	return c.rawCall(ctx, "update", id, "--status", status, "--json")
}

// Show runs `bd show <id> --json`.
func (c *Client) Show(ctx context.Context, id string) (json.RawMessage, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return c.rawCall(ctx, "show", id, "--json")
}

// rawCall runs bd and returns its JSON, unwrapped from the 2.0 envelope so
// callers see one shape whichever way bd prints it.
func (c *Client) rawCall(ctx context.Context, args ...string) (json.RawMessage, error) {
	out, err := c.run(ctx, args...)
	if err != nil {
		return nil, err
	}
	raw, err := unwrap(out)
	if err != nil {
		return nil, &Error{Command: "bd " + strings.Join(args, " "), Err: err}
	}
	return raw, nil
}

// checkID rejects ids that bd could read as flags, or that are not one
// word: ids come from the model.
func checkID(id string) error {
	if id == "" || strings.HasPrefix(id, "-") || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("bad beads issue id %q: use an id from the task list, such as demo-6fx", id)
	}
	return nil
}

// envelope is bd 2.0's wrapper, also printed by bd 1.x with
// BD_JSON_ENVELOPE=1. Error is set on bd's JSON error objects.
type envelope struct {
	SchemaVersion *int            `json:"schema_version"`
	Data          json.RawMessage `json:"data"`
	Error         *string         `json:"error"`
}

// ParseReady parses `bd ready --json` output: a bare array (bd 1.x) or the
// {"schema_version":1,"data":[…]} envelope. Unknown fields are ignored; an
// issue without an id is an error.
func ParseReady(out []byte) ([]Issue, error) {
	data := bytes.TrimSpace(out)
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty output, want a JSON array", ErrBadOutput)
	}
	if data[0] == '{' {
		var env envelope
		if err := json.Unmarshal(data, &env); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadOutput, err)
		}
		if env.Error != nil {
			return nil, fmt.Errorf("%w: bd reported an error: %s", ErrBadOutput, *env.Error)
		}
		data = bytes.TrimSpace(env.Data)
		if len(data) == 0 || data[0] != '[' {
			return nil, fmt.Errorf("%w: an object without a \"data\" array", ErrBadOutput)
		}
	}
	if data[0] != '[' {
		return nil, fmt.Errorf("%w: want a JSON array, got %q", ErrBadOutput, head(data))
	}
	var issues []Issue
	if err := json.Unmarshal(data, &issues); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOutput, err)
	}
	for i, is := range issues {
		if is.ID == "" {
			return nil, fmt.Errorf("%w: issue %d has no id", ErrBadOutput, i)
		}
	}
	if issues == nil {
		issues = []Issue{}
	}
	return issues, nil
}

// unwrap returns the payload of bd's JSON output: the envelope's data, or
// the document itself.
func unwrap(out []byte) (json.RawMessage, error) {
	data := bytes.TrimSpace(out)
	if !json.Valid(data) {
		return nil, fmt.Errorf("%w: not JSON: %q", ErrBadOutput, head(data))
	}
	if len(data) > 0 && data[0] == '{' {
		var env envelope
		if json.Unmarshal(data, &env) == nil && env.SchemaVersion != nil && len(env.Data) > 0 {
			return env.Data, nil
		}
	}
	return json.RawMessage(data), nil
}

// jsonError returns the message of a JSON error object on stdout, if any.
func jsonError(out []byte) string {
	var env envelope
	if json.Unmarshal(bytes.TrimSpace(out), &env) != nil || env.Error == nil {
		return ""
	}
	return *env.Error
}

// clean collapses whitespace so bd's multi-line messages fit on one log
// line, and caps the length.
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxStderr {
		s = strings.ToValidUTF8(s[:maxStderr], "") + "…"
	}
	return s
}

func head(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
