package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/swarm"
)

// ThreadOptions are the inputs of `swarm thread`.
type ThreadOptions struct {
	App *App
	Ref string // 12, #12 or a protocol msg_id
	Now func() time.Time
}

func newThreadCmd(app *App, runF func(*ThreadOptions) error) *cobra.Command {
	opts := &ThreadOptions{App: app, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "thread <id>",
		Short: "Show a message's whole thread as a tree",
		Long: `Show the thread message <id> belongs to (12 or #12, or a protocol message's
msg_id): its first message, and under each message the replies to it,
oldest first, each with its sender and recipient, delivery state, age and
the first line of its body. The message asked for, when it is a reply,
is marked with ◂.

--json prints the thread's messages oldest first, as 'swarm inbox --json'
prints them; "reply_to" says what each one answers.`,
		Example: `  swarm thread 12
  swarm thread '#12' --json
  swarm thread task_dispatch-T-42-1763900000000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runThread(cmd.Context(), opts)
		},
	}
	return cmd
}

func runThread(ctx context.Context, opts *ThreadOptions) error {
	app := opts.App
	if looksNumeric.MatchString(opts.Ref) {
		if _, err := parseID("the message", opts.Ref); err != nil {
			return err
		}
	}
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := swarm.ResolveMessage(ctx, st, opts.Ref)
	if err != nil {
		return err
	}
	ms, err := st.Thread(ctx, m.ID)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(withEnvelopes(ms))
	}
	now := opts.Now()
	for _, r := range message.Tree(ms) {
		line := r.Prefix + threadLine(r.Message, now)
		if r.Message.ID == m.ID && r.Depth > 0 {
			line += "  ◂"
		}
		fmt.Fprintln(app.Stdout, line)
	}
	return nil
}

// threadLine is one message of a thread: "#12 operator → backend ·
// done (s2) · 5m: the body's first line".
func threadLine(m message.Message, now time.Time) string {
	body := firstLineCut(m.Body, 70)
	if m.IsUrgent() {
		body = "[URGENT] " + body
	}
	what := ""
	switch {
	case m.Kind == message.KindProtocol && m.MsgID != "":
		what = " · " + m.MsgID
		if l := ackLabel(m, now); l != "-" {
			what += " · ACK " + l
		}
	case m.Kind != message.KindMessage:
		what = " · " + string(m.Kind)
	}
	return fmt.Sprintf("#%d %s → %s%s · %s · %s: %s", m.ID, m.From, m.To, what, stateLabel(m), humanAge(now.Sub(m.CreatedAt)), body)
}
