package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
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
		Args: func(cmd *cobra.Command, args []string) error {
			if opts.All {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
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
	l, cfg, err := app.loadConfig()
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l)
	if err != nil {
		return err
	}
	defer st.Close()

	// From inside a session, the session's stored capabilities decide.
	who, err := app.callerOf(ctx, st, cfg)
	if err != nil {
		return err
	}
	if err := who.require(mode.CanMessage, "swarm send"); err != nil {
		return err
	}
	if d.Kind == message.KindTask {
		if err := who.require(mode.CanDispatch, "swarm send --kind task (a dispatch)"); err != nil {
			return err
		}
	}

	poster := app.poster(st, l, cfg)
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
	if app.JSON {
		return app.printJSON(sent)
	}
	for _, m := range sent {
		urgent := ""
		if m.IsUrgent() {
			urgent = "urgent "
		}
		fmt.Fprintf(app.Stdout, "sent %s#%d to %s (%s)\n", urgent, m.ID, m.To, m.State)
	}
	return nil
}
