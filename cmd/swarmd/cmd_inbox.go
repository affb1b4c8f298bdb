package main

import (
	"context"
	"fmt"
	"github.com/swarmhq/swarm/verbs"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/termsafe"
)

// InboxOptions are the inputs of `swarm inbox`.
type InboxOptions struct {
	App   *App
	Name  string
	State string
	Sent  bool
	Limit int
	// Grep, From and Kind narrow the listing (mailbox.Filter).
	Grep, From, Kind string
	// MarkRead marks the listed mail to operator done.
	MarkRead bool
	Now      func() time.Time
}

func newInboxCmd(app *App, runF func(*InboxOptions) error) *cobra.Command {
	opts := &InboxOptions{App: app, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "inbox <agent|operator>",
		Short: "List an agent's (or operator's) messages and what happened to each",
		Long: `List the messages sent to an agent, or to operator (what the agents told you),
oldest first, with each message's delivery state:

  queued         waiting for the agent's next session
  delivered (sN) shown in session N, which has not completed yet
  done (sN)      session N completed with it

A protocol message shows its type, its msg_id and its ACK: pending (with
the time left once delivered), acked, overdue or cancelled, or "-" when it
asks for none. --json prints each message with its envelope under
"protocol" and its ACK record under "ack" ({"required", "state",
"timeout_sec", "due_at", "acked_at"}).

With --sent, list the messages the agent sent instead, so a sender can see
what became of each. --grep TEXT keeps the messages whose body contains
TEXT (exactly, case-sensitive), --from NAME those NAME sent, --kind KIND
those of a kind (message, task, status, nudge, protocol); --limit counts
what is left. 'swarm thread <id>' shows a message with its replies.

Mail to operator stays queued until you answer it ('swarm reply <id>') or
mark it read: 'swarm inbox operator --mark-read' marks what it lists done.`,
		Example: `  swarm inbox backend
  swarm inbox operator --state queued
  swarm inbox backend --sent --json --limit 0
  swarm inbox operator --from backend --grep healthz
  swarm inbox backend --kind task --json
  swarm inbox operator --state queued --mark-read`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.completeAgents(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runInbox(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.State, "state", "", "only messages in this state: queued, delivered or done")
	f.BoolVar(&opts.Sent, "sent", false, "list the messages this agent sent")
	f.IntVar(&opts.Limit, "limit", 50, "show the newest N messages (0 means all)")
	f.BoolVar(&opts.MarkRead, "mark-read", false, "with operator: mark the mail listed done")
	f.StringVar(&opts.Grep, "grep", "", "only messages whose body contains `TEXT` (case-sensitive)")
	f.StringVar(&opts.From, "from", "", "only messages from this sender")
	f.StringVar(&opts.Kind, "kind", "", "only messages of this kind: message, task, status, nudge or protocol")
	cmd.RegisterFlagCompletionFunc("from", app.completeAgents(true))
	cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]cobra.Completion{"queued", "delivered", "done"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runInbox(ctx context.Context, opts *InboxOptions) error {
	app := opts.App
	if opts.Limit < 0 {
		return usagef("--limit must be 0 (all) or more, got %d", opts.Limit)
	}
	if opts.State != "" && !slices.Contains(message.States, message.State(opts.State)) {
		return usagef("--state must be queued, delivered or done, got %q", opts.State)
	}
	if err := checkInboxFilters(opts); err != nil {
		return err
	}
	if opts.MarkRead && (opts.Name != message.Operator || opts.Sent) {
		return usagef("--mark-read marks mail to operator read: use it with 'swarm inbox operator' (without --sent); an agent's mail becomes done when its session completes")
	}
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l, cfg) // with the spawned agents
	if err != nil {
		return err
	}
	defer st.Close()
	if !message.Reserved(opts.Name) {
		if _, ok := cfg.Agent(opts.Name); !ok {
			return unknownName("agent", opts.Name, cfg.Recipients(), "known names are")
		}
	}
	ms, err := st.Inbox(ctx, opts.Name, mailbox.Filter{State: message.State(opts.State), Sent: opts.Sent, Limit: opts.Limit,
		From: opts.From, Kind: message.Kind(opts.Kind), Grep: opts.Grep})
	if err != nil {
		return err
	}
	marked := int64(0)
	if opts.MarkRead {
		who, err := app.callerOf(ctx, st, cfg)
		if err != nil {
			return err
		}
		var ids []int64
		for _, m := range ms {
			if m.State != message.Done {
				ids = append(ids, m.ID)
			}
		}
		if marked, err = verbs.MarkRead(ctx, who, st, opts.Name, ids); err != nil {
			return err
		}
		for i := range ms {
			ms[i].State = message.Done
		}
	}
	if app.JSON {
		return app.printJSON(withEnvelopes(ms))
	}
	if len(ms) == 0 {
		fmt.Fprintf(app.Stdout, "no messages for %s%s\n", opts.Name, inboxFilterText(opts))
		return nil
	}
	now := opts.Now()
	tw := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
	peer := "FROM"
	if opts.Sent {
		peer = "TO"
	}
	fmt.Fprintf(tw, "ID\t%s\tKIND\tSTATE\tAGE\tBODY\n", peer)
	for _, m := range ms {
		who := m.From
		if opts.Sent {
			who = m.To
		}
		body := firstLineCut(m.Body, 60)
		if m.IsUrgent() {
			body = "[URGENT] " + body
		}
		kind := string(m.Kind)
		if m.Kind == message.KindProtocol && m.MsgID != "" {
			// A protocol message: its type, msg_id and ACK, then the summary.
			kind = m.ProtocolType
			body = m.MsgID
			if l := ackLabel(m, now); l != "-" {
				body += " · ACK " + l
			}
			body += " · " + firstLineCut(m.Body, 60)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.ID, who, kind, stateLabel(m), humanAge(now.Sub(m.CreatedAt)), body)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if opts.MarkRead {
		fmt.Fprintf(app.Stdout, "marked %d message(s) read (done)\n", marked)
	}
	return nil
}

// checkInboxFilters refuses a --kind that is no kind and a --from that
// cannot mean anything with --sent.
func checkInboxFilters(opts *InboxOptions) error {
	if opts.Kind != "" && !message.Kind(opts.Kind).Valid() {
		kinds := make([]string, len(message.Kinds))
		for i, k := range message.Kinds {
			kinds[i] = string(k)
		}
		return usagef("--kind must be one of %s, got %q", strings.Join(kinds, ", "), opts.Kind)
	}
	if opts.From != "" && opts.Sent {
		return usagef("--from picks a sender, and with --sent the sender is %s: drop one of them", opts.Name)
	}
	return nil
}

// inboxFilterText says which filters left the listing empty.
func inboxFilterText(opts *InboxOptions) string {
	var parts []string
	if opts.From != "" {
		parts = append(parts, "from "+opts.From)
	}
	if opts.Kind != "" {
		parts = append(parts, "of kind "+opts.Kind)
	}
	if opts.Grep != "" {
		parts = append(parts, fmt.Sprintf("containing %q", opts.Grep))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, ", ")
}

func stateLabel(m message.Message) string {
	if m.SessionSeq != nil {
		return fmt.Sprintf("%s (s%d)", m.State, *m.SessionSeq)
	}
	return string(m.State)
}

// humanAge renders a duration the way the prompt does: 12s, 2m, 3h, 2d.
func humanAge(d time.Duration) string { return promptpipe.HumanAge(d) }

// firstLineCut is the first line of s, at most n runes, with terminal
// controls rendered visibly: message bodies and causes come from agents.
func firstLineCut(s string, n int) string {
	s = termsafe.String(s)
	line, _, more := strings.Cut(s, "\n")
	r := []rune(line)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}
