package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/verbs"
)

// ReportOptions are the inputs of `swarm report`.
type ReportOptions struct {
	App     *App
	Kind    mailbox.ReportKind
	Task    string
	Message string
	Agent   string
}

func newReportCmd(app *App, runF func(*ReportOptions) error) *cobra.Command {
	opts := &ReportOptions{App: app}
	cmd := &cobra.Command{
		Use:   "report progress|blocked|complete <task> <message> | report session <message>",
		Short: "Report how a task or this session goes, to your coordinator",
		Long: `Report how a task goes (progress, blocked, complete) or a milestone of
your session (session). The report is stored, shown by 'swarm status'
(last_report in --json) and sent as status mail, which never wakes an
idle agent, to your coordinator: the agent whose task mail named the
task, or whose task_dispatch or review_request was about it, else
operator.

Run from an agent's session (the reporter is $SWARM_AGENT); a task report
needs can_report_task_level and a session report can_report_session_level.
The operator may report for an agent with --agent. --json prints the
stored report with "coordinator" and "mail_id".`,
		Example: `  swarm report progress T-1 "half done: the API compiles, tests next"
  swarm report blocked demo-6fx "needs the schema change from backend"
  swarm report complete demo-6fx "fixed in 3f2a1c9, tests added"
  swarm report session "API done; starting on the docs"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("give a kind: progress, blocked, complete or session")
			}
			k := mailbox.ReportKind(args[0])
			switch {
			case !slices.Contains(mailbox.ReportKinds, k):
				return fmt.Errorf("unknown report kind %q: use progress, blocked, complete or session", args[0])
			case k.TaskLevel() && len(args) != 3:
				return fmt.Errorf("swarm report %s takes a task and a message, such as: swarm report %s T-1 \"half done\"", k, k)
			case !k.TaskLevel() && len(args) != 2:
				return fmt.Errorf("swarm report session takes one message, such as: swarm report session \"API done\"")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Kind = mailbox.ReportKind(args[0])
			if opts.Kind.TaskLevel() {
				opts.Task, opts.Message = args[1], args[2]
			} else {
				opts.Message = args[1]
			}
			if runF != nil {
				return runF(opts)
			}
			return runReport(cmd.Context(), opts)
		},
	}
	// Each kind is a subcommand too, so `swarm report progress --help` works.
	for _, k := range mailbox.ReportKinds {
		use, short := string(k)+" <task> <message>", "Report a task's "+string(k)
		n := 2
		if !k.TaskLevel() {
			use, short, n = "session <message>", "Report a milestone of this session", 1
		}
		kind := k
		sub := &cobra.Command{
			Use:   use,
			Short: short,
			Long:  cmd.Long,
			Args:  cobra.ExactArgs(n),
			RunE: func(c *cobra.Command, args []string) error {
				opts.Kind = kind
				if kind.TaskLevel() {
					opts.Task, opts.Message = args[0], args[1]
				} else {
					opts.Message = args[0]
				}
				if runF != nil {
					return runF(opts)
				}
				return runReport(c.Context(), opts)
			},
		}
		sub.Flags().StringVar(&opts.Agent, "agent", "", "report for this agent (operator only; default $SWARM_AGENT)")
		cmd.AddCommand(sub)
	}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "report for this agent (operator only; default $SWARM_AGENT)")
	return cmd
}

func runReport(ctx context.Context, opts *ReportOptions) error {
	app := opts.App
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	// Who may report for whom is the verb's rule; this only finds the
	// agent to name in the usage error.
	agent := opts.Agent
	if agent == "" {
		agent = who.Agent()
	}
	if agent == "" {
		return usagef("who reports? run it from an agent's session, or pass --agent <name>")
	}
	if _, err := agentIn(cfg, agent); err != nil {
		return err
	}
	res, err := verbs.Report(ctx, who, verbs.ReportRequest{Store: st, Poster: app.poster(st, l, cfg), Agent: agent,
		Kind: opts.Kind, Task: opts.Task, Message: opts.Message})
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(struct {
			mailbox.Report
			Coordinator string `json:"coordinator"`
			MailID      int64  `json:"mail_id"`
		}{res.Report, res.Coordinator, res.Mail.ID})
	}
	what := string(res.Report.Kind)
	if res.Report.Task != "" {
		what += " " + res.Report.Task
	}
	fmt.Fprintf(app.Stdout, "reported %s; sent #%d to %s\n", what, res.Mail.ID, res.Coordinator)
	return nil
}
