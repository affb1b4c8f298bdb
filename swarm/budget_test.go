package swarm

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// TestBudgetPauseHoldsMidSession: usage reported turn by turn trips the
// agent's budget; the session is cancelled with the budget as its cause at
// once (before the engine could ask the model again), the agent is held
// with a critical budget escalation, mail waits, and resume grants a fresh
// window: the next session runs.
func TestBudgetPauseHoldsMidSession(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n", "[budget]\ntokens = 1000\nwindow = \"1h\"\n")
	h.start()
	r := h.nextRun()
	r.s.OnUsage(engine.Usage{InputTokens: 700, OutputTokens: 100})
	if err := r.ctx.Err(); err != nil {
		t.Fatalf("800 of 1000 tokens cancelled the session: %v", context.Cause(r.ctx))
	}
	r.s.OnUsage(engine.Usage{InputTokens: 700, OutputTokens: 100, CacheRead: 5000})
	// The cancel happens inside OnUsage, on the engine's own goroutine:
	// its next model request would already see it.
	var be *BudgetError
	if r.ctx.Err() == nil || !errors.As(context.Cause(r.ctx), &be) {
		t.Fatalf("after 1600 of 1000 tokens: ctx err %v, cause %v", r.ctx.Err(), context.Cause(r.ctx))
	}
	if be.Scope != ScopeAgent || be.Use.Used != 1600 || be.Use.Tokens != 1000 || !strings.HasPrefix(be.Error(), "budget: ") {
		t.Fatalf("cause %+v: %v", be, be)
	}
	h.waitFor("alpha", lifecycle.Held)
	e := h.waitEscalation(escalation.KindBudget, escalation.Open)
	if e.Severity != escalation.Critical || !e.Hold || e.AgentName() != "alpha" || !strings.Contains(e.Summary, "1600 of 1000 work tokens in 1h") {
		t.Fatalf("escalation %+v", e)
	}
	// The session is stored with what the meter counted (the fake engine
	// returned none), cache reads kept apart.
	s, err := h.store.Session(context.Background(), "alpha", 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != mailbox.SessionInterrupted || s.TokensIn != 1400 || s.TokensOut != 200 || s.CacheRead != 5000 || !strings.HasPrefix(s.Error, "budget: ") {
		t.Fatalf("session 1 = %s, in %d out %d cache read %d, error %q", s.State, s.TokensIn, s.TokensOut, s.CacheRead, s.Error)
	}
	// Held: mail waits, no session starts.
	h.send(message.Draft{From: "operator", To: "alpha", Body: "more work"})
	h.noSession()

	if _, err := h.sup.Decide(context.Background(), e.ID, escalation.Event(escalation.Resume), "one more window"); err != nil {
		t.Fatal(err)
	}
	r2 := h.nextRun()
	if r2.s.Seq != 2 {
		t.Fatalf("after resume: session %d", r2.s.Seq)
	}
	// The grant counts afresh: 900 more is within the budget.
	r2.s.OnUsage(engine.Usage{InputTokens: 900})
	if r2.ctx.Err() != nil {
		t.Fatalf("the resumed session was cancelled at 900 tokens: %v", context.Cause(r2.ctx))
	}
	r2.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 900}}
	h.waitForSeq("alpha", lifecycle.Idle, 2)
	b, err := ReadBudgets(context.Background(), h.store, h.sup.cfg, h.sup.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if u := b.Agents["alpha"]; u == nil || u.Used != 900 || u.Tokens != 1000 || u.Action != config.BudgetPause || b.Swarm != nil {
		t.Fatalf("budgets after the grant: %+v, swarm %+v", u, b.Swarm)
	}
	if u := b.Usage["alpha"]; u.Input != 900 {
		t.Fatalf("usage since the grant %+v", u)
	}
}

// TestBudgetStopAtSessionEnd: an engine that reports usage only at the end
// is held to the swarm's cap when the session ends; action stop stops the
// agent, with a critical escalation that holds nothing.
func TestBudgetStopAtSessionEnd(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n", "[budget]\nswarm_tokens = 500\naction = \"stop\"\n")
	h.start()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 550, CacheRead: 9000}}
	h.waitFor("alpha", lifecycle.Stopped)
	// With every agent stopped the supervisor ends: read the desk itself.
	es, err := h.store.Escalations(context.Background(), mailbox.EscalationFilter{})
	if err != nil || len(es) != 1 || es[0].Kind != escalation.KindBudget {
		t.Fatalf("escalations %+v, %v", es, err)
	}
	e := es[0]
	if e.Severity != escalation.Critical || e.Hold || !strings.Contains(e.Summary, "the swarm's budget") {
		t.Fatalf("escalation %+v", e)
	}
	got := strings.Join(h.states("alpha"), " ")
	if !strings.HasSuffix(got, "Running SessionComplete Stopped") {
		t.Fatalf("states %s", got)
	}
	// A restart does not spend more: the agent stops again before any session.
	h.stop()
	h2 := &harness{t: t, store: h.store, layout: h.layout, notices: make(chan lifecycle.Notice, 1000), eng: h.eng, wt: h.wt, prompts: h.prompts}
	h2.sup = h2.newSupervisor(h.sup.cfg)
	h2.send(message.Draft{From: "operator", To: "alpha", Body: "go on"})
	h2.start()
	h2.waitFor("alpha", lifecycle.Stopped)
	h2.noSession()
	if es, err := h.store.Escalations(context.Background(), mailbox.EscalationFilter{}); err != nil || len(es) != 1 || es[0].Count != 2 {
		t.Fatalf("escalations after the restart: %+v, %v", es, err)
	}
}

