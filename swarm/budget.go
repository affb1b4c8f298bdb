package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
)

// This file enforces token budgets (DESIGN §9.6) in code: what an agent
// and the whole swarm spent is summed from the stored sessions, the running
// session's usage is added as the engine reports it, and a trip cancels
// the session before its next model request, escalates, and holds or
// stops the agent. No model is asked to watch its own spending.

// Budget scopes: whose spending tripped.
const (
	ScopeAgent = "agent"
	ScopeSwarm = "swarm"
)

// BudgetUse is a budget and what has been spent against it: work tokens
// and US dollars.
type BudgetUse struct {
	Tokens int64  `json:"tokens"`
	Window string `json:"window"`
	Action string `json:"action"`
	Used   int64  `json:"used"`
	// USD is the cap in US dollars (0: none); UsedUSD what the sessions
	// of known cost spent; Unpriced counts those whose cost is unknown,
	// which UsedUSD cannot include.
	USD      float64 `json:"usd"`
	UsedUSD  float64 `json:"used_usd"`
	Unpriced int64   `json:"unpriced_sessions"`
	// Since is where the counting starts: the window's start, or the
	// operator's resume of the last budget escalation when later.
	Since time.Time `json:"since"`
}

// Over reports whether the budget is spent.
func (u BudgetUse) Over() bool { return u.overTokens() || u.overUSD() }

func (u BudgetUse) overTokens() bool { return u.Tokens > 0 && u.Used >= u.Tokens }
func (u BudgetUse) overUSD() bool    { return u.USD > 0 && u.UsedUSD >= u.USD }

