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
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/team"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/workflow"
	"github.com/swarmhq/swarm/worktree"
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

type statusJSON struct {
	Running bool          `json:"running"`
	Pid     *int          `json:"pid"`
	Agents  []agentStatus `json:"agents"`
	// Escalations are the unresolved ones (open and acked), as 'swarm
	// escalations --json' lists them.
	Escalations []escalation.Escalation `json:"escalations"`
	// Budget is the swarm's ([budget] swarm_tokens), or null.
	Budget *swarm.BudgetUse `json:"budget"`
	// Workflows are the [[workflow]]s with their items, as 'swarm workflow
	// status --json' prints them.
	Workflows []swarm.Status `json:"workflows"`
	// Team is the team launch's record ('swarm team --json'); absent
	// without [team].
	Team *team.Record `json:"team,omitempty"`
	// Merges is the merge queue's live candidates (queued, testing), and
	// how far the operator's checkout is behind the base branch.
	Merges mergesJSON `json:"merges"`
}

// usageJSON is an agent's usage over its budget window.
type usageJSON struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheWrite int64 `json:"cache_write"`
	CacheRead  int64 `json:"cache_read"`
	Work       int64 `json:"work"`
	// CostUSD sums the sessions of known cost; Unpriced counts the others
	// (an API engine's model with no [prices] row), never counted as 0.
	CostUSD  float64 `json:"cost_usd"`
	Unpriced int64   `json:"unpriced_sessions"`
}

