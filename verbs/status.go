package verbs

import (
	"context"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/team"
	"github.com/swarmhq/swarm/worktree"
)

// The status verb: the swarm's read-model as `swarm status --json` prints
// it, which the live view and the web desk draw too. What only the door
// can see (whether a supervisor answers on this host, how far the
// operator's checkout is behind) comes in the request.

// StatusRequest is what the status verb reads.
type StatusRequest struct {
	Store  mailbox.Store
	Config *config.Config
	Now    time.Time
	// Supervisor is the running supervisor's answer to a ping; Running
	// false when none answered.
	Supervisor SupervisorInfo
	Running    bool
	// Checkout says how far the operator's checkout is behind the base;
	// nil: unknown (zero).
	Checkout func(ctx context.Context) CheckoutView
}

// SupervisorInfo is a running supervisor's answer to a ping.
type SupervisorInfo struct {
	Pid    int      `json:"pid"`
	Agents []string `json:"agents"` // the agents it runs
	Engine string   `json:"engine"` // swarm up --engine, if given
}

// StatusView is the swarm's status (`swarm status --json`).
type StatusView struct {
	Running bool          `json:"running"`
	Pid     *int          `json:"pid"`
	Agents  []AgentStatus `json:"agents"`
	// Escalations are the unresolved ones (open and acked), as 'swarm
	// escalations --json' lists them.
	Escalations []escalation.Escalation `json:"escalations"`
	// Budget is the swarm's ([budget] swarm_tokens), or null.
	Budget *BudgetUse `json:"budget"`
	// Workflows are the [[workflow]]s with their items, as 'swarm workflow
	// status --json' prints them.
	Workflows []WorkflowView `json:"workflows"`
	// Team is the team launch's record ('swarm team --json'); absent
	// without [team].
	Team *team.Record `json:"team,omitempty"`
	// Merges is the merge queue's live candidates (queued, testing), and
	// how far the operator's checkout is behind the base branch.
	Merges MergesView `json:"merges"`
}

// UsageView is an agent's usage over its budget window.
type UsageView struct {
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

// ModeView is how --json shows an agent's mode contract (DESIGN §9.4):
// "mode" is execute or coordinate, "profile" the old word or null.
type ModeView struct {
	Mode         string      `json:"mode"`
	Profile      *string     `json:"profile"`
	Strategy     string      `json:"strategy"`
	TreeRoot     string      `json:"tree_root,omitempty"`
	Capabilities mode.Vector `json:"capabilities"`
}

// modeOf is the agent's mode contract; caps is the vector its session
// stored, nil to derive it from swarm.toml.
func modeOf(a config.Agent, caps mode.Vector) ModeView {
	s := a.Spec()
	if caps == nil {
		caps = s.Vector()
	}
	out := ModeView{Mode: string(s.Kind()), Strategy: string(s.EffectiveStrategy()), TreeRoot: s.TreeRoot, Capabilities: caps}
	if p := s.Profile(); p != "" {
		ps := string(p)
		out.Profile = &ps
	}
	return out
}

// ReportView is an agent's last report in status --json.
type ReportView struct {
	Kind    string    `json:"kind"`
	Task    string    `json:"task,omitempty"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// CheckoutView is the operator's checkout against the base branch.
type CheckoutView struct {
	Base   string `json:"base"`
	Behind int    `json:"behind"`
	// Remote is [worktree] push; RemoteBehind how many commits the base
	// is behind the remote's as last fetched (landed from another host).
	Remote       string `json:"remote,omitempty"`
	RemoteBehind int    `json:"remote_behind"`
}

// MergesView is the merge queue's candidates and the operator's checkout.
type MergesView struct {
	Candidates []merge.Candidate `json:"candidates"`
	Checkout   CheckoutView      `json:"checkout"`
}

// AgentStatus is one agent in status --json.
type AgentStatus struct {
	Name       string          `json:"name"`
	State      lifecycle.State `json:"state"`
	SessionSeq int64           `json:"session_seq"`
	ModeView
	LastReport        *ReportView `json:"last_report"`
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
	Usage    UsageView  `json:"usage"`
	Budget   *BudgetUse `json:"budget"`
	Activity string     `json:"activity,omitempty"`
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

// NotStartedHint says what to do about an agent the running supervisor
// does not run.
const NotStartedHint = "restart 'swarm up' to run it"

// notStarted marks an agent the running supervisor does not run.
const notStarted = "not started: " + NotStartedHint + " (it was added to swarm.toml since 'swarm up' started, or left out by --agents)"

// Status is the status verb (`swarm status`, the live view's and the web
// desk's snapshot): a read any caller the door knows may make.
func Status(ctx context.Context, c identity.Caller, req StatusRequest) (StatusView, error) {
	var out StatusView
	if !c.Known() {
		return out, operatorOnly(c, "swarm status")
	}
	st, cfg, now, sup, running := req.Store, req.Config, req.Now, req.Supervisor, req.Running
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
	holders, err := swarm.LiveHolders(ctx, st)
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
	budgets, err := ReadBudgets(ctx, c, st, cfg, now)
	if err != nil {
		return out, err
	}
	out.Budget = budgets.Swarm
	live, err := st.Candidates(ctx, mailbox.CandidateFilter{States: []merge.State{merge.Queued, merge.Testing}})
	if err != nil {
		return out, err
	}
	out.Merges = MergesView{Candidates: append([]merge.Candidate{}, live...)}
	if req.Checkout != nil {
		out.Merges.Checkout = req.Checkout(ctx)
	}
	here := swarm.ThisHolder().Host
	out.Agents = make([]AgentStatus, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		eng := a.Engine
		row, ok := byName[a.Name]
		s := AgentStatus{Name: a.Name, State: lifecycle.Stopped, ModeView: modeOf(a, caps[a.Name]), Engine: eng,
			Branch: worktree.Branch(a.Name), Worktree: filepath.Join(cfg.Worktree.Dir, a.Name)}
		if r, ok := reports[a.Name]; ok {
			s.LastReport = &ReportView{Kind: string(r.Kind), Task: r.Task, Message: r.Message, At: r.At}
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
		s.Usage = UsageView{Input: u.Input, Output: u.Output, CacheWrite: u.CacheWrite, CacheRead: u.CacheRead, Work: u.Work(),
			CostUSD: u.CostUSD, Unpriced: u.Unpriced}
		s.Budget = budgets.Agents[a.Name]
		pc := pending[a.Name]
		s.Pending, s.Urgent = pc.Queued+pc.Delivered, pc.Urgent
		h, held := holders[a.Name]
		if held {
			s.Host = h.String()
		}
		// Held by a supervisor on another host (or in another clone): it
		// runs there, and only its heartbeat says whether it is alive.
		elsewhere := held && !(running && h.PID == sup.Pid && h.Host == here)
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
	if rec, ok, err := Team(ctx, c, cfg, st); err != nil {
		return out, err
	} else if ok {
		out.Team = &rec
	}
	if out.Escalations == nil {
		out.Escalations = []escalation.Escalation{}
	}
	if out.Workflows, err = WorkflowStatus(ctx, c, st, cfg, ""); err != nil {
		return out, err
	}
	if out.Workflows == nil {
		out.Workflows = []WorkflowView{}
	}
	return out, nil
}
