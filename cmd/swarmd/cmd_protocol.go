package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/worktree"
)

// ProtocolLogOptions are the inputs of `swarm protocol log`.
type ProtocolLogOptions struct {
	App   *App
	Task  string
	Limit int
	Now   func() time.Time
}

func newProtocolCmd(app *App, runF func(*ProtocolLogOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "protocol",
		Short: "Protocol messages (AMP/1.0): the typed chain of a task",
		Long: `Protocol messages are typed mail (task_dispatch, task_result,
review_request, review_verdict, escalation, ack, ping) that the runtime
checks before storing: see 'swarm send --type', 'swarm ack' and the README's
Protocol section.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	opts := &ProtocolLogOptions{App: app, Now: time.Now}
	logCmd := &cobra.Command{
		Use:   "log",
		Short: "List a task's protocol messages, oldest first",
		Long: `List the protocol messages about a task (--task), oldest first: its
dispatch, the ACKs, results, review requests and verdicts. Without --task,
the newest protocol messages of every task (--limit, default 50; 0 = all).

Each line shows the message's number, msg_id, type, sender and recipient,
its ACK state and deadline, and its summary. --json prints the envelopes
exactly as stored.`,
		Example: `  swarm protocol log --task T-42
  swarm protocol log --task T-42 --json
  swarm protocol log --limit 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runProtocolLog(cmd.Context(), opts)
		},
	}
	f := logCmd.Flags()
	f.StringVar(&opts.Task, "task", "", "only the messages about task `ID`")
	f.IntVar(&opts.Limit, "limit", 50, "without --task, the newest N messages (0 means all)")
	cmd.AddCommand(logCmd)
	return cmd
}

func runProtocolLog(ctx context.Context, opts *ProtocolLogOptions) error {
	app := opts.App
	if opts.Limit < 0 {
		return usagef("--limit must be 0 (all) or more, got %d", opts.Limit)
	}
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	ms, err := verbs.ProtocolLog(ctx, who, app.protocol(st, l, cfg), opts.Task, opts.Limit)
	if err != nil {
		return err
	}
	if app.JSON {
		envs := make([]protocol.Envelope, 0, len(ms))
		for _, m := range ms {
			env, err := mailbox.Envelope(m)
			if err != nil {
				return fmt.Errorf("message #%d: %w", m.ID, err)
			}
			envs = append(envs, env)
		}
		return app.printJSON(envs)
	}
	if len(ms) == 0 {
		if opts.Task != "" {
			fmt.Fprintf(app.Stdout, "no protocol messages about task %s\n", opts.Task)
		} else {
			fmt.Fprintln(app.Stdout, "no protocol messages")
		}
		return nil
	}
	now := opts.Now()
	tw := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tMSG_ID\tFROM\tTO\tACK\tAGE\tSUMMARY\n")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.MsgID, m.From, m.To, ackLabel(m, now), humanAge(now.Sub(m.CreatedAt)), firstLineCut(m.Body, 70))
	}
	return tw.Flush()
}

// ackLabel is a message's ACK state for tables: "-" when it asks for none,
// else the state, with the time left while pending.
func ackLabel(m message.Message, now time.Time) string {
	a := m.Ack
	if a == nil || !a.Required {
		return "-"
	}
	switch {
	case a.State == message.AckPending && a.DueAt == nil:
		return fmt.Sprintf("pending (%s once delivered)", protocol.Age(time.Duration(a.Timeout)*time.Second))
	case a.State == message.AckPending:
		if left := a.DueAt.Sub(now); left > 0 {
			return fmt.Sprintf("pending (due in %s)", protocol.Age(left))
		}
		return "pending (due now)"
	case a.State == message.AckOverdue:
		return fmt.Sprintf("overdue (%s late)", protocol.Age(now.Sub(*a.DueAt)))
	}
	return string(a.State)
}

// mailJSON is a message as the CLI prints it: the stored message, and for
// protocol mail its envelope under "protocol" (its ACK record is "ack").
type mailJSON struct {
	message.Message
	Protocol *protocol.Envelope `json:"protocol,omitempty"`
}

func withEnvelope(m message.Message) mailJSON {
	out := mailJSON{Message: m}
	if m.Kind == message.KindProtocol {
		if env, err := mailbox.Envelope(m); err == nil && env.MsgID != "" {
			out.Protocol = &env
		}
	}
	return out
}

func withEnvelopes(ms []message.Message) []mailJSON {
	out := make([]mailJSON, len(ms))
	for i, m := range ms {
		out[i] = withEnvelope(m)
	}
	return out
}

// protocol is this process's protocol service: the mail service that
// pokes a running supervisor, git for commit hashes, and escalations
// raised here and announced to the supervisor.
func (a *App) protocol(st mailbox.Store, l repo.Layout, cfg *config.Config) *swarm.Protocol {
	return &swarm.Protocol{
		Store:  st,
		Poster: a.poster(st, l, cfg),
		Commits: func(ctx context.Context, hash string) (bool, error) {
			m, err := worktree.New(ctx, worktree.Options{Root: l.Root})
			if err != nil {
				return false, err
			}
			return m.CommitExists(ctx, hash)
		},
		Now: time.Now,
		Base: func(ctx context.Context) string {
			// Not recorded yet: the branch checked out at the root, which
			// the first swarm up records. Nothing is recorded from here.
			m, err := worktree.New(ctx, worktree.Options{Root: l.Root})
			if err != nil {
				return ""
			}
			base, _ := m.BaseBranch(ctx)
			return base
		},
		Raise: func(ctx context.Context, d escalation.Draft) (escalation.Escalation, bool, error) {
			e, created, err := swarm.Raise(ctx, st, d)
			if err == nil {
				pokeEscalation(ctx, l, e.ID) // a running supervisor applies the hold now
			}
			return e, created, err
		},
	}
}

// protocolRefusal reports a protocol message that failed its checks: every
// failing field by its JSON path, one per line, and what became of a
// branch_violation escalation; exit 2. Other errors pass through.
func protocolRefusal(w io.Writer, err error) error {
	var ve *protocol.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	for _, f := range ve.Fields {
		fmt.Fprintf(w, "swarm: %s\n", f.Error())
	}
	fmt.Fprintln(w, "swarm: nothing was stored; fix the fields above and send again")
	var bv *verbs.BranchViolationError
	if errors.As(err, &bv) && bv.Note() != "" {
		fmt.Fprintf(w, "swarm: %s\n", bv.Note())
	}
	return &codeError{code: exitUsage}
}

// ackOf is the msg_id an ACK's payload acknowledges.
func ackOf(payload []byte) string {
	var a protocol.Ack
	if json.Unmarshal(payload, &a) != nil {
		return "?"
	}
	return a.AckOf
}