// costText is the COST column: dollars over the budget window, "+ N
// unknown" for sessions of unknown cost, and the usd budget if any.
func costText(u usageJSON, b *swarm.BudgetUse) string {
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

type agentStatus struct {
	Name       string          `json:"name"`
	State      lifecycle.State `json:"state"`
	SessionSeq int64           `json:"session_seq"`
	modeJSON
	LastReport        *reportJSON `json:"last_report"`
	Engine            string      `json:"engine"`
	Branch            string      `json:"branch"`
	Worktree          string      `json:"worktree"`
	Pending           int         `json:"pending"`
	Urgent            int         `json:"urgent"`
	HeartbeatAt       *time.Time  `json:"heartbeat_at"`
	Stale             bool        `json:"stale"`
	ConsecutiveErrors int         `json:"consecutive_errors"`
	TotalErrors       int         `json:"total_errors"`
	Tokens            int64       `json:"tokens"`
	// Usage is over the agent's budget window (24h without a budget);
	// Budget is null when the agent has none.
	Usage    usageJSON        `json:"usage"`
	Budget   *swarm.BudgetUse `json:"budget"`
	Activity string           `json:"activity,omitempty"`
	// Host is the supervisor that runs the agent, <hostname>:<pid>, from
	// its lease; empty when none does.
	Host       string     `json:"host"`
	StateSince *time.Time `json:"state_since,omitempty"`
	// NotStarted says why a configured agent is not running although a
	// supervisor is: it does not run it. Empty otherwise.
	NotStarted string `json:"not_started,omitempty"`
	// SpawnedBy names who spawned an agent `swarm spawn` added (empty for
	// the others); Ephemeral and Retired say how it ends and whether it
	// did (DESIGN §9.5).
	SpawnedBy string `json:"spawned_by,omitempty"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
	Retired   bool   `json:"retired"`
}

// notStarted marks an agent the running supervisor does not run.
const notStarted = "not started: " + notStartedHint + " (it was added to swarm.toml since 'swarm up' started, or left out by --agents)"

// pingInfo is a running supervisor's answer to a ping.
type pingInfo struct {
	Pid    int      `json:"pid"`
	Agents []string `json:"agents"` // the agents it runs
	Engine string   `json:"engine"` // swarm up --engine, if given
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

func collectStatus(ctx context.Context, l repo.Layout, cfg *config.Config, st mailbox.Store, now time.Time) (statusJSON, error) {
	var out statusJSON
	sup, running := ping(ctx, l)
	if running {
		out.Running, out.Pid = true, &sup.Pid
	}
	// An agent configured but not run by the running supervisor: added to
	// swarm.toml since it started, or left out by --agents. An older
	// supervisor names no agents; then nothing is marked.
	runs := make(map[string]bool, len(sup.Agents))
	for _, n := range sup.Agents {
		runs[n] = true
	}
	rows, err := st.Agents(ctx)
	if err != nil {
		return out, err
	}
	byName := make(map[string]mailbox.Agent, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	holders, err := liveHolders(ctx, st)
	if err != nil {
		return out, err
	}
	// One grouped read for every agent's mail, not one query per agent.
	pending, err := st.PendingAll(ctx)
	if err != nil {
		return out, err
	}
	// The same for each agent's last session's capabilities and its last
	// report.
	caps, err := st.LastCapabilities(ctx)
	if err != nil {
		return out, err
	}
	reports, err := st.LastReports(ctx)
	if err != nil {
		return out, err
	}
	// Sessions that ended count; a running session's tokens join when it
	// ends (the supervisor enforces budgets on them as they come).
	budgets, err := swarm.ReadBudgets(ctx, st, cfg, now)
	if err != nil {
		return out, err
	}
	out.Budget = budgets.Swarm
	live, err := st.Candidates(ctx, mailbox.CandidateFilter{States: []merge.State{merge.Queued, merge.Testing}})
	if err != nil {
		return out, err
	}
	out.Merges = mergesJSON{Candidates: append([]merge.Candidate{}, live...), Checkout: checkoutOf(ctx, l, cfg, st)}
	out.Agents = make([]agentStatus, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		eng := a.Engine
		row, ok := byName[a.Name]
		s := agentStatus{Name: a.Name, State: lifecycle.Stopped, modeJSON: modeOf(a, caps[a.Name]), Engine: eng,
			Branch: worktree.Branch(a.Name), Worktree: filepathJoin(cfg.Worktree.Dir, a.Name)}
		if r, ok := reports[a.Name]; ok {
			s.LastReport = &reportJSON{Kind: string(r.Kind), Task: r.Task, Message: r.Message, At: r.At}
		}
		if running && sup.Engine != "" {
			s.Engine = sup.Engine
		}
		if ok {
			s.State, s.SessionSeq = row.State, row.SessionSeq
			if row.Engine != "" {
				s.Engine = row.Engine
			}
			if row.Worktree != "" {
				s.Worktree = row.Worktree
			}
			s.HeartbeatAt, s.StateSince = row.HeartbeatAt, row.StateSince
			s.ConsecutiveErrors, s.TotalErrors, s.Tokens, s.Activity = row.ConsecutiveErrors, row.TotalErrors, row.Tokens, row.Activity
		}
		u := budgets.Usage[a.Name]
		s.Usage = usageJSON{Input: u.Input, Output: u.Output, CacheWrite: u.CacheWrite, CacheRead: u.CacheRead, Work: u.Work(),
			CostUSD: u.CostUSD, Unpriced: u.Unpriced}
		s.Budget = budgets.Agents[a.Name]
		c := pending[a.Name]
		s.Pending, s.Urgent = c.Queued+c.Delivered, c.Urgent
		h, held := holders[a.Name]
		if held {
			s.Host = h.String()
		}
		// Held by a supervisor on another host (or in another clone): it
		// runs there, and only its heartbeat says whether it is alive.
		elsewhere := held && !(running && h.PID == sup.Pid && h.Host == thisHost())
		if sp := a.Spawned; sp != nil {
			s.SpawnedBy, s.Ephemeral, s.Retired = sp.By, sp.Ephemeral, sp.Retired
		}
		if running && len(sup.Agents) > 0 && !runs[a.Name] && !elsewhere && !s.Retired {
			s.NotStarted = notStarted
		}
		if s.State != lifecycle.Stopped {
			stale := 3 * cfg.Liveness.Heartbeat
			s.Stale = (!out.Running && !elsewhere) || s.HeartbeatAt == nil || now.Sub(*s.HeartbeatAt) > stale
		}
		out.Agents = append(out.Agents, s)
	}
	out.Escalations, err = st.Escalations(ctx, mailbox.EscalationFilter{})
	if err != nil {
		return out, err
	}
	if rec, ok, err := swarm.TeamRecord(ctx, cfg, st); err != nil {
		return out, err
	} else if ok {
		out.Team = &rec
	}
	if out.Escalations == nil {
		out.Escalations = []escalation.Escalation{}
	}
	if out.Workflows, err = swarm.WorkflowStatus(ctx, st, cfg, ""); err != nil {
		return out, err
	}
	if out.Workflows == nil {
		out.Workflows = []swarm.Status{}
	}
	return out, nil
}

// workflowLines are one line per live work item (and one per dev-qa
// workflow's state), for status and the live view.
func workflowLines(sts []swarm.Status) []string {
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

// liveHolders maps each agent to the supervisor whose lease holds it,
// leaving out the leases of supervisors on this host that are gone (a
// kill -9 leaves its lease behind until the next claim).
func liveHolders(ctx context.Context, st mailbox.Store) (map[string]mailbox.Holder, error) {
	leases, err := st.AgentLeases(ctx)
	if err != nil {
		return nil, err
	}
	host := thisHost()
	out := make(map[string]mailbox.Holder, len(leases))
	for _, le := range leases {
		if le.Holder.Host == host && !proc.Alive(le.Holder.PID) {
			continue
		}
		out[le.Agent] = le.Holder
	}
	return out, nil
}

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
	now := opts.Now()
	s, err := collectStatus(ctx, l, cfg, st, now)
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
		line := fmt.Sprintf("%s\t%s%s\t%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s", a.Name, state, since, a.SessionSeq, a.modeWord(), a.Engine, mail,
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
		fmt.Fprintf(app.Stdout, "  %s: %s (%s ago)\n", a.Name, a.LastReport.line(), humanAge(now.Sub(a.LastReport.At)))
	}
	if len(notRun) > 0 {
		them := "them"
		if len(notRun) == 1 {
			them = "it"
		}
		fmt.Fprintf(app.Stdout, "\nnot started: %s: the running supervisor does not run %s (added to swarm.toml since 'swarm up' started, or left out by --agents); restart 'swarm up' to run %s\n",
			listSome(notRun, 10), them, them)
	}
	return nil
}

// reportJSON is an agent's last report in status --json.
type reportJSON struct {
	Kind    string    `json:"kind"`
	Task    string    `json:"task,omitempty"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// line is the report on one line, made safe for a terminal: "progress
// T-1: half done".
func (r reportJSON) line() string {
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
func (a agentStatus) modeWord() string {
	if a.Profile != nil {
		return *a.Profile
	}
	return a.Mode + "/" + a.Strategy
}

// swarmSpent is the swarm's spending against its caps.
func swarmSpent(b *swarm.BudgetUse) string {
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
