package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/worktree"
)

// WorkflowOptions are the inputs of `swarm workflow <action>`.
type WorkflowOptions struct {
	App    *App
	Action string // start, status, history, signal, abort, merge
	Name   string // start: the workflow; status: one workflow or ""
	Item   string
	// start
	Title    string
	Criteria []string
	Risk     string
	Complex  bool
	// signal
	Status    string
	Next      string
	Message   string
	Artifacts []string
	// abort
	Note string
}

// newWorkflowCmd builds `swarm workflow` and its actions; a non-nil runF
// runs instead of an action, with the parsed options (the flag tests' seam).
func newWorkflowCmd(app *App, runF func(*WorkflowOptions) error) *cobra.Command {
	parent := &cobra.Command{
		Use:   "workflow",
		Short: "Run gated workflows: dev-review loops and dev → QA pipelines",
		Long: `Workflows are state machines the supervisor runs over work items
(DESIGN §9.3); [[workflow]] in swarm.toml binds their roles to agents.

  dev-review   a task goes to dev (a task_dispatch from 'swarm'), dev's
               task_result (after the optional CI command) goes to the
               reviewer as a review_request, a rejection goes back to dev
               with the reviewer's issues verbatim, and at max_rejects the
               item is locked for the operator (hallucination_lock).
               Approved items merge with 'swarm workflow merge'.
  dev-qa       items go START → [INITIALIZER →] DEV_READY → DEV → QA_READY
               → QA → QA_PASSED | DEV_FEEDBACK, one at a time and one agent
               at a time; the stage's agent ends its stage with
               'swarm workflow signal'.

The supervisor routes, counts, locks and times every step: none of it
costs a model call. Agents answer the runtime's address 'swarm':
  swarm send swarm --type task_result --reply-to <dispatch> --payload '{...}'
  swarm send swarm --type review_verdict --reply-to <request> --payload '{...}'

merge and abort are the operator's (refused inside a session).`,
		Example: `  swarm workflow start review --item T-42 --title "Add --dry-run" --criterion "flag documented" --criterion "tests pass"
  swarm workflow start qa --item F-1 --title "login page" --complex
  swarm workflow status --json
  swarm workflow history T-42
  swarm workflow signal --item F-1 --status COMPLETE --next QA_READY
  swarm workflow merge T-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	add := func(action, use, short, example string, nargs cobra.PositionalArgs, flags func(*WorkflowOptions, *cobra.Command)) {
		opts := &WorkflowOptions{App: app, Action: action}
		c := &cobra.Command{
			Use:     use,
			Short:   short,
			Example: example,
			Args:    nargs,
			RunE: func(cmd *cobra.Command, args []string) error {
				switch action {
				case "start":
					opts.Name = args[0]
				case "status":
					if len(args) > 0 {
						opts.Name = args[0]
					}
				case "history", "abort", "merge":
					opts.Item = args[0]
				}
				if runF != nil {
					return runF(opts)
				}
				return runWorkflow(cmd.Context(), opts)
			},
		}
		if flags != nil {
			flags(opts, c)
		}
		parent.AddCommand(c)
	}
	add("start", "start <workflow> --item ID --title \"...\" [--criterion \"...\"]... [--risk R] [--complex]",
		"Start a work item in a workflow",
		`  swarm workflow start review --item T-42 --title "Add --dry-run" --criterion "flag documented" --risk high
  swarm workflow start qa --item F-1 --title "login page" --complex`,
		cobra.ExactArgs(1), func(o *WorkflowOptions, c *cobra.Command) {
			c.Flags().StringVar(&o.Item, "item", "", "the item's id: a beads id or any word (letters, digits, - _ .)")
			c.Flags().StringVar(&o.Title, "title", "", "what to build, one line")
			c.Flags().StringArrayVar(&o.Criteria, "criterion", nil, "an acceptance criterion, verbatim (repeat it; dev-review needs one)")
			c.Flags().StringVar(&o.Risk, "risk", "medium", "low, medium or high (high waits for the operator's approval before its merge)")
			c.Flags().BoolVar(&o.Complex, "complex", false, "dev-qa: the item's stages get complex_timeout instead of timeout")
		})
	add("status", "status [<workflow>]", "Show the workflows' items and stages",
		"  swarm workflow status\n  swarm workflow status qa --json", cobra.MaximumNArgs(1), nil)
	add("history", "history <item>", "Show an item's transitions, with what triggered each",
		"  swarm workflow history T-42 --json", cobra.ExactArgs(1), nil)
	add("signal", "signal --status COMPLETE|ERROR|TIMEOUT --next STATE [--item ID] [--message \"...\"] [--artifact PATH]...",
		"End your dev-qa stage (run by the stage's agent)",
		`  swarm workflow signal --item F-1 --status COMPLETE --next QA_READY --message "login form done"
  swarm workflow signal --item F-1 --status COMPLETE --next DEV_FEEDBACK --message "submit does nothing on empty password"`,
		cobra.NoArgs, func(o *WorkflowOptions, c *cobra.Command) {
			c.Flags().StringVar(&o.Item, "item", "", "the item (default: the one whose stage is yours)")
			c.Flags().StringVar(&o.Status, "status", "", "COMPLETE, ERROR or TIMEOUT")
			c.Flags().StringVar(&o.Next, "next", "", "the state the item moves to (with COMPLETE)")
			c.Flags().StringVar(&o.Message, "message", "", "what you did or found: the next stage's agent reads it verbatim")
			c.Flags().StringArrayVar(&o.Artifacts, "artifact", nil, "a path you created (repeat it)")
		})
	add("abort", "abort <item> [--note \"...\"]", "End a live item (operator)",
		"  swarm workflow abort T-42 --note \"superseded by T-50\"", cobra.ExactArgs(1), func(o *WorkflowOptions, c *cobra.Command) {
			c.Flags().StringVar(&o.Note, "note", "", "why, for the history")
		})
	add("merge", "merge <item>", "Merge an approved dev-review item's reviewed commit into the base branch (operator)",
		"  swarm workflow merge T-42", cobra.ExactArgs(1), nil)
	return parent
}

func runWorkflow(ctx context.Context, opts *WorkflowOptions) error {
	app := opts.App
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	switch opts.Action {
	case "start":
		it, err := verbs.StartItem(ctx, who, st, cfg, verbs.StartRequest{Workflow: opts.Name, Item: opts.Item, Title: opts.Title,
			Criteria: opts.Criteria, Risk: opts.Risk, Complex: opts.Complex})
		if err != nil {
			return workflowErr(err)
		}
		pokeSupervisor(l)
		if app.JSON {
			return app.printJSON(it)
		}
		fmt.Fprintf(app.Stdout, "item %s started in workflow %s (%s): %s\n", it.ID, it.Workflow, it.Kind, it.State)
		return nil
	case "status":
		sts, err := verbs.WorkflowStatus(ctx, who, st, cfg, opts.Name)
		if err != nil {
			return workflowErr(err)
		}
		if app.JSON {
			if opts.Name != "" {
				return app.printJSON(sts[0])
			}
			if sts == nil {
				sts = []verbs.WorkflowView{}
			}
			return app.printJSON(sts)
		}
		if len(sts) == 0 {
			fmt.Fprintln(app.Stdout, "no workflows: add a [[workflow]] to swarm.toml ('swarm workflow --help')")
			return nil
		}
		printWorkflows(app, sts, time.Now())
		return nil
	case "history":
		if _, err := st.Item(ctx, opts.Item); err != nil {
			return fmt.Errorf("no item %s: 'swarm workflow status' lists the items", opts.Item)
		}
		h, err := verbs.History(ctx, who, st, opts.Item)
		if err != nil {
			return err
		}
		if app.JSON {
			return app.printJSON(h)
		}
		tw := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tFROM\tTO\tBY\tCAUSE")
		for _, e := range h {
			from := string(e.From)
			if from == "" {
				from = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), from, e.To, e.TriggeredBy, termsafe.String(e.Cause))
		}
		return tw.Flush()
	case "signal":
		agent := who.Agent()
		it, err := verbs.SignalItem(ctx, who, st, cfg, verbs.SignalRequest{Item: opts.Item, Status: opts.Status, Next: opts.Next,
			Message: opts.Message, Artifacts: opts.Artifacts})
		var ill *verbs.IllegalSignalError
		if errors.As(err, &ill) {
			slog.Warn("illegal workflow signal refused; the state is kept", "item", ill.Item.ID, "state", string(ill.Item.State), "next", ill.Next, "agent", agent)
		}
		if err != nil {
			return workflowErr(err)
		}
		pokeSupervisor(l)
		if app.JSON {
			return app.printJSON(it)
		}
		fmt.Fprintf(app.Stdout, "item %s: %s\n", it.ID, it.State)
		return nil
	case "abort":
		it, err := verbs.AbortItem(ctx, who, st, opts.Item, opts.Note)
		if err != nil {
			return err
		}
		pokeSupervisor(l)
		if app.JSON {
			return app.printJSON(it)
		}
		fmt.Fprintf(app.Stdout, "item %s aborted; its agents' branches keep their work\n", it.ID)
		return nil
	case "merge":
		q, err := mergeQueue(ctx, l, cfg, st, app.poster(st, l, cfg))
		if err != nil {
			return err
		}
		// What was recovered is printed below; the worktree package's log
		// line of each would say it twice.
		prevLog := slog.Default()
		slog.SetDefault(slog.New(dropMessage{prevLog.Handler(), worktree.RecoveredLogMessage}))
		defer slog.SetDefault(prevLog)
		it, landing, err := verbs.MergeItem(ctx, who, st, cfg, q, opts.Item)
		if !app.JSON {
			// What an interrupted merge left was finished or dropped
			// first, whether or not this one then succeeded.
			for _, r := range landing.Recovered {
				fmt.Fprintf(app.Stdout, "recovered: %s\n", termsafe.String(r.Text))
			}
		}
		if err != nil {
			return err
		}
		pokeSupervisor(l)
		if app.JSON {
			recovered := []string{}
			for _, r := range landing.Recovered {
				recovered = append(recovered, r.Text)
			}
			return app.printJSON(map[string]any{"item": it, "merge_commit": landing.Commit, "checkout": landing.Checkout, "recovered": recovered})
		}
		printMerged(app, it.ID, it.ReviewCommit, landing.Commit)
		if landing.Checkout != "" {
			fmt.Fprintln(app.Stdout, termsafe.String(landing.Checkout))
		}
		return nil
	}
	return fmt.Errorf("unknown workflow action %q", opts.Action)
}

func printMerged(app *App, item, reviewed, commit string) {
	if commit == "" {
		fmt.Fprintf(app.Stdout, "item %s merged: its reviewed commit %.12s was on the base branch already\n", item, reviewed)
		return
	}
	fmt.Fprintf(app.Stdout, "item %s merged: reviewed commit %.12s is on the base branch as %.12s; its agent's worktree and branch are kept\n", item, reviewed, commit)
}

// workflowGit is the worktree manager the workflows' merges and the merge
// queue use.
func workflowGit(ctx context.Context, l repo.Layout, dir string, meta worktree.MetaStore) (swarm.GitWorktrees, error) {
	m, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: dir, Orphans: l.Orphans(), Meta: meta})
	if err != nil {
		return swarm.GitWorktrees{}, err
	}
	return swarm.GitWorktrees{M: m}, nil
}

// mergeQueue is the merge queue this command runs itself (LandNow): its
// conflicts and failures go to the agents as mail through poster (nil:
// a poster without the supervisor's poke).
func mergeQueue(ctx context.Context, l repo.Layout, cfg *config.Config, st mailbox.Store, poster *mailbox.Poster) (*swarm.MergeQueue, error) {
	git, err := workflowGit(ctx, l, cfg.Worktree.Dir, st)
	if err != nil {
		return nil, err
	}
	if poster == nil {
		poster = mailbox.NewPoster(st, cfg.AgentNames(), nil)
	}
	return swarm.NewMergeQueue(st, git, cfg, poster), nil
}

// workflowErr makes the workflows' input errors usage errors (exit 2).
func workflowErr(err error) error {
	var ue *verbs.UsageError
	if errors.As(err, &ue) {
		return usagef("%s", ue.Msg)
	}
	return err
}

func printWorkflows(app *App, sts []verbs.WorkflowView, now time.Time) {
	for i, s := range sts {
		if i > 0 {
			fmt.Fprintln(app.Stdout)
		}
		head := fmt.Sprintf("workflow %s (%s)", s.Name, s.Kind)
		if s.CurrentState != "" {
			head += ": " + s.CurrentState
			if s.NextAgent != nil && *s.NextAgent != "" {
				head += ", next " + *s.NextAgent
			}
		}
		fmt.Fprintln(app.Stdout, head)
		if len(s.Items) == 0 {
			fmt.Fprintln(app.Stdout, "  no items: swarm workflow start "+s.Name+" --item ID --title \"...\"")
			continue
		}
		tw := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ITEM\tSTATE\tREJECTS\tAGENT\tRISK\tUPDATED\tTITLE")
		for _, it := range s.Items {
			agent := it.Agent
			if agent == "" {
				agent = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s ago\t%s\n", it.ID, it.State, it.RejectCount, agent, it.Risk,
				humanAge(now.Sub(it.UpdatedAt)), termsafe.String(truncateText(it.Title, 60)))
		}
		tw.Flush()
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimSpace(s[:n]) + "…"
}

// pokeSupervisor tells a running supervisor that something changed (a work
// item), so it looks now; its change feed notices within a second anyway.
func pokeSupervisor(l repo.Layout) { control.Poke(l, nil) }
