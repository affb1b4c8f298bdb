package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// EscalateOptions are the inputs of `swarm escalate`.
type EscalateOptions struct {
	App       *App
	Summary   string
	Severity  string
	Hold      bool
	Approval  bool
	Ref       string
	Details   string
	Agent     string
	DedupeKey string
}

func newEscalateCmd(app *App, runF func(*EscalateOptions) error) *cobra.Command {
	opts := &EscalateOptions{App: app}
	cmd := &cobra.Command{
		Use:   "escalate <summary>",
		Short: "Raise an escalation: something the operator must decide or know now",
		Long: `Raise an escalation on the operator's desk ('swarm escalations'). Run inside
an agent's session (or with --agent), it is about that agent ($SWARM_AGENT);
it need not run in a live session. The operator is notified at once through
[notify] in swarm.toml, and answers with 'swarm escalation resume|abort|
approve|reject N --note "..."'; the agent's next prompt shows the decision
and the note under Operator Decision.

--hold holds the agent: its running session is interrupted (its mail queued
again) and it starts no session until the escalation is resolved; resume or
approve lets it carry on, abort or reject sends it Idle. --approval asks a
yes/no question (kind approval, severity info unless --severity says
otherwise): approve or reject answers it.

Raising the same thing again (same kind, agent, ref and summary, or the
same --dedupe-key) while it is unresolved only counts it: nobody is
notified twice. --json prints the escalation (or the open one it counted).`,
		Example: `  swarm escalate "need a decision on the schema: users or accounts?" --hold
  swarm escalate "may I drop the legacy table?" --approval --hold
  swarm escalate "CI is red on main since 10:12" --severity critical --details '{"job": "test"}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Summary = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runEscalate(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Severity, "severity", "", "info, warning or critical (default warning; info with --approval)")
	f.BoolVar(&opts.Hold, "hold", false, "hold the agent until the operator decides")
	f.BoolVar(&opts.Approval, "approval", false, "a yes/no question: approve or reject answers it")
	f.StringVar(&opts.Ref, "ref", "", "what it is about: msg:<id>, item:<id>")
	f.StringVar(&opts.Details, "details", "", "facts for the operator: a JSON object, or @file holding one")
	f.StringVar(&opts.Agent, "agent", "", "the agent it is about (default $SWARM_AGENT)")
	f.StringVar(&opts.DedupeKey, "dedupe-key", "", "group repeats by this key instead of kind, agent, ref and summary")
	cmd.RegisterFlagCompletionFunc("severity", cobra.FixedCompletions([]cobra.Completion{"info", "warning", "critical"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("agent", app.completeAgents(false))
	return cmd
}

func runEscalate(ctx context.Context, opts *EscalateOptions) error {
	app := opts.App
	d := escalation.Draft{Kind: escalation.KindAgent, Hold: opts.Hold, Ref: opts.Ref, Summary: opts.Summary, DedupeKey: opts.DedupeKey}
	if opts.Approval {
		d.Kind = escalation.KindApproval
	}
	if opts.Severity != "" {
		s, err := escalation.ParseSeverity(opts.Severity)
		if err != nil {
			return usagef("--severity: %v", err)
		}
		d.Severity = s
	}
	if strings.TrimSpace(opts.Summary) == "" {
		return usagef("the summary is empty: say in one line what you need from the operator")
	}
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if opts.Details != "" {
		raw := []byte(opts.Details)
		if name, ok := strings.CutPrefix(opts.Details, "@"); ok {
			path, err := app.callerFile(ctx, st, who, name)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("--details: %w", err)
			}
			raw = b
		}
		if err := escalation.CheckDetailsDepth(raw); err != nil {
			return usagef("--details: %v", err)
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return usagef(`--details must be a JSON object, such as '{"file": "api/users.go"}'`)
		}
		d.Details = raw
	}
	// An escalation is about the caller's own agent unless the operator
	// names one; an agent may name a teammate, but hold only itself.
	d.Agent = opts.Agent
	if d.Agent == "" {
		d.Agent = who.Agent()
	}
	if d.Agent != "" {
		if _, err := agentIn(cfg, d.Agent); err != nil {
			return err
		}
	} else if d.Hold {
		return usagef("--hold needs an agent to hold: run it inside the agent's session, or pass --agent NAME")
	}
	e, created, err := verbs.Escalate(ctx, who, func(ctx context.Context, d escalation.Draft) (escalation.Escalation, bool, error) {
		return swarm.Raise(ctx, st, d)
	}, d)
	if err != nil {
		return err
	}
	pokeEscalation(ctx, l, e.ID)
	if app.JSON {
		return app.printJSON(e)
	}
	switch {
	case created && e.Holds():
		fmt.Fprintf(app.Stdout, "escalation %d opened (%s %s), holding %s until the operator decides ('swarm escalation show %d')\n", e.ID, e.Severity, e.Kind, e.AgentName(), e.ID)
	case created:
		fmt.Fprintf(app.Stdout, "escalation %d opened (%s %s); the operator is notified ('swarm escalation show %d')\n", e.ID, e.Severity, e.Kind, e.ID)
	default:
		fmt.Fprintf(app.Stdout, "escalation %d is already %s: counted (%d times); nobody is notified again\n", e.ID, e.State, e.Count)
	}
	return nil
}
