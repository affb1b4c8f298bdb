package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/message"
)

// SendOptions are the inputs of `swarm send`.
type SendOptions struct {
	App     *App
	To      string
	Body    string
	All     bool
	Urgent  bool
	From    string
	ReplyTo int64
	Kind    string

	replyToSet bool
}

func init() { commands = append(commands, newSendCmd) }

func newSendCmd(app *App) *cobra.Command {
	opts := &SendOptions{App: app}
	cmd := &cobra.Command{
		Use:   "send <to> <body>",
		Short: "Send a message to an agent (or to operator)",
		Long: `Send a message to an agent's mailbox. It is shown in the agent's next
prompt. With --urgent, a running session is interrupted at once (or, with
interrupt = "boundary", the message joins it at the next tool call).

The sender is --from, else $SWARM_AGENT (set inside agent sessions), else
operator. <body> of "-" reads the body from stdin. Sending works whether or
not 'swarm up' is running; a running supervisor is woken at once.`,
		Example: `  swarm send backend "the /users endpoint returns 500"
  swarm send backend "stop: the migration is wrong" --urgent
  swarm send --all "standup: post your status to operator"
  git diff | swarm send reviewer -
  swarm send operator "done with the API" --from backend --reply-to 12`,
		Args:              func(cmd *cobra.Command, args []string) error { return sendArgs(opts.All, args) },
		ValidArgsFunction: app.completeAgents(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.replyToSet = cmd.Flags().Changed("reply-to")
			if opts.All {
				opts.Body = args[0]
			} else {
				opts.To, opts.Body = args[0], args[1]
			}
			return runSend(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.All, "all", false, "broadcast to every agent except the sender")
	f.BoolVarP(&opts.Urgent, "urgent", "u", false, "interrupt the recipient's running session")
	f.StringVar(&opts.From, "from", "", "sender name (default $SWARM_AGENT, else operator)")
	f.Int64Var(&opts.ReplyTo, "reply-to", 0, "answer message `ID`, in its thread")
	f.StringVar(&opts.Kind, "kind", string(message.KindMessage), "message, task, status, nudge or protocol (status mail never wakes an idle agent)")
	cmd.RegisterFlagCompletionFunc("from", app.completeAgents(true))
	cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]cobra.Completion{"message", "task", "status", "nudge", "protocol"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
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
	if opts.ReplyTo < 0 || (opts.ReplyTo == 0 && opts.replyToSet) {
		return usagef("--reply-to needs a message id (see 'swarm inbox'), got %d", opts.ReplyTo)
	}
	body := opts.Body
	if body == "-" {
		b, err := io.ReadAll(io.LimitReader(app.Stdin, message.MaxBody+1))
		if err != nil {
			return fmt.Errorf("read message body from stdin: %w", err)
		}
		body = strings.TrimRight(string(b), "\n")
	}
	from := opts.From
	if from == "" {
		from = app.Env.Getenv("SWARM_AGENT")
	}
	if from == "" {
		from = config.Operator
	}
	d := message.Draft{From: from, To: opts.To, Kind: message.Kind(opts.Kind), Body: body, ReplyTo: opts.ReplyTo}
	if opts.Urgent {
		d.Urgency = message.Urgent
	}
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	// A near miss ("Backend") is answered with the name meant; anything
	// else is the poster's to judge.
	for _, n := range []struct{ what, name string }{{"sender", from}, {"recipient", opts.To}} {
		if n.name != "" && recipientIn(cfg, n.name) != nil && config.Suggest(n.name, cfg.Recipients()) != "" {
			return unknownName(n.what, n.name, cfg.Recipients(), "known names are")
		}
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()

	poster, an := app.announcingPoster(st, l, cfg)
	var sent []message.Message
	if opts.All {
		sent, err = poster.Broadcast(ctx, d)
	} else {
		var m message.Message
		m, err = poster.Post(ctx, d)
		sent = []message.Message{m}
	}
	if err != nil {
		return err
	}
	_, running, aerr := an.answer(0)
	out := make([]sentJSON, len(sent))
	for i, m := range sent {
		d, _, _ := an.answer(m.ID)
		out[i] = sentJSON{Message: m, Supervisor: running, Interrupted: d.Interrupted, Joins: d.Joins,
			NotStarted: running && aerr == nil && !d.Started && m.To != config.Operator, State: d.State}
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
}

// notStartedHint says what to do about an agent the running supervisor
// does not run.
const notStartedHint = "restart 'swarm up' to run it"

// sendOutcome is what the supervisor did with a message, as the end of its
// line ("" when there is nothing to add).
func sendOutcome(s sentJSON, answered bool) string {
	switch {
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
