package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/mode"
)

// Output limits. What a tool returns goes into the model's context, so
// every tool caps its output and says when it did.
const (
	MaxToolOutput = 64 << 10 // bash output and read_file content
	maxListed     = 1000     // list_files entries
	maxGrepHits   = 200      // grep matching lines
	maxGrepLine   = 300      // bytes of one matching line shown
	maxGrepFile   = 4 << 20  // larger files are skipped by grep
)

// ToolSpecs declares the named tools, in the order given. Unknown names are
// skipped.
func ToolSpecs(names []string) []ToolSpec {
	var out []ToolSpec
	for _, n := range names {
		if spec, ok := toolSpecs[n]; ok {
			out = append(out, spec)
		}
	}
	return out
}

// OfferedTools lists the tools a session offers its model: those its mode
// grants, with the beads tools only when a task board is wired in.
func OfferedTools(s *Session) []string {
	return s.Vector().Tools(s.Tasks != nil)
}

func object(required []string, props map[string]any) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func prop(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }

var toolSpecs = map[string]ToolSpec{
	mode.Bash: {
		Name:        mode.Bash,
		Description: "Run a shell command in the worktree (cwd = worktree root) and return its combined stdout and stderr and its exit status. Output over 64 KiB keeps the head and the tail. Background processes are killed when the command returns.",
		Parameters: object([]string{"command"}, map[string]any{
			"command":         prop("string", "The command, run with bash -c."),
			"timeout_seconds": prop("integer", "Kill the command after this many seconds (default 120, at most 3600)."),
		}),
	},
	mode.ReadFile: {
		Name:        mode.ReadFile,
		Description: "Read a text file in the worktree, optionally only a range of lines.",
		Parameters: object([]string{"path"}, map[string]any{
			"path":       prop("string", "Path relative to the worktree root."),
			"start_line": prop("integer", "First line to return, from 1."),
			"end_line":   prop("integer", "Last line to return, inclusive."),
		}),
	},
	mode.WriteFile: {
		Name:        mode.WriteFile,
		Description: "Create or overwrite a file in the worktree with the given content. Parent directories are created.",
		Parameters: object([]string{"path", "content"}, map[string]any{
			"path":    prop("string", "Path relative to the worktree root."),
			"content": prop("string", "The whole new content of the file."),
		}),
	},
	mode.EditFile: {
		Name:        mode.EditFile,
		Description: "Replace one exact occurrence of old with new in a file. old must match exactly once, whitespace included; add surrounding lines to make it unique.",
		Parameters: object([]string{"path", "old", "new"}, map[string]any{
			"path": prop("string", "Path relative to the worktree root."),
			"old":  prop("string", "The exact text to replace; must occur exactly once."),
			"new":  prop("string", "The replacement text."),
		}),
	},
	mode.ListFiles: {
		Name:        mode.ListFiles,
		Description: "List the files in a directory of the worktree (directories end with /). .git is skipped.",
		Parameters: object(nil, map[string]any{
			"path":      prop("string", "Directory relative to the worktree root; default the root."),
			"recursive": prop("boolean", "List the whole tree below path."),
		}),
	},
	mode.Grep: {
		Name:        mode.Grep,
		Description: "Search files in the worktree for a Go regular expression; returns path:line: text for each matching line.",
		Parameters: object([]string{"pattern"}, map[string]any{
			"pattern": prop("string", "A Go (RE2) regular expression."),
			"path":    prop("string", "File or directory to search, relative to the worktree root; default the root."),
		}),
	},
	mode.GitDiff: {
		Name:        mode.GitDiff,
		Description: "Read the diff of the commit you review against the base branch (read-only): all of it, one file (path), or the files it changes (stat). Use it for every file a cut review_request leaves out.",
		Parameters: object(nil, map[string]any{
			"commit":     prop("string", "The reviewed commit's hash (default: the one you review)."),
			"path":       prop("string", "A file, from the repository's root; default every file."),
			"stat":       prop("boolean", "List the changed files and their line counts instead."),
			"start_line": prop("integer", "First line of the diff to return, from 1."),
			"end_line":   prop("integer", "Last line to return, inclusive."),
		}),
	},
	mode.GitShow: {
		Name:        mode.GitShow,
		Description: "Read a file as the commit you review has it (read-only), or with no path the commit's message and the files it changes.",
		Parameters: object(nil, map[string]any{
			"commit":     prop("string", "The reviewed commit's hash (default: the one you review)."),
			"path":       prop("string", "A file, from the repository's root."),
			"start_line": prop("integer", "First line to return, from 1."),
			"end_line":   prop("integer", "Last line to return, inclusive."),
		}),
	},
	mode.SendMessage: {
		Name:        mode.SendMessage,
		Description: "Send a message to a teammate (by agent name) or to \"operator\", the human. Urgent interrupts the recipient now; use it only when they must stop what they are doing.",
		Parameters: object([]string{"to", "body"}, map[string]any{
			"to":       prop("string", "Recipient: an agent name or \"operator\"."),
			"body":     prop("string", "The message."),
			"urgent":   prop("boolean", "Interrupt the recipient now."),
			"reply_to": prop("integer", "Id of the message this answers, to keep the thread."),
		}),
	},
	mode.Escalate: {
		Name:        mode.Escalate,
		Description: "Escalate to the operator (the human) something only they can decide or must know now: a choice you cannot make, a risk, a blocker. The operator is notified at once and answers with a decision (resume, abort, approve or reject) and a note, which your next prompt shows under Operator Decision. With hold, you stop: this session ends and you start again only after the decision. A repeat of an open escalation only counts it.",
		Parameters: object([]string{"summary"}, map[string]any{
			"summary":  prop("string", "One line: what you need from the operator."),
			"severity": map[string]any{"type": "string", "enum": []any{"info", "warning", "critical"}, "description": "How much it matters (default warning; info for an approval)."},
			"hold":     prop("boolean", "Stop and wait for the decision."),
			"approval": prop("boolean", "A yes/no question: the operator approves or rejects."),
			"ref":      prop("string", "What it is about, such as msg:12 or item:bd-4."),
			"details":  prop("object", "Facts the operator needs, as a JSON object (files, errors, options)."),
		}),
	},
	mode.SendProtocol: {
		Name:        mode.SendProtocol,
		Description: "Send a typed protocol message (AMP/1.0): task_dispatch, task_result, review_request, review_verdict, escalation or ping. You give the type, the recipient, the task id and the payload; the runtime computes msg_id, sender and timestamp, and checks the payload against the type's schema. A message that fails is not stored: the error names every failing field by its JSON path, so fix them all and send again. With reply_to, the task id, the recipient and context_ref come from the message answered.",
		Parameters: object([]string{"type", "payload"}, map[string]any{
			"type":                prop("string", "task_dispatch, task_result, review_request, review_verdict, escalation or ping."),
			"to":                  prop("string", "Recipient: an agent name, \"operator\" or \"swarm\". Default with reply_to: the sender of the message answered."),
			"task_id":             prop("string", "The task the message is about. Default with reply_to: the task of the message answered."),
			"payload":             prop("object", "The type's payload, such as {\"status\": \"completed\", \"summary\": \"...\"} for a task_result."),
			"reply_to":            prop("string", "The message this answers: its number (12) or its msg_id."),
			"context_ref":         map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "msg_ids of stored messages this one builds on."},
			"ack_timeout_seconds": prop("integer", "Ask for an ACK within this many seconds of delivery (default: 300 for a task_dispatch, 600 for a review_request, none otherwise)."),
			"no_ack":              prop("boolean", "Ask for no ACK."),
		}),
	},
	mode.Ack: {
		Name:        mode.Ack,
		Description: "Acknowledge a protocol message that asks for an ACK: you have seen it and take it on. Do it first, before the deadline your prompt shows; a missed deadline is escalated to the operator and may hold you.",
		Parameters: object(nil, map[string]any{
			"msg_id": prop("string", "The msg_id (or number) of the message to acknowledge."),
			"all":    prop("boolean", "Acknowledge every message that awaits your ACK."),
		}),
	},
	mode.Swarm: {
		Name:        mode.Swarm,
		Description: "Run one swarm or bd command, given as an argument list (no shell, no quoting): the command lines listed under Mode Instructions, and only those. Output and exit status come back.",
		Parameters: object([]string{"argv"}, map[string]any{
			"argv": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": `The program ("swarm" or "bd") and its arguments, one item each, such as ["swarm", "report", "progress", "bd-12", "tests pass"].`},
		}),
	},
	mode.BDClaim: {
		Name:        mode.BDClaim,
		Description: "Claim a beads task so nobody else works on it. Fails if someone else already claimed it.",
		Parameters: object([]string{"id"}, map[string]any{
			"id": prop("string", "The task id, such as bd-12."),
		}),
	},
	mode.BDClose: {
		Name:        mode.BDClose,
		Description: "Close a beads task you finished.",
		Parameters: object([]string{"id"}, map[string]any{
			"id":     prop("string", "The task id."),
			"reason": prop("string", "What was done."),
		}),
	},
	mode.BDShow: {
		Name:        mode.BDShow,
		Description: "Show a beads task with its details.",
		Parameters: object([]string{"id"}, map[string]any{
			"id": prop("string", "The task id."),
		}),
	},
}

