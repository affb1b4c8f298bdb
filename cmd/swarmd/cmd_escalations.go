package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/termsafe"
)

// EscalationsOptions are the inputs of `swarm escalations`.
type EscalationsOptions struct {
	App   *App
	All   bool
	Agent string
	Now   func() time.Time
}

const escalationJSONDoc = `{"id", "kind", "severity", "state", "hold", "agent", "ref", "summary",
"details", "dedupe_key", "count", "created_at", "acked_at", "resolved_at",
"decision", "note"} (agent, ref, details, the times and decision may be
null)`

func newEscalationsCmd(app *App, runF func(*EscalationsOptions) error) *cobra.Command {
	opts := &EscalationsOptions{App: app, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "escalations",
		Short: "List the escalations waiting for the operator",
		Long: `List the escalations not resolved yet (open, and acked: seen but not
decided), the most severe first, then the newest first. --all adds the
resolved ones. 'swarm escalation show N' shows one whole; 'swarm escalation
ack|resume|abort|approve|reject N' acts on it.

--json prints an array of ` + escalationJSONDoc + `.`,
		Example: `  swarm escalations
  swarm escalations --all --json | jq '.[] | select(.hold)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runEscalations(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "include resolved escalations")
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "only those about this agent")
	cmd.RegisterFlagCompletionFunc("agent", app.completeAgents(false))
	return cmd
}

func runEscalations(ctx context.Context, opts *EscalationsOptions) error {
	app := opts.App
	l, cfg, err := app.loadConfig()
	if err != nil {
		return err
	}
	if opts.Agent != "" {
		if _, err := app.knownAgent(ctx, l, cfg, opts.Agent); err != nil {
			return err
		}
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	es, err := st.Escalations(ctx, mailbox.EscalationFilter{All: opts.All, Agent: opts.Agent})
	if err != nil {
		return err
	}
	if app.JSON {
		if es == nil {
			es = []escalation.Escalation{}
		}
		return app.printJSON(es)
	}
	if len(es) == 0 {
		if opts.All {
			fmt.Fprintln(app.Stdout, "no escalations yet")
		} else {
			fmt.Fprintln(app.Stdout, "no open escalations ('--all' lists the resolved ones too)")
		}
		return nil
	}
	return escalationTable(app.Stdout, es, opts.Now())
}

// escalationTable prints escalations one a line.
func escalationTable(w io.Writer, es []escalation.Escalation, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSEVERITY\tSTATE\tKIND\tAGENT\tAGE\tCOUNT\tSUMMARY")
	for _, e := range es {
		agent := e.AgentName()
		if agent == "" {
			agent = "-"
		}
		state := string(e.State)
		switch {
		case e.Holds():
			state += " (holds)"
		case e.Decision != nil:
			state += ": " + string(*e.Decision)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.Severity, state, e.Kind, agent,
			humanAge(now.Sub(e.CreatedAt)), e.Count, termsafe.String(firstLineCut(e.Summary, 70)))
	}
	return tw.Flush()
}

// escalationLine is one escalation in a sentence, for status.
func escalationLine(e escalation.Escalation, now time.Time) string {
	about := ""
	if a := e.About(); a != "" {
		about = " " + a
	}
	state := ""
	if e.State == escalation.Acked {
		state = " [acked]"
	}
	return fmt.Sprintf("! escalation %d: %s %s%s%s, %s ago: %s", e.ID, e.Severity, e.Kind, about, state,
		humanAge(now.Sub(e.CreatedAt)), termsafe.String(firstLineCut(e.Summary, 80)))
}
