package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/verbs"
)

// QueueOptions are the inputs of `swarm queue`.
type QueueOptions struct {
	App    *App
	Op     string // top | start | complete | fail
	ID     string
	Reason string
}

func newQueueCmd(app *App, runF func(*QueueOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue top|start|complete|fail",
		Short: "Work the beads task queue one task at a time (strategy queue)",
		Long: `The task queue of an agent with strategy = "queue": the ready beads tasks
('bd ready'), highest priority first, epics left out.

  top              print the next task
  start <id>       claim it (bd update <id> --claim)
  complete <id>    close it once the work is committed (bd close)
  fail <id>        give it back as blocked, with --reason, which is reported
                   to your coordinator

After a session that took a task off the queue, the agent starts its next
session at once, without waiting for mail, until the queue is empty.
Run from a session it needs can_use_queue. --json prints the task (top) or
{"id", "op", "ok"}.`,
		Example: `  swarm queue top
  swarm queue start demo-6fx
  swarm queue complete demo-6fx --reason "fixed in 3f2a1c9"
  swarm queue fail demo-6fx --reason "needs a schema change I do not own"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	add := func(op, use, short string, nargs int, reason string) {
		opts := &QueueOptions{App: app, Op: op}
		sub := &cobra.Command{
			Use:   use,
			Short: short,
			Long:  cmd.Long,
			Args:  cobra.ExactArgs(nargs),
			RunE: func(c *cobra.Command, args []string) error {
				if nargs == 1 {
					opts.ID = args[0]
				}
				if op == "fail" && opts.Reason == "" {
					return usagef("swarm queue fail needs --reason \"<why>\": your coordinator is told")
				}
				if runF != nil {
					return runF(opts)
				}
				return runQueue(c.Context(), opts)
			},
		}
		if reason != "" {
			sub.Flags().StringVar(&opts.Reason, "reason", "", reason)
		}
		cmd.AddCommand(sub)
	}
	add("top", "top", "Print the next ready task", 0, "")
	add("start", "start <id>", "Claim a task and start it", 1, "")
	add("complete", "complete <id>", "Close a finished task", 1, "what was done (default \"done\")")
	add("fail", "fail <id>", "Give a task back as blocked, saying why", 1, "why it failed (required)")
	return cmd
}

func runQueue(ctx context.Context, opts *QueueOptions) error {
	app := opts.App
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	// In a session bd runs in its worktree as the agent (also when the
	// supervisor runs the command for the session: its own environment
	// has no BD_ACTOR of the agent's).
	dir, actor := l.Root, app.Env.Getenv("BD_ACTOR")
	if who.IsSession() {
		dir, actor = app.Cwd, who.Agent()
	}
	q := verbs.Queue{Client: &beads.Client{Dir: dir, Actor: actor, Timeout: cfg.Prompt.BDTimeout}, Caller: who}
	switch opts.Op {
	case "top":
		t, err := q.Top(ctx)
		if errors.Is(err, verbs.ErrQueueEmpty) && !app.JSON {
			fmt.Fprintln(app.Stdout, "the queue is empty")
			return nil
		}
		if err != nil && !errors.Is(err, verbs.ErrQueueEmpty) {
			return err
		}
		if app.JSON {
			if err != nil {
				return app.printJSON(nil)
			}
			return app.printJSON(t)
		}
		fmt.Fprintf(app.Stdout, "%s: [%s] P%d %s: %s\n", t.ID, t.Status, t.Priority, t.IssueType, t.Title)
		return nil
	case "start":
		err = q.Start(ctx, opts.ID)
	case "complete":
		err = q.Complete(ctx, opts.ID, opts.Reason)
	case "fail":
		if err = q.Fail(ctx, opts.ID); err == nil && who.IsSession() {
			_, err = verbs.Report(ctx, who, verbs.ReportRequest{Store: st, Poster: app.poster(st, l, cfg),
				Kind: mailbox.ReportBlocked, Task: opts.ID, Message: opts.Reason})
		}
	}
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(map[string]any{"id": opts.ID, "op": opts.Op, "ok": true})
	}
	fmt.Fprintf(app.Stdout, "%s %s\n", map[string]string{"start": "started", "complete": "completed", "fail": "gave back"}[opts.Op], opts.ID)
	return nil
}
