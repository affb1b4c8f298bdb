package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// The verbs `swarm mcp`'s tools call through a session's door
// (control.OpCall), each with its typed request: the tool's input, decoded
// here into the command's options and run as the door's caller, with no
// argv and no cobra in between. What the tool sees is what the command
// prints with --json (diff: the patch), so the CLIs read the same results
// as before. A request field never says who is asking: the door does, and
// a field the request type does not have is refused.

// mcpVerb is one verb a door calls with a typed request.
type mcpVerb struct {
	command string // the command's path, for refusals ("send")
	json    bool   // the command's --json output
	run     func(ctx context.Context, app *App, c identity.Caller, args json.RawMessage) error
}

// mcpVerbs are the verbs by the names the tools call them.
var mcpVerbs = map[string]mcpVerb{
	"send_message": {"send", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in sendIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		return runSend(ctx, &SendOptions{App: app, To: in.To, Body: in.Body, Urgent: in.Urgent, ReplyTo: in.ReplyTo,
			Kind: string(message.KindMessage), replyToSet: in.ReplyTo != ""})
	}},
	"send_protocol": {"send", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in protocolIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		payload, err := json.Marshal(in.Payload)
		if err != nil {
			return usagef("payload: %v", err)
		}
		opts := &SendOptions{App: app, To: in.To, Type: in.Type, Task: in.Task, Payload: string(payload), ReplyTo: in.ReplyTo,
			ContextRef: in.ContextRef, NoAck: in.NoAck, replyToSet: in.ReplyTo != ""}
		if in.AckTimeout != "" {
			d, err := time.ParseDuration(in.AckTimeout)
			if err != nil {
				return argsError("swarm send", "invalid argument %q for \"--ack-timeout\" flag: %v", in.AckTimeout, err)
			}
			opts.AckTimeout = d
		}
		return runSendProtocol(ctx, opts)
	}},
	"reply": {"reply", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in replyIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		opts := &ReplyOptions{App: app, Ref: in.ID, Body: in.Body, Urgent: in.Urgent}
		if looksNumeric.MatchString(strings.TrimSpace(opts.Ref)) {
			id, err := parseID("the message", opts.Ref)
			if err != nil {
				return err
			}
			opts.ID = id
		}
		return runReply(ctx, opts)
	}},
	"ack": {"ack", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in ackIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		if !in.All && in.MsgID == "" {
			return usagef("give msg_id, or all: true")
		}
		return runAck(ctx, &AckOptions{App: app, Ref: in.MsgID, All: in.All})
	}},
	"inbox": {"inbox", true, func(ctx context.Context, app *App, c identity.Caller, args json.RawMessage) error {
		var in inboxIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		if in.Limit <= 0 {
			in.Limit = 20
		}
		// The caller's own mail: the door says whose.
		return runInbox(ctx, &InboxOptions{App: app, Name: c.Agent(), State: in.State, Limit: in.Limit, Now: time.Now})
	}},
	"escalate": {"escalate", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in escalateIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		return runEscalate(ctx, &EscalateOptions{App: app, Summary: in.Summary, Severity: in.Severity, Hold: in.Hold, Approval: in.Approval, Ref: in.Ref})
	}},
	"workflow_signal": {"workflow signal", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in signalIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		return runWorkflow(ctx, &WorkflowOptions{App: app, Action: "signal", Item: in.Item, Status: in.Status, Next: in.Next,
			Message: in.Message, Artifacts: in.Artifact})
	}},
	"report": {"report", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in reportIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		// The command's own words for what its arguments lack.
		k := mailbox.ReportKind(in.Kind)
		switch {
		case !slices.Contains(mailbox.ReportKinds, k):
			return argsError("swarm report", "unknown report kind %q: use progress, blocked, complete or session", in.Kind)
		case k.TaskLevel() && in.Task == "":
			return argsError("swarm report "+in.Kind, "accepts 2 arg(s), received 1")
		case !k.TaskLevel() && in.Task != "":
			return argsError("swarm report "+in.Kind, "accepts 1 arg(s), received 2")
		}
		return runReport(ctx, &ReportOptions{App: app, Kind: k, Task: in.Task, Message: in.Message})
	}},
	"spawn": {"spawn", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in spawnIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		return runSpawn(ctx, &SpawnOptions{App: app, Name: in.Name, Role: in.Role, Task: in.Task, Ephemeral: in.Ephemeral})
	}},
	"diff": {"diff", false, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in diffIn
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		if in.Dev == "" || strings.HasPrefix(in.Dev, "-") {
			return usagef("give dev: the agent whose commit you review")
		}
		return runDiff(ctx, &DiffOptions{App: app, Agent: in.Dev, Commit: in.Commit, Stat: in.Stat, Color: "never", Paths: in.Paths})
	}},
	// status is what swarm mcp reads the session's capabilities from.
	"status": {"status", true, func(ctx context.Context, app *App, _ identity.Caller, args json.RawMessage) error {
		var in struct{}
		if err := decodeArgs(args, &in); err != nil {
			return err
		}
		return runStatus(ctx, &StatusOptions{App: app, Now: time.Now})
	}},
}

// mcpVerbNames lists the verbs a door calls, for a refusal.
func mcpVerbNames() string {
	names := make([]string, 0, len(mcpVerbs))
	for n := range mcpVerbs {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// argsError is a mistake in a verb's arguments, in the words (and with the
// --help hint) the command line's parser gives it.
func argsError(help, format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...), help: help}
}

// decodeArgs decodes a verb's typed request strictly: a field the request
// does not have (a sender, an agent to act as) is refused, not ignored.
func decodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return usagef("the request's arguments: %v", err)
	}
	return nil
}

// call runs one verb with its typed request as caller, in the caller's
// directory, and returns what its command would have printed.
func (c *swarmCommands) call(ctx context.Context, caller identity.Caller, req control.CallRequest) (control.RunResult, error) {
	v, ok := mcpVerbs[req.Verb]
	if !ok {
		return control.RunResult{}, fmt.Errorf("unknown verb %q on a session's door (it offers %s)", req.Verb, mcpVerbNames())
	}
	var stdout, stderr bytes.Buffer
	app := c.app(caller, req.Dir, nil, &stdout, &stderr)
	app.JSON = v.json
	app.command = v.command
	err := app.explainDamage(v.run(ctx, app, caller, req.Args))
	code := exitOK
	if err != nil {
		code = report(app.Stderr, err)
	}
	return control.RunResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}, nil
}
