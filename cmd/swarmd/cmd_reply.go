package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// ReplyOptions are the inputs of `swarm reply`.
type ReplyOptions struct {
	App    *App
	Ref    string // the message answered: 12, #12 or a protocol msg_id
	ID     int64
	Body   string
	Urgent bool
}

func newReplyCmd(app *App, runF func(*ReplyOptions) error) *cobra.Command {
	opts := &ReplyOptions{App: app}
	cmd := &cobra.Command{
		Use:   "reply <id> <body>",
		Short: "Answer a message in its thread",
		Long: `Answer message <id> (12 or #12, or a protocol message's msg_id): the
reply goes to its sender, in its thread. The sender is $SWARM_AGENT (inside an agent session), else operator.
<body> of "-" reads the body from stdin.

When operator replies to mail sent to operator, that mail becomes done
('swarm inbox operator' shows what is still waiting).

--json prints the reply as 'swarm send --json' prints a message.`,
		Example: `  swarm inbox operator
  swarm reply 12 "use postgres"
  swarm reply '#12' "stop: the schema changed" --urgent`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref, opts.Body = args[0], args[1]
			if looksNumeric.MatchString(strings.TrimSpace(opts.Ref)) {
				id, err := parseID("the message", opts.Ref)
				if err != nil {
					return err
				}
				opts.ID = id
			}
			if runF != nil {
				return runF(opts)
			}
			return runReply(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Urgent, "urgent", "u", false, "interrupt the recipient's running session")
	return cmd
}

func runReply(ctx context.Context, opts *ReplyOptions) error {
	app := opts.App
	body := opts.Body
	if body == "-" {
		b, err := io.ReadAll(io.LimitReader(app.Stdin, message.MaxBody+1))
		if err != nil {
			return fmt.Errorf("read the reply from stdin: %w", err)
		}
		body = strings.TrimRight(string(b), "\n")
	}
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	from := who.Name()
	if opts.ID == 0 {
		m, err := swarm.ResolveMessage(ctx, st, opts.Ref) // a protocol msg_id
		if err != nil {
			return err
		}
		opts.ID = m.ID
	}
	orig, err := st.Message(ctx, opts.ID)
	if err != nil {
		return fmt.Errorf("no message #%d to reply to: 'swarm inbox %s' lists the mail with its ids", opts.ID, from)
	}
	d := message.Draft{From: from, Body: body}
	if opts.Urgent {
		d.Urgency = message.Urgent
	}
	m, err := verbs.Reply(ctx, who, app.poster(st, l, cfg), opts.ID, d)
	if err != nil {
		return err
	}
	// Answered: mail to operator is done once operator replies to it.
	if from == config.Operator && orig.To == config.Operator {
		if _, err := st.MarkOperatorDone(ctx, []int64{orig.ID}); err != nil {
			return err
		}
	}
	if app.JSON {
		return app.printJSON([]message.Message{m})
	}
	urgent := ""
	if m.IsUrgent() {
		urgent = "urgent "
	}
	fmt.Fprintf(app.Stdout, "sent %s#%d to %s, in reply to #%d (%s)\n", urgent, m.ID, m.To, opts.ID, m.State)
	return nil
}