// toolbox runs one session's tool calls.
type toolbox struct {
	s       *Session
	sb      *sandbox
	offered []string
	env     []string // the scrubbed session environment for bash
}

func newToolbox(s *Session) (*toolbox, error) {
	if !s.Mode.Valid() {
		return nil, fmt.Errorf("session mode %q is not valid (valid: %s)", s.Mode, strings.Join(mode.Names(), ", "))
	}
	sb, err := newSandbox(s.Worktree)
	if err != nil {
		return nil, err
	}
	env := s.Env
	if env == nil {
		// A session without an explicit environment still gets its
		// variables; Scrub below keeps the keys out either way.
		env = SessionEnv(osEnviron(), s)
	}
	// PWD names the worktree, so bash's pwd agrees with its cwd rather
	// than echoing the supervisor's directory.
	env = append(withoutKey(Scrub(env, s.EnvPass), "PWD"), "PWD="+sb.raw)
	return &toolbox{s: s, sb: sb, offered: OfferedTools(s), env: env}, nil
}

func withoutKey(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return out
}

// close releases what the toolbox holds open (the worktree's descriptor).
func (tb *toolbox) close() error { return tb.sb.close() }

func (tb *toolbox) specs() []ToolSpec { return ToolSpecs(tb.offered) }

// errCancelled marks a tool that stopped because the session ended.
var errCancelled = errors.New("tool stopped: the session was cancelled")