// Spent says what was spent against the caps: "1600 of 1000 work
// tokens", "$1.25 of $1.00", or both.
func (u BudgetUse) Spent() string {
	var parts []string
	if u.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d work tokens", u.Used, u.Tokens))
	}
	if u.USD > 0 {
		p := fmt.Sprintf("%s of %s", USD(u.UsedUSD), USD(u.USD))
		if u.Unpriced > 0 {
			p += fmt.Sprintf(" (and %d session(s) of unknown cost)", u.Unpriced)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// USD writes dollars as status and escalations show them: "$0.0412"
// below a dollar, "$12.35" above.
func USD(v float64) string {
	if v != 0 && v < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

func newUse(b config.Budget, u mailbox.Usage, since time.Time) *BudgetUse {
	if !b.Enabled() {
		return nil
	}
	return &BudgetUse{Tokens: b.Tokens, USD: b.USD, Window: windowText(b.Window), Action: b.Action, Used: u.Work(),
		UsedUSD: u.CostUSD, Unpriced: u.Unpriced, Since: since}
}

// windowText writes a window as swarm.toml would: "24h", "90m", "1h30m".
func windowText(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok && strings.Contains(s, "h") {
		if t2, ok := strings.CutSuffix(t, "h0"); ok {
			return t2 + "h"
		}
		return t + "m"
	}
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		return t + "m"
	}
	return s
}

// BudgetError is the cancellation cause of a session whose budget
// tripped: the cause `budget`.
type BudgetError struct {
	Agent string
	Scope string // ScopeAgent or ScopeSwarm
	Use   BudgetUse
}

func (e *BudgetError) Error() string {
	who := e.Agent
	if e.Scope == ScopeSwarm {
		who = "the swarm"
	}
	return fmt.Sprintf("budget: %s used %s in %s", who, e.Use.Spent(), e.Use.Window)
}

// Budgets is what status shows: each agent's usage over its budget window
// and its budget, and the swarm's.
type Budgets struct {
	Usage  map[string]mailbox.Usage // over each agent's window (since a grant when later)
	Agents map[string]*BudgetUse    // nil for an agent without a budget
	Swarm  *BudgetUse               // nil without swarm_tokens
}

// ReadBudgets sums the stored usage of every configured agent against its
// budget and the swarm's, as of now. A running session's tokens are not
// in the store yet; the supervisor adds them as they come.
func ReadBudgets(ctx context.Context, st mailbox.Store, cfg *config.Config, now time.Time) (Budgets, error) {
	ur, err := newUsageReader(ctx, st, now)
	if err != nil {
		return Budgets{}, err
	}
	out := Budgets{Usage: map[string]mailbox.Usage{}, Agents: map[string]*BudgetUse{}}
	for _, a := range cfg.Agents {
		since := ur.since(a.Name, a.Budget.Window)
		u, err := ur.sum(since)
		if err != nil {
			return Budgets{}, err
		}
		out.Usage[a.Name] = u[a.Name]
		out.Agents[a.Name] = newUse(a.Budget, u[a.Name], since)
	}
	if sb := cfg.Budget.Swarm(); sb.Enabled() {
		since := ur.since("", sb.Window)
		u, err := ur.sum(since)
		if err != nil {
			return Budgets{}, err
		}
		out.Swarm = newUse(sb, total(u), since)
	}
	return out, nil
}

func total(u map[string]mailbox.Usage) mailbox.Usage {
	var n mailbox.Usage
	for _, x := range u {
		n = n.Add(x)
	}
	return n
}

// usageReader sums the stored usage that budgets count, reading the
// operator's grants once and each start time's sums once.
type usageReader struct {
	ctx    context.Context
	st     mailbox.Store
	now    time.Time
	grants map[string]time.Time
	sums   map[time.Time]map[string]mailbox.Usage
}

func newUsageReader(ctx context.Context, st mailbox.Store, now time.Time) (*usageReader, error) {
	grants, err := budgetGrants(ctx, st)
	if err != nil {
		return nil, err
	}
	return &usageReader{ctx: ctx, st: st, now: now, grants: grants, sums: map[time.Time]map[string]mailbox.Usage{}}, nil
}

// since is where agent's count against a budget of window w starts: the
// window's start, or the operator's last grant to the agent when later.
// agent "" (the swarm as a whole) has no grant.
func (u *usageReader) since(agent string, w time.Duration) time.Time {
	since := u.now.Add(-w)
	if g, ok := u.grants[agent]; ok && g.After(since) {
		since = g
	}
	return since
}

// sum is every agent's stored usage since t.
func (u *usageReader) sum(t time.Time) (map[string]mailbox.Usage, error) {
	if s, ok := u.sums[t]; ok {
		return s, nil
	}
	s, err := u.st.UsageSince(u.ctx, t)
	if err != nil {
		return nil, fmt.Errorf("read the token usage: %w", err)
	}
	u.sums[t] = s
	return s, nil
}

// budgetGrants returns, by agent, when the operator last resumed (or
// approved) a budget escalation about it: from then on its spending counts
// afresh, which is the one more window the resume grants.
func budgetGrants(ctx context.Context, st mailbox.Store) (map[string]time.Time, error) {
	es, err := st.Escalations(ctx, mailbox.EscalationFilter{All: true})
	if err != nil {
		return nil, fmt.Errorf("read budget escalations: %w", err)
	}
	out := map[string]time.Time{}
	for _, e := range es {
		if e.Kind != escalation.KindBudget || e.Agent == nil || e.ResolvedAt == nil || e.Decision == nil || e.DedupeKey == unmeteredKey(*e.Agent) {
			continue
		}
		if d := *e.Decision; d != escalation.Resume && d != escalation.Approve {
			continue
		}
		if at := *e.ResolvedAt; at.After(out[*e.Agent]) {
			out[*e.Agent] = at
		}
	}
	return out, nil
}

// agentBudget is what one agent may still spend: its own budget and the
// swarm's, each with what was spent so far (nil when unlimited).
type agentBudget struct {
	agent, swarm *BudgetUse
}

// budgetBook is the budget meter's reads and writes in the store, for
// any agent: its standing, the operator's aborts, clearing and raising
// its escalations, and its model's price. The runner's budget checks
// (below) decide with it.
type budgetBook struct {
	Store mailbox.Store
	Clock Clock
	Log   *slog.Logger
	// Swarm is the swarm's budget and Prices the [prices] table, as the
	// last reload left them.
	Swarm  func() config.Budget
	Prices func() map[string]config.Price
	// EngineFor is the engine an agent runs on (swarm up --engine too).
	EngineFor func(config.Agent) (config.Engine, error)
	Raise     func(context.Context, escalation.Draft) // logged, never fatal
	Changed   func()                                  // an escalation was decided here
}

// readAgentBudget reads the agent's standing, grants included. The swarm
// count starts at the agent's grant too, so a resumed agent can go on.
func (r *runner) readAgentBudget(ctx context.Context) (agentBudget, error) {
	return r.sup.budget.standing(ctx, r.agent)
}

func (bk budgetBook) standing(ctx context.Context, a config.Agent) (agentBudget, error) {
	b, sb := a.Budget, bk.Swarm()
	if !b.Enabled() && !sb.Enabled() {
		return agentBudget{}, nil
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	ur, err := newUsageReader(bctx, bk.Store, bk.Clock.Now())
	if err != nil {
		return agentBudget{}, err
	}
	var out agentBudget
	if b.Enabled() {
		since := ur.since(a.Name, b.Window)
		u, err := ur.sum(since)
		if err != nil {
			return agentBudget{}, err
		}
		out.agent = newUse(b, u[a.Name], since)
	}
	if sb.Enabled() {
		since := ur.since(a.Name, sb.Window)
		u, err := ur.sum(since)
		if err != nil {
			return agentBudget{}, err
		}
		out.swarm = newUse(sb, total(u), since)
	}
	return out, nil
}

// tripped returns the budget that is spent, the agent's first.
func (b agentBudget) tripped(agent string) (*BudgetError, bool) {
	switch {
	case b.agent != nil && b.agent.Over():
		return &BudgetError{Agent: agent, Scope: ScopeAgent, Use: *b.agent}, true
	case b.swarm != nil && b.swarm.Over():
		return &BudgetError{Agent: agent, Scope: ScopeSwarm, Use: *b.swarm}, true
	}
	return nil, false
}

// enforceBudget checks the agent's standing where a session could start or
// has just ended. A spent budget escalates and, by its action, holds the
// agent (pause) or stops it; moved says the agent left its state.
func (r *runner) enforceBudget(ctx context.Context) (moved bool, err error) {
	b, err := r.readAgentBudget(ctx)
	if err != nil {
		return false, err
	}
	trip, ok := b.tripped(r.agent.Name)
	if !ok {
		return false, r.clearBudgets(ctx, b)
	}
	if e, ok, err := r.abortedWindow(ctx, trip); err != nil || ok {
		if err != nil {
			return false, err
		}
		return true, r.move(ctx, lifecycle.NoWork, lifecycle.Idle, blockedCause(trip, e))
	}
	return r.budgetTripped(ctx, trip)
}

// blockedCause says why an agent whose budget escalation was aborted
// starts no session.
func blockedCause(trip *BudgetError, e escalation.Escalation) string {
	return fmt.Sprintf("%s; escalation %d was decided %s: no session until the window frees up or the limit is raised", trip.Error(), e.ID, *e.Decision)
}

// budgetDetails is what a budget escalation's details say of its trip.
type budgetDetails struct {
	Scope      string `json:"scope"`
	Action     string `json:"action"`
	SessionSeq *int64 `json:"session_seq"`
}

func budgetDetailsOf(e escalation.Escalation) budgetDetails {
	var d budgetDetails
	_ = json.Unmarshal(e.Details, &d) // old or odd details: the agent's scope
	if d.Scope == "" {
		d.Scope = ScopeAgent
	}
	return d
}

// abortedWindow finds the operator's abort (or reject) of this trip's
// window: a budget escalation of the same scope about the agent, resolved
// that way, raised when the agent's newest session was the one it has now.
// No session started since the abort, so nothing was spent that the
// operator has not seen: the agent waits without a second escalation
// (DESIGN §9.6). A session that runs once the window frees up (or the
// limit is raised) ends that window; a later trip is news again.
func (r *runner) abortedWindow(ctx context.Context, trip *BudgetError) (escalation.Escalation, bool, error) {
	return r.sup.budget.abortedWindow(ctx, r.agent.Name, r.seq, trip)
}

func (bk budgetBook) abortedWindow(ctx context.Context, agent string, seq int64, trip *BudgetError) (escalation.Escalation, bool, error) {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	es, err := bk.Store.Escalations(bctx, mailbox.EscalationFilter{All: true, Agent: agent})
	if err != nil {
		return escalation.Escalation{}, false, fmt.Errorf("read budget escalations: %w", err)
	}
	for _, e := range es {
		if e.Kind != escalation.KindBudget || e.State != escalation.Resolved || e.Decision == nil || e.Decision.Releases() {
			continue
		}
		// A warning's abort stops nothing: warn lets the agent spend on.
		d := budgetDetailsOf(e)
		if d.Scope == trip.Scope && d.Action != config.BudgetWarn && d.SessionSeq != nil && *d.SessionSeq == seq {
			return e, true, nil
		}
	}
	return escalation.Escalation{}, false, nil
}

// budgetBlocked reports whether the agent may start no session because
// its budget is spent in a window the operator aborted: work waits.
func (r *runner) budgetBlocked(ctx context.Context) (bool, error) {
	b, err := r.readAgentBudget(ctx)
	if err != nil {
		return false, err
	}
	trip, ok := b.tripped(r.agent.Name)
	if !ok {
		return false, nil
	}
	e, blocked, err := r.abortedWindow(ctx, trip)
	if blocked {
		r.sup.budget.Log.Info("work waits: the budget is spent in a window the operator aborted", "agent", r.agent.Name, "escalation", e.ID, "cause", trip.Error())
	}
	return blocked, err
}

// clearBudgets resolves, by swarm, the unresolved budget escalations about
// the agent whose budget is no longer spent (b is its standing now): the
// limit was raised (by a reload or a restart), the budget removed, or the
// window moved on. A hold ends with them, and the event says why.
func (r *runner) clearBudgets(ctx context.Context, b agentBudget) error {
	return r.sup.budget.clear(ctx, r.agent.Name, b)
}

func (bk budgetBook) clear(ctx context.Context, agent string, b agentBudget) error {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	es, err := bk.Store.Escalations(bctx, mailbox.EscalationFilter{Agent: agent})
	if err != nil {
		return fmt.Errorf("read budget escalations: %w", err)
	}
	cleared := false
	for _, e := range es {
		if e.Kind != escalation.KindBudget || e.DedupeKey == unmeteredKey(agent) {
			continue // the unmetered warning says a fact, not a spent budget
		}
		scope := budgetDetailsOf(e).Scope
		use, who := b.agent, agent+"'s budget"
		if scope == ScopeSwarm {
			use, who = b.swarm, "the swarm's budget"
		}
		if use != nil && use.Over() {
			continue
		}
		why := fmt.Sprintf("clear by swarm: %s is no longer spent: ", who)
		if use == nil {
			why += "swarm.toml sets none now"
		} else {
			why += fmt.Sprintf("%s in %s", use.Spent(), use.Window)
		}
		done := false
		bctx, cancel := bookkeeping(ctx)
		err := bk.Store.InTx(bctx, func(tx mailbox.Tx) error {
			cur, err := tx.Escalation(e.ID)
			if err != nil || !cur.State.Unresolved() {
				return err // the operator decided it meanwhile
			}
			_, err = fsm.Apply(tx, escalation.Table, fsm.SubjectEscalation, escalation.Subject(e.ID), cur.State, escalation.Clear, escalation.Resolved, why, 0)
			done = err == nil
			return err
		})
		cancel()
		if err != nil {
			return fmt.Errorf("clear escalation %d: %w", e.ID, err)
		}
		if done {
			bk.Log.Info("budget escalation cleared", "agent", agent, "escalation", e.ID, "cause", why)
			cleared = true
		}
	}
	if cleared {
		bk.Changed()
	}
	return nil
}

// clearBudgetHolds is clearBudgets with the standing read now.
func (r *runner) clearBudgetHolds(ctx context.Context) error {
	b, err := r.readAgentBudget(ctx)
	if err != nil {
		return err
	}
	return r.clearBudgets(ctx, b)
}

// budgetTripped raises the budget escalation, then holds or stops the
// agent as the action says; warn only escalates.
func (r *runner) budgetTripped(ctx context.Context, trip *BudgetError) (moved bool, err error) {
	r.raiseBudget(ctx, trip)
	switch trip.Use.Action {
	case config.BudgetWarn:
		return false, nil
	case config.BudgetStop:
		r.stopReason = trip.Error()
		return true, r.inTx(ctx, func(tx mailbox.Tx) error {
			if err := r.settleUnstarted(tx, "stopped: "+trip.Error()); err != nil {
				return err
			}
			return r.moveTx(tx, lifecycle.BudgetExceeded, lifecycle.Stopped, trip.Error())
		})
	}
	held, err := r.holdIfHeld(ctx)
	if err == nil && !held {
		// The escalation could not be stored: never carry on spending.
		err = fmt.Errorf("%s, and the hold could not be recorded", trip.Error())
	}
	return held, err
}

// raiseBudget raises (or counts) the budget escalation of a trip: critical
// and holding for pause, critical for stop, a warning for warn.
func (r *runner) raiseBudget(ctx context.Context, trip *BudgetError) {
	r.sup.budget.raise(ctx, r.agent.Name, r.seq, trip)
}

func (bk budgetBook) raise(ctx context.Context, agent string, seq int64, trip *BudgetError) {
	sev := escalation.Critical
	if trip.Use.Action == config.BudgetWarn {
		sev = escalation.Warning
	}
	what := "its budget"
	if trip.Scope == ScopeSwarm {
		what = "the swarm's budget"
	}
	do := map[string]string{
		config.BudgetPause: "held until 'swarm escalation resume' (which grants one more window) or a higher limit in swarm.toml",
		config.BudgetStop:  "stopped; raise the limit in swarm.toml, or resume the escalation and restart 'swarm up'",
		config.BudgetWarn:  "still running (action = \"warn\")",
	}[trip.Use.Action]
	bk.Raise(ctx, escalation.Draft{Kind: escalation.KindBudget, Severity: sev, Hold: trip.Use.Action == config.BudgetPause,
		Agent:   agent,
		Summary: fmt.Sprintf("%s spent %s: %s in %s; %s", agent, what, trip.Use.Spent(), trip.Use.Window, do),
		Details: details(map[string]any{"scope": trip.Scope, "tokens": trip.Use.Tokens, "used": trip.Use.Used,
			"usd": trip.Use.USD, "used_usd": trip.Use.UsedUSD,
			"window": trip.Use.Window, "action": trip.Use.Action, "since": trip.Use.Since, "session_seq": seq}),
		DedupeKey: escalation.DefaultDedupeKey(escalation.KindBudget, agent, "", trip.Scope)})
}

// meter adds a running session's usage, as the engine reports it, to what
// was spent before it, and trips once: the session is cancelled with the
// budget as its cause (unless the action is warn) before its engine asks
// the model again, and the runner is told.
type meter struct {
	agent  string
	price  *config.Price // the agent's model's, nil when [prices] has none
	base   agentBudget
	cancel context.CancelCauseFunc
	trips  chan *BudgetError

	mu      sync.Mutex
	usage   engine.Usage // the session's so far
	tripped bool
}

func newMeter(agent string, price *config.Price, base agentBudget, cancel context.CancelCauseFunc) *meter {
	return &meter{agent: agent, price: price, base: base, cancel: cancel, trips: make(chan *BudgetError, 1)}
}

// sessionCost is what usage cost in US dollars: what the engine reported
// (Claude Code's total_cost_usd), else its tokens at price; ok is false
// when neither is known and tokens were spent: an unknown cost, never 0.
func sessionCost(u engine.Usage, price *config.Price) (usd float64, ok bool) {
	switch {
	case u.Costed:
		return u.CostUSD, true
	case price != nil:
		return price.Cost(u.InputTokens, u.OutputTokens, u.CacheWrite, u.CacheRead), true
	case u.Work() == 0 && u.CacheRead == 0:
		return 0, true
	}
	return 0, false
}

// price is the [prices] row of the agent's model, nil when there is none.
func (r *runner) price() *config.Price { return r.sup.budget.price(r.agent) }

func (bk budgetBook) price(a config.Agent) *config.Price {
	e, err := bk.EngineFor(a)
	if err != nil {
		return nil
	}
	if p, ok := bk.Prices()[config.PriceModel(a, e)]; ok && config.PriceModel(a, e) != "" {
		return &p
	}
	return nil
}

// sessionEnd is how session seq ended, its cost included (nil: unknown).
func (r *runner) sessionEnd(seq int64, state mailbox.SessionState, u engine.Usage, why string) mailbox.SessionEnd {
	e := mailbox.SessionEnd{Agent: r.agent.Name, Seq: seq, State: state, TokensIn: u.InputTokens, TokensOut: u.OutputTokens,
		CacheWrite: u.CacheWrite, CacheRead: u.CacheRead, Error: why}
	if cost, ok := sessionCost(u, r.price()); ok {
		e.CostUSD = &cost
	}
	return e
}

// add is engine.Session.OnUsage: called from the engine's goroutine.
func (m *meter) add(u engine.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage = m.usage.Add(u)
	if m.tripped {
		return
	}
	now := agentBudget{agent: m.base.agent, swarm: m.base.swarm}
	for _, p := range []**BudgetUse{&now.agent, &now.swarm} {
		if *p != nil {
			c := **p
			c.Used += m.usage.Work()
			if cost, ok := sessionCost(m.usage, m.price); ok {
				c.UsedUSD += cost
			}
			*p = &c
		}
	}
	trip, ok := now.tripped(m.agent)
	if !ok {
		return
	}
	m.tripped = true
	// The runner hears of the trip before the engine can return because
	// of it: a session that ends cancelled finds the trip waiting.
	m.trips <- trip
	if trip.Use.Action != config.BudgetWarn {
		m.cancel(trip)
	}
}

// atLeast returns the session's usage: the engine's result, or what the
// meter counted when that is more (an engine cut short may return less
// than it reported as it went), so a trip is never forgotten.
func (m *meter) atLeast(u engine.Usage) engine.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.usage.Work() > u.Work() {
		if u.Costed && !m.usage.Costed {
			m.usage.CostUSD, m.usage.Costed = u.CostUSD, true
		}
		return m.usage
	}
	return u
}

// budgetSession settles a session whose budget tripped: the session was
// cancelled already (except for warn, where it goes on).
func (r *runner) budgetSession(ctx context.Context, s *session, trip *BudgetError) (done bool, err error) {
	if trip.Use.Action == config.BudgetWarn {
		r.raiseBudget(ctx, trip)
		return false, nil
	}
	res, grace, stopped := r.awaitCancelled(ctx, s)
	if stopped {
		return true, r.shutdownSession(ctx, s)
	}
	return true, r.budgetSettle(ctx, s, trip, res, grace)
}

// budgetEnded is a session that ended with a trip waiting: settled as
// the trip says, or as usual after a warning.
func (r *runner) budgetEnded(ctx context.Context, s *session, trip *BudgetError, res engine.Result) error {
	if trip.Use.Action == config.BudgetWarn {
		r.raiseBudget(ctx, trip)
		return r.sessionEnded(ctx, s, res)
	}
	return r.budgetSettle(ctx, s, trip, res, false)
}

// budgetSettle records the session cut by the budget as interrupted (its
// mail queued again), raises the escalation, and holds or stops the agent.
func (r *runner) budgetSettle(ctx context.Context, s *session, trip *BudgetError, res engine.Result, grace bool) error {
	now := r.sup.budget.Clock.Now()
	r.interrupt = &Interrupt{Seq: s.seq, Reason: trip.Error(), At: &now}
	why := trip.Error()
	if grace {
		why = fmt.Sprintf("%s; still running after %s: process groups killed", why, r.agent.InterruptGrace)
	}
	r.raiseBudget(ctx, trip)
	if trip.Use.Action == config.BudgetStop {
		r.stopReason = trip.Error()
		return r.settleInterrupted(ctx, s, res, lifecycle.BudgetExceeded, lifecycle.Stopped, why)
	}
	return r.settleInterrupted(ctx, s, res, lifecycle.Hold, lifecycle.Held, why)
}

// estimatedUsage is what an unmetered session (an engine that reports no
// usage: an exec engine's custom command) counts against budgets: its
// prompt's bytes / 4 as input tokens, the usual rule of thumb for English
// text and code. It undercounts (no output, no tool results), but the
// swarm's cap then sees such sessions at all rather than as 0.
func estimatedUsage(promptBytes int) engine.Usage {
	return engine.Usage{InputTokens: int64(promptBytes / 4)}
}

// unmeteredKey is the dedupe key of the one warning an agent whose engine
// reports no usage gets; resolving it grants no budget.
func unmeteredKey(agent string) string {
	return escalation.DefaultDedupeKey(escalation.KindBudget, agent, "", "unmetered")
}