// TestBudgetWarnOnlyEscalates: action warn raises a warning and lets the
// session go on.
func TestBudgetWarnOnlyEscalates(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\nbudget = { tokens = 100, action = \"warn\" }\n")
	h.start()
	r := h.nextRun()
	r.s.OnUsage(engine.Usage{OutputTokens: 150})
	e := h.waitEscalation(escalation.KindBudget, escalation.Open)
	if e.Severity != escalation.Warning || e.Hold {
		t.Fatalf("escalation %+v", e)
	}
	if r.ctx.Err() != nil {
		t.Fatalf("warn cancelled the session: %v", context.Cause(r.ctx))
	}
	r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{OutputTokens: 150}}
	h.waitFor("alpha", lifecycle.Idle)
}

func TestWindowText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", time.Hour: "1h", 90 * time.Minute: "1h30m", 30 * time.Minute: "30m",
		2 * time.Second: "2s", time.Hour + 30*time.Second: "1h0m30s",
	} {
		if got := windowText(d); got != want {
			t.Errorf("windowText(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestBudgetUSDTripsMidSession (issue 28 item 13): with [prices] for the
// agent's model, the tokens an engine reports as it goes are priced, and a
// usd budget trips like a token budget: the session is cancelled, the
// agent held, the escalation in dollars, and the session stored with its
// cost.
func TestBudgetUSDTripsMidSession(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n",
		"[budget]\nusd = 1\n[prices.\"gemini-2.5-flash\"]\ninput = 1000\noutput = 2000\ncached = 0\n")
	h.start()
	r := h.nextRun()
	r.s.OnUsage(engine.Usage{InputTokens: 500, OutputTokens: 100}) // $0.70
	if r.ctx.Err() != nil {
		t.Fatalf("$0.70 of $1 cancelled the session: %v", context.Cause(r.ctx))
	}
	r.s.OnUsage(engine.Usage{InputTokens: 300, CacheRead: 1_000_000}) // $1.00 in all: cache reads at 0
	var be *BudgetError
	if r.ctx.Err() == nil || !errors.As(context.Cause(r.ctx), &be) {
		t.Fatalf("after $1.00 of $1: cause %v", context.Cause(r.ctx))
	}
	if be.Error() != "budget: alpha used $1.00 of $1.00 in 24h" {
		t.Fatalf("cause %q", be.Error())
	}
	h.waitFor("alpha", lifecycle.Held)
	e := h.waitEscalation(escalation.KindBudget, escalation.Open)
	if !strings.Contains(e.Summary, "alpha spent its budget: $1.00 of $1.00 in 24h") {
		t.Fatalf("summary %q", e.Summary)
	}
	s, err := h.store.Session(context.Background(), "alpha", 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.CostUSD == nil || *s.CostUSD < 0.9999 || *s.CostUSD > 1.0001 {
		t.Fatalf("session cost %v", s.CostUSD)
	}
}

// TestSessionCostKnownOrUnknown (issue 28 item 13): a cost the engine
// reports (Claude Code's total_cost_usd) is stored as reported; tokens of a
// model with no price have an unknown cost, stored as such and counted
// apart, never as 0.
func TestSessionCostKnownOrUnknown(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	defer h.stop()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.0412, Costed: true}}
	h.waitForSeq("alpha", lifecycle.Idle, 1)
	h.send(message.Draft{From: "operator", To: "alpha", Body: "more"})
	r = h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 100}}
	h.waitForSeq("alpha", lifecycle.Idle, 2)
	for seq, want := range map[int64]string{1: "0.0412", 2: "unknown"} {
		s, err := h.store.Session(context.Background(), "alpha", seq)
		if err != nil {
			t.Fatal(err)
		}
		got := "unknown"
		if s.CostUSD != nil {
			got = strconv.FormatFloat(*s.CostUSD, 'f', -1, 64)
		}
		if got != want {
			t.Errorf("session %d cost %s, want %s", seq, got, want)
		}
	}
	b, err := ReadBudgets(context.Background(), h.store, h.sup.cfg, h.sup.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if u := b.Usage["alpha"]; u.CostUSD != 0.0412 || u.Unpriced != 1 {
		t.Fatalf("usage %+v", u)
	}
}
