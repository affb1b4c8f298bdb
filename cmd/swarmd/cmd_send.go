package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/swarmhq/swarm/identity"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// SendOptions are the inputs of `swarm send`.
type SendOptions struct {
	App     *App
	To      string
	Body    string
	All     bool
	Urgent  bool
	From    string
	ReplyTo string // a message number (12, #12) or a protocol msg_id
	Kind    string

	// A protocol message (--type): its task, payload JSON (or @file, or -
	// for stdin), the ACK it asks for and the msg_ids it builds on.
	Type       string
	Task       string
	Payload    string
	AckTimeout time.Duration
	NoAck      bool
	ContextRef []string

	replyToSet bool
	kindSet    bool
	changed    func(name string) bool
}

// looksNumeric matches what is meant as a message number, valid or not.
var looksNumeric = regexp.MustCompile(`^#?[-+]?[0-9]+$`)

func (o *SendOptions) flagSet(name string) bool { return o.changed != nil && o.changed(name) }

// newSendCmd builds `swarm send`; a non-nil runF runs instead of the
// command, with the parsed options (the flag tests' seam).
func newSendCmd(app *App, runF func(*SendOptions) error) *cobra.Command {
	opts := &SendOptions{App: app}
	cmd := &cobra.Command{
		Use:   "send <to> <body> | send <to> --type T --task ID --payload JSON",
		Short: "Send a message to an agent (or to operator), or a typed protocol message",
		Long: `Send a message to an agent's mailbox. It is shown in the agent's next
prompt. With --urgent, a running session is interrupted at once (or, with
interrupt = "boundary", the message joins it at the next tool call).

The sender is --from, else $SWARM_AGENT (set inside agent sessions), else
operator. <body> of "-" reads the body from stdin. --reply-to takes a
message's number (12 or #12) or a protocol msg_id. Sending works whether or
not 'swarm up' is running; a running supervisor is woken at once.

With --type, it sends a protocol message (AMP/1.0) instead: task_dispatch,
task_result, review_request, review_verdict, escalation or ping (use 'swarm
ack' to acknowledge). The runtime computes msg_id, sender, timestamp and the
ACK defaults (a task_dispatch must be acknowledged within 5m of its
delivery, a review_request within 10m; --ack-timeout and --no-ack change
that) and checks the payload against the type's schema and rules before
storing anything. It prints the msg_id (--json: the stored message, with the
envelope under "protocol"). A message that fails is not stored: the command
exits 2 naming every failing field by its JSON path. With --reply-to, the
task, the recipient (when <to> is left out) and context_ref come from the
message answered. A task_result from an agent must come from its current
session ($SWARM_SESSION_ID).`,
		Example: `  swarm send backend "the /users endpoint returns 500"
  swarm send backend "stop: the migration is wrong" --urgent
  swarm send --all "standup: post your status to operator"
  git diff | swarm send reviewer -
  swarm send operator "done with the API" --from backend --reply-to 12
  swarm send backend --type task_dispatch --task T-42 --payload '{"description": "Add pagination to GET /users",
    "branch": "swarm/backend", "acceptance_criteria": ["GET /users?page=2 works"], "risk_level": "low"}'
  swarm send lead --type task_result --reply-to task_dispatch-T-42-1763900000123 \
    --payload '{"status": "completed", "summary": "paginated", "commit_hash": "4f2a9c1"}'
  swarm send critic --type review_request --task T-42 --payload @review.json --ack-timeout 15m`,
		Args: func(cmd *cobra.Command, args []string) error {
			if opts.Type != "" && !opts.All {
				return cobra.RangeArgs(0, 1)(cmd, args)
			}
			return sendArgs(opts.All, args)
		},
		ValidArgsFunction: app.completeAgents(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.replyToSet = cmd.Flags().Changed("reply-to")
			opts.kindSet = cmd.Flags().Changed("kind")
			opts.changed = cmd.Flags().Changed
			switch {
			case opts.All:
				opts.Body = args[0]
			case opts.Type != "":
				if len(args) == 1 {
					opts.To = args[0]
				}
				if runF != nil {
					return runF(opts)
				}
				return runSendProtocol(cmd.Context(), opts)
			default:
				opts.To, opts.Body = args[0], args[1]
			}
			if runF != nil {
				return runF(opts)
			}
			return runSend(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.All, "all", false, "broadcast to every agent except the sender")
	f.BoolVarP(&opts.Urgent, "urgent", "u", false, "interrupt the recipient's running session")
	f.StringVar(&opts.From, "from", "", "sender name (default $SWARM_AGENT, else operator)")
	f.StringVar(&opts.ReplyTo, "reply-to", "", "answer message `ID` (12, #12 or a protocol msg_id), in its thread")
	f.StringVar(&opts.Kind, "kind", string(message.KindMessage), "message, task, status or nudge (status mail never wakes an idle agent)")
	f.StringVar(&opts.Type, "type", "", "send a protocol message of this `TYPE`: task_dispatch, task_result, review_request, review_verdict, escalation or ping")
	f.StringVar(&opts.Task, "task", "", "the protocol message's task `ID` (default with --reply-to: the task of the message answered)")
	f.StringVar(&opts.Payload, "payload", "", "the protocol message's payload: `JSON`, @file, or - for stdin")
	f.DurationVar(&opts.AckTimeout, "ack-timeout", 0, "ask for an ACK within this `DURATION` of delivery (default by type: task_dispatch 5m, review_request 10m)")
	f.BoolVar(&opts.NoAck, "no-ack", false, "ask for no ACK")
	f.StringArrayVar(&opts.ContextRef, "context-ref", nil, "a stored `MSG_ID` this message builds on (repeatable)")
	cmd.RegisterFlagCompletionFunc("from", app.completeAgents(true))
	cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]cobra.Completion{"message", "task", "status", "nudge"}, cobra.ShellCompDirectiveNoFileComp))
	types := make([]cobra.Completion, 0, len(protocol.Types))
	for _, t := range protocol.Types {
		if t != protocol.TypeAck {
			types = append(types, string(t))
		}
	}
	cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(types, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// protocolOnly are the flags that only a protocol message (--type) takes.
var protocolOnly = []string{"task", "payload", "ack-timeout", "no-ack", "context-ref"}

// runSendProtocol sends a protocol message (--type).
func runSendProtocol(ctx context.Context, opts *SendOptions) error {
	app := opts.App
	switch {
	case opts.Urgent:
		return usagef("--urgent does not apply to protocol messages: their ACK deadline says how soon they matter")
	case opts.kindSet:
		return usagef("--kind does not go with --type: a protocol message is always of kind protocol")
	case opts.replyToSet && strings.TrimSpace(opts.ReplyTo) == "":
		return usagef("--reply-to needs a message number (12 or #12) or a msg_id (see 'swarm inbox' or 'swarm protocol log')")
	case opts.To == "" && opts.ReplyTo == "":
		return usagef("name the recipient: swarm send <to> --type %s ... (or answer a message with --reply-to)", opts.Type)
	case opts.Task == "" && opts.ReplyTo == "":
		return usagef("--task is required: the id of the task the message is about (or answer a message with --reply-to)")
	case opts.Payload == "":
		return usagef("--payload is required: the %s payload as JSON, @file or - for stdin", opts.Type)
	}
	t := protocol.Type(opts.Type)
	if t == protocol.TypeAck {
		return usagef("acknowledge a message with 'swarm ack <msg_id>', not with --type ack")
	}
	if !t.Valid() {
		return usagef("--type %q is not a protocol type: use task_dispatch, task_result, review_request, review_verdict, escalation or ping", opts.Type)
	}
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	payload, err := readPayload(ctx, app, st, who, opts.Payload)
	if err != nil {
		return err
	}
	req := verbs.SendRequest{
		Draft: protocol.Draft{Type: t, From: strings.TrimSpace(opts.From), To: opts.To, TaskID: opts.Task, Payload: payload,
			ContextRef: opts.ContextRef, AckTimeout: opts.AckTimeout, NoAck: opts.NoAck},
		ReplyTo: strings.TrimSpace(opts.ReplyTo),
	}
	m, _, err := verbs.SendProtocol(ctx, who, app.protocol(st, l, cfg), req)
	if err != nil {
		return protocolRefusal(app.Stderr, err)
	}
	if app.JSON {
		return app.printJSON(withEnvelope(m))
	}
	fmt.Fprintln(app.Stdout, m.MsgID)
	return nil
}

// readPayload reads --payload: JSON as given, @file (inside the caller's
// worktree for a session), or - for stdin.
func readPayload(ctx context.Context, app *App, st mailbox.Store, who identity.Caller, v string) ([]byte, error) {
	switch {
	case v == "-":
		b, err := io.ReadAll(io.LimitReader(app.Stdin, protocol.MaxPayload+1))
		if err != nil {
			return nil, fmt.Errorf("read the payload from stdin: %w", err)
		}
		return b, nil
	case strings.HasPrefix(v, "@"):
		path, err := app.callerFile(ctx, st, who, v[1:])
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usagef("--payload %s: %v", v, err)
		}
		return b, nil
	}
	return []byte(v), nil
}