// run runs one call. Tool failures are reported in the result for the
// model to read; they never end the session.
func (tb *toolbox) run(ctx context.Context, call ToolCall) ToolResult {
	res := ToolResult{CallID: call.ID, Name: call.Name}
	if !slices.Contains(tb.offered, call.Name) {
		res.Error = tb.refusal(call.Name)
		return res
	}
	args, err := parseArgs(call.Name, call.Args)
	if err != nil {
		res.Error = err.Error() + ". Call the tool again with corrected arguments."
		return res
	}
	out, err := tb.dispatch(ctx, call.Name, args)
	res.Output = out
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

func (tb *toolbox) refusal(name string) string {
	avail := strings.Join(tb.offered, ", ")
	if avail == "" {
		avail = "none"
	}
	switch {
	case slices.Contains(mode.BeadsTools, name) && tb.s.Vector().AllowsTool(name, true):
		return fmt.Sprintf("tool %q is not available: bd (beads) is not installed for this swarm. Available tools: %s", name, avail)
	case slices.Contains(mode.AllTools, name):
		return fmt.Sprintf("tool %q is not allowed in %s mode (capabilities on: %s). Available tools: %s", name, tb.s.Mode, enabledNames(tb.s.Vector()), avail)
	}
	return fmt.Sprintf("unknown tool %q. Available tools: %s", name, avail)
}

func (tb *toolbox) dispatch(ctx context.Context, name string, args any) (string, error) {
	switch a := args.(type) {
	case bashArgs:
		return tb.bash(ctx, a)
	case readArgs:
		return tb.readFile(a)
	case writeArgs:
		return tb.writeFile(a)
	case editArgs:
		return tb.editFile(a)
	case listArgs:
		return tb.listFiles(a)
	case grepArgs:
		return tb.grep(ctx, a)
	case gitArgs:
		if name == mode.GitShow {
			return tb.gitShow(ctx, a)
		}
		return tb.gitDiff(ctx, a)
	case sendArgs:
		return tb.send(ctx, a)
	case protocolArgs:
		return tb.sendProtocol(ctx, a)
	case ackArgs:
		return tb.ack(ctx, a)
	case escalateArgs:
		return tb.escalate(ctx, a)
	case taskArgs:
		return tb.task(ctx, name, a)
	case swarmArgs:
		return tb.swarm(ctx, a)
	}
	return "", fmt.Errorf("internal error: no handler for %T", args)
}

// summary is a short line for OnActivity and the log: "bash: go test ./...".
func summary(call ToolCall) string {
	pick := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := call.Args[k].(string); ok && v != "" {
				return v
			}
		}
		return ""
	}
	var what string
	switch call.Name {
	case mode.Bash:
		what = pick("command")
	case mode.ReadFile, mode.WriteFile, mode.EditFile:
		what = pick("path")
	case mode.ListFiles:
		what = pick("path")
		if what == "" {
			what = "."
		}
	case mode.Grep:
		what = pick("pattern")
	case mode.GitDiff, mode.GitShow:
		what = pick("path", "commit")
	case mode.SendMessage:
		what = "to " + pick("to")
	case mode.SendProtocol:
		what = strings.TrimSpace(pick("type") + " to " + pick("to", "reply_to"))
	case mode.Ack:
		what = pick("msg_id")
		if what == "" {
			what = "all"
		}
	case mode.Escalate:
		what = pick("summary")
	case mode.BDClaim, mode.BDClose, mode.BDShow:
		what = pick("id")
	case mode.Swarm:
		if argv, ok := call.Args["argv"].([]any); ok {
			var words []string
			for _, w := range argv {
				words = append(words, fmt.Sprint(w))
			}
			what = strings.Join(words, " ")
		}
	}
	what = oneLine(what, 80)
	if what == "" {
		return call.Name
	}
	return call.Name + ": " + what
}

// oneLine keeps the first line of s, cut to n bytes on a rune boundary.
func oneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = s[:i], true
	}
	if len(s) > n {
		s, cut = truncUTF8(s, n), true
	}
	if cut {
		s += " …"
	}
	return s
}

// truncUTF8 cuts s to at most n bytes without splitting a rune.
func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
