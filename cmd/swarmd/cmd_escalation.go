package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/verbs"
)

// EscalationOptions are the inputs of `swarm escalation <action> N`.
type EscalationOptions struct {
	App    *App
	Action string // show, or one of swarm.Actions
	ID     int64
	Note   string
	Now    func() time.Time
}

// actionHelp says what each action does, for its help and for show.
var actionHelp = map[string]string{
	"ack":     "mark it seen: reminders stop; a hold stays until it is resolved",
	"resume":  "resolve it: the held agent carries on, its next prompt shows the decision and the note",
	"abort":   "resolve it: the held agent's work is ended and it goes Idle",
	"approve": "resolve it with yes: like resume",
	"reject":  "resolve it with no: like abort",
}

// newEscalationCmd builds `swarm escalation` and its actions; a non-nil
// runF runs instead of an action, with the parsed options (the flag tests'
// seam).
func newEscalationCmd(app *App, runF func(*EscalationOptions) error) *cobra.Command {
	parent := &cobra.Command{
		Use:   "escalation",
		Short: "Show, ack or decide one escalation",
		Long: `Show one escalation, or act on it as the operator:

  show N      everything about it
  ack N       ` + actionHelp["ack"] + `
  resume N    ` + actionHelp["resume"] + `
  abort N     ` + actionHelp["abort"] + `
  approve N   ` + actionHelp["approve"] + `
  reject N    ` + actionHelp["reject"] + `

--note "..." goes with the ack or the decision; the agent reads it. A
decision reaches a running supervisor at once through its control socket
(the hold is released now); with none running, the next 'swarm up' applies
it. Every ack and decision is an event ('swarm events').

resume, abort, approve and reject are the operator's: they refuse to run
inside an agent session ($SWARM_SESSION_ID set). That guards against an
agent's mistake, not against a same-user attacker.

--json prints the escalation as 'swarm escalations --json' does.`,
		Example: `  swarm escalation show 3
  swarm escalation ack 3 --note "looking at it"
  swarm escalation resume 3 --note "use plan B: keep the users table"
  swarm escalation abort 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	for _, action := range []string{"show", "ack", "resume", "abort", "approve", "reject"} {
		opts := &EscalationOptions{App: app, Action: action, Now: time.Now}
		short := "Show an escalation: what, about whom, its state, details and decision"
		if action != "show" {
			short = strings.ToUpper(action[:1]) + action[1:] + " an escalation: " + actionHelp[action]
		}
		cmd := &cobra.Command{
			Use:     action + " <id>",
			Short:   short,
			Example: "  swarm escalation " + action + " 3",
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := parseID("the escalation", args[0])
				if err != nil {
					return err
				}
				opts.ID = id
				if runF != nil {
					return runF(opts)
				}
				return runEscalation(cmd.Context(), opts)
			},
		}
		if action != "show" {
			cmd.Flags().StringVar(&opts.Note, "note", "", "what the agent should know: it shows in its next prompt")
		}
		parent.AddCommand(cmd)
	}
	return parent
}

func runEscalation(ctx context.Context, opts *EscalationOptions) error {
	app := opts.App
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	var e escalation.Escalation
	if opts.Action == "show" {
		e, err = st.Escalation(ctx, opts.ID)
		if errors.Is(err, mailbox.ErrNoSuchEscalation) {
			return fmt.Errorf("no escalation %d: 'swarm escalations --all' lists them", opts.ID)
		}
	} else {
		e, err = verbs.Decide(ctx, who, st, opts.ID, escalation.Event(opts.Action), opts.Note)
		if err == nil {
			pokeEscalation(ctx, l, e.ID)
		}
	}
	if err != nil {
		return err
	}
	// Approving a work item's approval merges its reviewed commit.
	if id, ok := itemOfApproval(e); opts.Action == "approve" && ok {
		q, err := mergeQueue(ctx, l, cfg, st, app.poster(st, l, cfg))
		if err != nil {
			return err
		}
		it, commit, _, err := verbs.MergeApproved(ctx, who, st, cfg, q, e)
		if err != nil {
			return fmt.Errorf("escalation %d is approved, but %w; fix that, then run 'swarm workflow merge %s'", e.ID, err, id)
		}
		pokeSupervisor(l)
		if app.JSON {
			return app.printJSON(e)
		}
		fmt.Fprintf(app.Stdout, "escalation %d resolved: approve\n", e.ID)
		printMerged(app, it.ID, it.ReviewCommit, commit)
		return nil
	}
	if app.JSON {
		return app.printJSON(e)
	}
	switch opts.Action {
	case "show":
		showEscalation(app, e, opts.Now())
	case "ack":
		fmt.Fprintf(app.Stdout, "escalation %d acked: no more reminders; resolve it with resume, abort, approve or reject\n", e.ID)
	default:
		what := ""
		if e.Agent != nil && e.Hold {
			if e.Decision.Releases() {
				what = fmt.Sprintf("; %s carries on", *e.Agent)
			} else {
				what = fmt.Sprintf("; %s goes idle", *e.Agent)
			}
		}
		fmt.Fprintf(app.Stdout, "escalation %d resolved: %s%s\n", e.ID, *e.Decision, what)
	}
	return nil
}

func showEscalation(app *App, e escalation.Escalation, now time.Time) {
	w := app.Stdout
	fmt.Fprintf(w, "escalation %d: %s %s, %s\n", e.ID, e.Severity, e.Kind, e.State)
	fmt.Fprintf(w, "summary:   %s\n", termsafe.String(e.Summary))
	if e.Agent != nil {
		hold := ""
		if e.Holds() {
			hold = " (held until resolved)"
		}
		fmt.Fprintf(w, "agent:     %s%s\n", *e.Agent, hold)
	}
	if e.Ref != nil {
		fmt.Fprintf(w, "ref:       %s\n", termsafe.String(*e.Ref))
	}
	if len(e.Details) > 0 {
		fmt.Fprintf(w, "details:   %s\n", termsafe.String(string(e.Details)))
	}
	fmt.Fprintf(w, "raised:    %s (%s ago), %d time(s)\n", e.CreatedAt.Local().Format(time.DateTime), humanAge(now.Sub(e.CreatedAt)), e.Count)
	if e.AckedAt != nil {
		fmt.Fprintf(w, "acked:     %s\n", e.AckedAt.Local().Format(time.DateTime))
	}
	if e.ResolvedAt != nil {
		fmt.Fprintf(w, "resolved:  %s: %s\n", e.ResolvedAt.Local().Format(time.DateTime), *e.Decision)
	}
	if e.Note != "" {
		fmt.Fprintf(w, "note:      %s\n", termsafe.String(e.Note))
	}
	if e.State.Unresolved() {
		fmt.Fprintf(w, "next:      swarm escalation resume|abort|approve|reject %d --note \"...\"\n", e.ID)
	}
}

// itemOfApproval is the work item an approval escalation is about.
func itemOfApproval(e escalation.Escalation) (string, bool) {
	if e.Kind != escalation.KindApproval || e.Ref == nil {
		return "", false
	}
	return escalation.ItemOf(*e.Ref)
}