// sendArgs checks the positional arguments, saying what is missing.
func sendArgs(all bool, args []string) error {
	want, form := 2, `swarm send <agent> "<body>"`
	if all {
		want, form = 1, `swarm send --all "<body>"`
	}
	switch {
	case len(args) == want:
		return nil
	case all && len(args) == 0:
		return fmt.Errorf("missing the message body: %s (or - to read stdin)", form)
	case len(args) == 0:
		return fmt.Errorf("missing the recipient and the message body: %s (or - to read stdin)", form)
	case len(args) == 1 && !all:
		return fmt.Errorf("missing the message body: swarm send %s \"<body>\" (or - to read stdin)", args[0])
	case all:
		return fmt.Errorf("--all takes only the message body, got %d arguments; quote the body: %s", len(args), form)
	default:
		return fmt.Errorf("the message body is one argument, got %d words after %s; quote it: swarm send %s %q", len(args)-1, args[0], args[0], strings.Join(args[1:], " "))
	}
}

func runSend(ctx context.Context, opts *SendOptions) error {
	app := opts.App
	if opts.replyToSet && strings.TrimSpace(opts.ReplyTo) == "" {
		return usagef("--reply-to needs a message number (12 or #12) or a protocol msg_id (see 'swarm inbox')")
	}
	for _, name := range protocolOnly {
		if opts.flagSet(name) {
			return usagef("--%s belongs to protocol messages: add --type (task_dispatch, task_result, ...)", name)
		}
	}
	if message.Kind(opts.Kind) == message.KindProtocol {
		return usagef("--kind protocol is built from an envelope: send it with --type T --task ID --payload JSON")
	}
	body := opts.Body
	if body == "-" {
		b, err := io.ReadAll(io.LimitReader(app.Stdin, message.MaxBody+1))
		if err != nil {
			return fmt.Errorf("read message body from stdin: %w", err)
		}
		body = strings.TrimRight(string(b), "\n")
	}
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l, cfg) // with the spawned agents
	if full := (*mailbox.DiskFullError)(nil); errors.As(err, &full) {
		return fmt.Errorf("send to %s: %w", opts.To, err) // say what was not stored
	}
	if err != nil {
		return err
	}
	defer st.Close()
	// The caller is who the door says; the verb checks --from.
	who, err := app.callerOf(ctx, st, cfg)
	if err != nil {
		return err
	}
	from := strings.TrimSpace(opts.From)
	d := message.Draft{From: from, To: opts.To, Kind: message.Kind(opts.Kind), Body: body}
	if opts.Urgent {
		d.Urgency = message.Urgent
	}
	// A near miss ("Backend") is answered with the name meant; anything
	// else is the poster's to judge.
	for _, n := range []struct{ what, name string }{{"sender", from}, {"recipient", opts.To}} {
		if n.name != "" && recipientIn(cfg, n.name) != nil && config.Suggest(n.name, cfg.Recipients()) != "" {
			return unknownName(n.what, n.name, cfg.Recipients(), "known names are")
		}
	}
	if opts.ReplyTo != "" {
		if looksNumeric.MatchString(opts.ReplyTo) {
			n, ok := swarm.MessageNumber(opts.ReplyTo)
			if !ok {
				return usagef("--reply-to needs a message number (12 or #12) or a protocol msg_id, got %q", opts.ReplyTo)
			}
			d.ReplyTo = n
		} else {
			orig, err := swarm.ResolveMessage(ctx, st, opts.ReplyTo)
			if err != nil {
				return err
			}
			d.ReplyTo = orig.ID
		}
	}

	poster, an := app.announcingPoster(st, l, cfg)
	sent, err := verbs.Send(ctx, who, poster, d, opts.All)
	if err != nil {
		return err
	}
	_, running, aerr := an.answer(0)
	// On a swarm spanning hosts, a recipient may run under another
	// supervisor: the database wakes it there (LISTEN/NOTIFY).
	elsewhere := map[string]string{}
	if holders, err := swarm.LiveHolders(ctx, st); err == nil {
		local, _ := supervisorPid(ctx, l)
		for agent, h := range holders {
			if !running || h != (mailbox.Holder{Host: thisHost(), PID: local}) {
				elsewhere[agent] = h.String()
			}
		}
	}
	out := make([]sentJSON, len(sent))
	anyElsewhere := false
	for i, m := range sent {
		d, _, _ := an.answer(m.ID)
		host := elsewhere[m.To]
		anyElsewhere = anyElsewhere || host != ""
		out[i] = sentJSON{Message: m, Supervisor: running, Interrupted: d.Interrupted, Joins: d.Joins,
			NotStarted: running && aerr == nil && !d.Started && m.To != config.Operator && host == "", State: d.State, RunsOn: host}
	}
	if app.JSON {
		return app.printJSON(out)
	}
	for _, s := range out {
		urgent := ""
		if s.IsUrgent() {
			urgent = "urgent "
		}
		fmt.Fprintf(app.Stdout, "sent %s#%d to %s (%s)%s\n", urgent, s.ID, s.To, s.Message.State, sendOutcome(s, aerr == nil))
	}
	switch {
	case !running && anyElsewhere:
		fmt.Fprintf(app.Stdout, "No supervisor runs in this clone; the supervisors named above find the mail through the database.\n")
	case !running:
		fmt.Fprintf(app.Stdout, "No supervisor is running: the mail waits in the database and is delivered at the next 'swarm up'.\n")
	case aerr != nil:
		fmt.Fprintf(app.Stdout, "The supervisor did not answer (%v); it finds the mail in the database within a second.\n", aerr)
	}
	return nil
}

