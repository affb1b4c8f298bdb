package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/workflow"
)

// StatusOptions are the inputs of `swarm status`.
type StatusOptions struct {
	App *App
	Now func() time.Time
}

func newStatusCmd(app *App, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{App: app, Now: time.Now}
	return &cobra.Command{
		Use:   "status",
		Short: "Show the agents, their states, sessions and mail",
		Long: `Show whether a supervisor is running, and for every agent its lifecycle
state, session number, pending mail (queued + delivered), errors, tokens and
heartbeat. A heartbeat older than three intervals is marked stale: the
supervisor is gone or stuck. Works with or without a running supervisor.

An agent in swarm.toml that the running supervisor does not run (added
since 'swarm up' started, or left out by --agents) is shown as "not
started": restart 'swarm up' to run it.

--json prints {"running", "pid", "agents": [{"name", "state", "session_seq",
"mode", "profile", "strategy", "capabilities", "last_report", "engine",
"branch", "worktree", "pending", "urgent", "heartbeat_at", "stale",
"consecutive_errors", "total_errors", "tokens", "activity", "host",
"state_since", "not_started"}], "escalations": [...]}. mode is execute or
coordinate, profile code, review, delegate or null, capabilities the
vector of the agent's last session (else as configured), and last_report
{kind, task, message, at} or null; not_started is present only for such
an agent, and says what to do; escalations are the ones not resolved yet
as 'swarm escalations --json' prints them, each also a line above the
agents table.

Each agent also has "usage" ({"input", "output", "cache_write",
"cache_read", "work", "cost_usd", "unpriced_sessions"} over its budget
window, 24h without a budget: cost_usd sums the sessions of known cost,
unpriced_sessions counts those of unknown cost) and "budget" ({"tokens",
"usd", "window", "action", "used", "used_usd", "unpriced_sessions",
"since"} or null); the top
level has the swarm's "budget" the same way. Work tokens count input,
output and cache writes, not cache reads; a running session's tokens count
once it ends. The TOKENS column shows lifetime work tokens, then
used/limit for an agent with a token budget; COST shows dollars over the
budget window (what Claude Code reported, else tokens priced by [prices];
"unpriced" sessions have an unknown cost), then used/limit for a usd
budget.`,
		Example: `  swarm status
  swarm status --json | jq '.agents[] | {name, state}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runStatus(cmd.Context(), opts)
		},
	}
}

// The status read-model is the status verb's (verbs.Status); these are
// its rows under the names the printers use.
type (
	statusJSON  = verbs.StatusView
	usageJSON   = verbs.UsageView
	agentStatus = verbs.AgentStatus
	reportJSON  = verbs.ReportView
	pingInfo    = verbs.SupervisorInfo
)

// costText is the COST column: dollars over the budget window, "+ N
// unknown" for sessions of unknown cost, and the usd budget if any.
func costText(u usageJSON, b *verbs.BudgetUse) string {
	out := swarm.USD(u.CostUSD)
	switch {
	case u.Unpriced > 0 && u.CostUSD == 0:
		out = fmt.Sprintf("unknown (%d session(s) unpriced)", u.Unpriced)
	case u.Unpriced > 0:
		out += fmt.Sprintf(" + %d unpriced", u.Unpriced)
	}
	if b != nil && b.USD > 0 {
		out += fmt.Sprintf(" (%s/%s in %s)", swarm.USD(b.UsedUSD), swarm.USD(b.USD), b.Window)
	}
	return out
}

// ping asks the control socket who is running.
func ping(ctx context.Context, l repo.Layout) (pingInfo, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var p pingInfo
	resp, err := control.Call(ctx, l, control.Request{Op: control.OpPing})
	if err != nil {
		return p, false
	}
	_ = json.Unmarshal(resp.Data, &p)
	return p, true
}

// supervisorPid asks the control socket who is running.
func supervisorPid(ctx context.Context, l repo.Layout) (int, bool) {
	p, ok := ping(ctx, l)
	return p.Pid, ok
}

// collectStatus is the status verb with what only this door sees: the
// running supervisor's answer on this host and the operator's checkout.
func collectStatus(ctx context.Context, who identity.Caller, l repo.Layout, cfg *config.Config, st mailbox.Store, now time.Time) (statusJSON, error) {
	sup, running := ping(ctx, l)
	return verbs.Status(ctx, who, verbs.StatusRequest{Store: st, Config: cfg, Now: now, Supervisor: sup, Running: running,
		Checkout: func(ctx context.Context) verbs.CheckoutView { return checkoutOf(ctx, l, cfg, st) }})
}

// workflowLines are one line per live work item (and one per dev-qa
// workflow's state), for status and the live view.
func workflowLines(sts []verbs.WorkflowView) []string {
	var out []string
	for _, w := range sts {
		if w.CurrentState != "" && len(w.Items) > 0 {
			next := ""
			if w.NextAgent != nil && *w.NextAgent != "" {
				next = ", next " + *w.NextAgent
			}
			out = append(out, fmt.Sprintf("workflow %s (%s): %s%s", w.Name, w.Kind, w.CurrentState, next))
		}
		for _, it := range w.Items {
			if !it.Live() {
				continue
			}
			who := it.Agent
			if who == "" {
				who = "operator"
			}
			line := fmt.Sprintf("  %s %s: %s, %s's turn", w.Name, it.ID, it.State, who)
			if w.Kind == workflow.DevReview {
				line += fmt.Sprintf(", %d rejection(s)", it.RejectCount)
			}
			out = append(out, line+" · "+truncateText(it.Title, 60))
		}
	}
	return out
}

// thisHost is the name leases give this host (swarm.ThisHolder's).
func thisHost() string { return swarm.ThisHolder().Host }

func runStatus(ctx context.Context, opts *StatusOptions) error {
	app := opts.App
	l, cfg, err := app.loadRunning(ctx)
	var ce *config.Error
	if err != nil && l.Root != "" && !app.JSON && errors.As(err, &ce) {
		// A swarm.toml that does not check out, and no agents to go on
		// with: say whether a swarm runs, then the mistake, once.
		if _, running := ping(ctx, l); !running {
			fmt.Fprintf(app.Stdout, "swarm is not running ('swarm up' starts it); swarm.toml has a mistake to fix first:\n")
		}
	}
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	who, err := app.callerOf(ctx, st, cfg)
	if err != nil {
		return err
	}
	now := opts.Now()
	s, err := collectStatus(ctx, who, l, cfg, st, now)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(s)
	}
	if s.Running {
		fmt.Fprintf(app.Stdout, "swarm is running (pid %d)\n\n", *s.Pid)
	} else {
		fmt.Fprintf(app.Stdout, "swarm is not running ('swarm up' starts it)\n\n")
	}
	for _, e := range s.Escalations {
		fmt.Fprintln(app.Stdout, escalationLine(e, now))
	}
	if len(s.Escalations) > 0 {
		fmt.Fprintf(app.Stdout, "('swarm escalations' lists them; 'swarm escalation show N' shows one)\n\n")
	}
	if lines := workflowLines(s.Workflows); len(lines) > 0 {
		for _, line := range lines {
			fmt.Fprintln(app.Stdout, termsafe.String(line))
		}
		fmt.Fprintln(app.Stdout, "('swarm workflow status' shows every item)")
		fmt.Fprintln(app.Stdout)
	}
	if t := s.Team; t != nil {
		fmt.Fprintf(app.Stdout, "%s\n\n", teamLine(*t))
	}
	if line := mergeQueueLine(s.Merges.Candidates); line != "" {
		fmt.Fprintf(app.Stdout, "%s\n\n", line)
	}
	if line := behindLine(s.Merges.Checkout); line != "" {
		fmt.Fprintf(app.Stdout, "%s\n\n", line)
	}
	if b := s.Budget; b != nil {
		fmt.Fprintf(app.Stdout, "budget: the swarm used %s in %s (action %s)\n\n", swarmSpent(b), b.Window, b.Action)
	}
	var notRun []string
	// The HOST column appears once some agent runs under a supervisor
	// other than this clone's: a swarm on several hosts.
	hosts := false
	for _, a := range s.Agents {
		hosts = hosts || (a.Host != "" && (s.Pid == nil || a.Host != fmt.Sprintf("%s:%d", thisHost(), *s.Pid)))
	}
	tw := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
	header := "AGENT\tSTATE\tSESSION\tMODE\tENGINE\tMAIL\tERRORS\tTOKENS\tCOST\tHEARTBEAT"
	if hosts {
		header += "\tHOST"
	}
	fmt.Fprintln(tw, header)
	for _, a := range s.Agents {
		hb := "-"
		// A Stopped agent has no heartbeat to speak of: its last stamp
		// is from a supervisor that is gone.
		if a.HeartbeatAt != nil && a.State != "Stopped" {
			hb = humanAge(now.Sub(*a.HeartbeatAt)) + " ago"
		}
		if a.Stale {
			hb += " (stale)"
		}
		mail := fmt.Sprint(a.Pending)
		if a.Urgent > 0 {
			mail += fmt.Sprintf(" (%d urgent)", a.Urgent)
		}
		since := ""
		if a.StateSince != nil && a.State != lifecycle.Stopped {
			since = " " + humanAge(now.Sub(*a.StateSince))
		}
		state := a.State
		if a.Retired {
			state = "retired"
		}
		if a.NotStarted != "" {
			state, notRun = "not started", append(notRun, a.Name)
		}
		tokens := fmt.Sprint(a.Tokens)
		if b := a.Budget; b != nil && b.Tokens > 0 {
			// What the budget counts against its limit.
			tokens += " (" + budgetText(b) + ")"
		}
		line := fmt.Sprintf("%s\t%s%s\t%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s", a.Name, state, since, a.SessionSeq, modeWord(a), a.Engine, mail,
			a.ConsecutiveErrors, a.TotalErrors, tokens, costText(a.Usage, a.Budget), hb)
		if hosts {
			host := a.Host
			if host == "" {
				host = "-"
			}
			line += "\t" + host
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The agents' last reports (swarm report), one line each.
	first := true
	for _, a := range s.Agents {
		if a.LastReport == nil {
			continue
		}
		if first {
			fmt.Fprintln(app.Stdout, "\nlast reports:")
			first = false
		}
		fmt.Fprintf(app.Stdout, "  %s: %s (%s ago)\n", a.Name, reportLine(*a.LastReport), humanAge(now.Sub(a.LastReport.At)))
	}
	if len(notRun) > 0 {
		them := "them"
		if len(notRun) == 1 {
			them = "it"
		}
		fmt.Fprintf(app.Stdout, "\nnot started: %s: the running supervisor does not run %s (added to swarm.toml since 'swarm up' started, or left out by --agents); restart 'swarm up' to run %s\n",
			text.ListSome(notRun, 10), them, them)
	}
	return nil
}

// reportLine is the report on one line, made safe for a terminal: "progress
// T-1: half done".
func reportLine(r reportJSON) string {
	what := r.Kind
	if r.Task != "" {
		what += " " + r.Task
	}
	msg, _, more := strings.Cut(strings.TrimSpace(r.Message), "\n")
	if more {
		msg += " …"
	}
	return termsafe.String(what + ": " + msg)
}

// modeWord is the MODE column: the profile, else mode/strategy.
func modeWord(a agentStatus) string {
	if a.Profile != nil {
		return *a.Profile
	}
	return a.Mode + "/" + a.Strategy
}

// swarmSpent is the swarm's spending against its caps.
func swarmSpent(b *verbs.BudgetUse) string {
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s work tokens", humanize.Comma(b.Used), humanize.Comma(b.Tokens)))
	}
	if b.USD > 0 {
		p := fmt.Sprintf("%s of %s", swarm.USD(b.UsedUSD), swarm.USD(b.USD))
		if b.Unpriced > 0 {
			p += fmt.Sprintf(" (and %d session(s) of unknown cost)", b.Unpriced)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