// sentJSON is one message of send's --json output: the message, and what
// the supervisor said about it.
type sentJSON struct {
	message.Message
	// Supervisor is true when a running supervisor was told about it.
	Supervisor bool `json:"supervisor"`
	// Interrupted is true when it cut its recipient's running session
	// short; Joins when it joins that session at its next tool call.
	Interrupted bool `json:"interrupted"`
	Joins       bool `json:"joins"`
	// NotStarted is true when the recipient is configured but the running
	// supervisor does not run it (added to swarm.toml since it started).
	NotStarted bool `json:"not_started"`
	// State is the recipient's state when the mail came, when known.
	State string `json:"recipient_state,omitempty"`
	// RunsOn names the supervisor on another host (or clone) that runs
	// the recipient, <hostname>:<pid>: the database wakes it there.
	RunsOn string `json:"runs_on,omitempty"`
}

// notStartedHint says what to do about an agent the running supervisor
// does not run.
const notStartedHint = verbs.NotStartedHint

// sendOutcome is what the supervisor did with a message, as the end of its
// line ("" when there is nothing to add).
func sendOutcome(s sentJSON, answered bool) string {
	switch {
	case s.RunsOn != "" && s.To != config.Operator:
		return fmt.Sprintf(": %s runs under the supervisor %s, which the database wakes", s.To, s.RunsOn)
	case !s.Supervisor || !answered || s.To == config.Operator:
		return ""
	case s.NotStarted:
		return fmt.Sprintf(": %s is not started by the running supervisor (added to swarm.toml since it started, or left out by 'swarm up --agents'); %s", s.To, notStartedHint)
	case !s.IsUrgent():
		return ""
	case s.Interrupted:
		return ": interrupted its running session"
	case s.Joins:
		return ": it joins the running session at its next tool call"
	case s.State == string(lifecycle.Paused):
		return fmt.Sprintf(": not interrupted: %s is Paused ('swarm resume %s' lets it read the mail)", s.To, s.To)
	case s.State != "":
		return fmt.Sprintf(": not interrupted: %s is %s, not in a session; its next session starts with it", s.To, s.State)
	}
	return ""
}
