package swarm

import (
	"context"
	"errors"
	"github.com/swarmhq/swarm/identity"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
)

// waitNotice returns the next notice, not matched before, that match
// accepts.
func (h *harness) waitNotice(what string, match func(lifecycle.Notice) bool) lifecycle.Notice {
	h.t.Helper()
	for i, n := range h.history {
		if !h.used[i] && match(n) {
			h.used[i] = true
			return n
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case n := <-h.notices:
			h.history = append(h.history, n)
			h.used = append(h.used, false)
			if match(n) {
				h.used[len(h.used)-1] = true
				return n
			}
		case <-deadline:
			h.t.Fatalf("no notice of %s", what)
		}
	}
}

// waitEscalation waits for the notice of escalation kind reaching state.
func (h *harness) waitEscalation(kind escalation.Kind, state escalation.State) escalation.Escalation {
	h.t.Helper()
	n := h.waitNotice(string(kind)+" "+string(state), func(n lifecycle.Notice) bool {
		return n.Kind == lifecycle.NoticeEscalation && n.Escalation != nil && n.Escalation.Kind == kind && n.Escalation.State == state
	})
	return *n.Escalation
}

func (h *harness) noSession() {
	h.t.Helper()
	select {
	case r := <-h.eng.runs:
		h.t.Fatalf("session %s/%d started", r.s.Agent, r.s.Seq)
	default:
	}
}

func (h *harness) lastPrompt() PromptRequest {
	h.prompts.mu.Lock()
	defer h.prompts.mu.Unlock()
	return h.prompts.reqs[len(h.prompts.reqs)-1]
}

// TestHoldInterruptsAndResumeReleases: a holding escalation interrupts the
// running session (mail queued again) and holds the agent, which starts
// nothing while held, mail or not; resume releases it into a session whose
// prompt carries the decision and the note.
func TestHoldInterruptsAndResumeReleases(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	ctx := context.Background()
	first := h.send(message.Draft{From: "operator", To: "alpha", Body: "design the schema"})
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	esc, created, err := h.sup.Raise(ctx, escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Hold: true, Summary: "need a decision on the schema"})
	if err != nil || !created {
		t.Fatalf("Raise = %+v, %v, %v", esc, created, err)
	}
	n := h.waitFor("alpha", lifecycle.Held)
	if n.From != lifecycle.Running || n.Cause != "held: escalation 1" {
		t.Fatalf("hold = %+v", n)
	}
	var held *HeldError
	if !errors.As(context.Cause(r.ctx), &held) || held.Escalation != esc.ID {
		t.Fatalf("session cause = %v", context.Cause(r.ctx))
	}
	if s, _ := h.store.Session(ctx, "alpha", 1); s.State != mailbox.SessionInterrupted || s.Error != "held: escalation 1" {
		t.Fatalf("session 1 = %s %q", s.State, s.Error)
	}
	if m, _ := h.store.Message(ctx, first.ID); m.State != message.Queued || m.Shown != 1 {
		t.Fatalf("held session's mail = %+v", m)
	}
	if e := h.waitEscalation(escalation.KindAgent, escalation.Open); e.ID != esc.ID || !e.Holds() {
		t.Fatalf("opened notice = %+v", e)
	}
	// Mail and a second raise (counted) start nothing while held.
	h.send(message.Draft{From: "operator", To: "alpha", Body: "are you there?", Urgency: message.Urgent})
	if twin, created, _ := h.sup.Raise(ctx, escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Hold: true, Summary: "need a decision on the schema"}); created || twin.Count != 2 {
		t.Fatalf("repeat = %+v, created %v", twin, created)
	}
	h.waitNotice("the urgent mail", func(n lifecycle.Notice) bool { return n.Kind == lifecycle.NoticeMessage && n.Message.IsUrgent() })
	h.noSession()
	if a, _ := h.store.Agent(ctx, "alpha"); a.State != lifecycle.Held {
		t.Fatalf("state = %s", a.State)
	}

	if _, err := h.sup.Decide(ctx, esc.ID, escalation.Event(escalation.Resume), "use plan B"); err != nil {
		t.Fatal(err)
	}
	if n := h.waitNotice("the release", func(n lifecycle.Notice) bool { return n.From == lifecycle.Held }); n.To != lifecycle.BuildingPrompt || n.Cause != "resume: escalation 1" {
		t.Fatalf("release = %+v", n)
	}
	r2 := h.nextRun()
	if r2.s.Seq != 2 || len(r2.s.Mail) != 2 {
		t.Fatalf("after resume: session %d with %d mail", r2.s.Seq, len(r2.s.Mail))
	}
	req := h.lastPrompt()
	if len(req.Decisions) != 1 || req.Decisions[0].ID != esc.ID || req.Decisions[0].Note != "use plan B" || *req.Decisions[0].Decision != escalation.Resume {
		t.Fatalf("prompt decisions = %+v", req.Decisions)
	}
	if req.Interrupt == nil || req.Interrupt.Reason != "held: escalation 1" {
		t.Fatalf("prompt interrupt = %+v", req.Interrupt)
	}
	r2.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	if e := h.waitEscalation(escalation.KindAgent, escalation.Resolved); *e.Decision != escalation.Resume {
		t.Fatalf("resolved notice = %+v", e)
	}
	// Shown once: the next prompt does not carry it again.
	if ds, _ := h.store.Escalations(ctx, mailbox.EscalationFilter{Agent: "alpha", Unshown: true}); len(ds) != 0 {
		t.Fatalf("decision still unshown: %+v", ds)
	}
	got := strings.Join(h.states("alpha"), " ")
	if want := "Initializing BuildingPrompt Spawning Running Held BuildingPrompt Spawning Running SessionComplete Idle"; got != want {
		t.Fatalf("states = %s\nwant %s", got, want)
	}
	// The escalation's own events are there too, about alpha.
	evs, _ := h.store.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectEscalation})
	if len(evs) != 2 || evs[0].To != "open" || evs[1].To != "resolved" || evs[1].AgentName() != "alpha" || !strings.Contains(evs[1].Cause, "use plan B") {
		t.Fatalf("escalation events = %+v", evs)
	}
}

// TestHoldFromAnotherProcessAndAbort: a hold raised by another process
// (another connection, no poke) reaches an idle agent through the change
// feed; abort, poked over the control socket, sends it Idle, and its next
// prompt says so.
func TestHoldFromAnotherProcessAndAbort(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	ctx := context.Background()
	h.start()
	h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	other, err := sqlite.Open(ctx, h.layout.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	esc, _, err := Raise(ctx, other, escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Hold: true, Summary: "stop: the plan changed"})
	if err != nil {
		t.Fatal(err)
	}
	if n := h.waitFor("alpha", lifecycle.Held); n.From != lifecycle.Idle {
		t.Fatalf("hold = %+v", n)
	}
	if _, err := Decide(ctx, other, identity.Operator(), esc.ID, escalation.Event(escalation.Abort), "drop it"); err != nil {
		t.Fatal(err)
	}
	h.sup.handle(ctx, control.Request{Op: control.OpEscalation, Escalation: esc.ID}, nil)
	if n := h.waitFor("alpha", lifecycle.Idle); n.From != lifecycle.Held || n.Cause != "abort: escalation 1" {
		t.Fatalf("abort = %+v", n)
	}
	// An abort does not wake the agent; its next session hears of it.
	h.noSession()
	h.send(message.Draft{From: "operator", To: "alpha", Body: "new work"})
	r := h.nextRun()
	if req := h.lastPrompt(); len(req.Decisions) != 1 || *req.Decisions[0].Decision != escalation.Abort {
		t.Fatalf("prompt decisions = %+v", req.Decisions)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	// A second decision is refused, naming the first.
	if _, err := Decide(ctx, h.store, identity.Operator(), esc.ID, escalation.Event(escalation.Resume), ""); !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), "resolved already (abort)") {
		t.Fatalf("second decision: %v", err)
	}
	if _, err := Decide(ctx, h.store, identity.Operator(), 99, escalation.Ack, ""); err == nil || !strings.Contains(err.Error(), "no escalation 99") {
		t.Fatalf("missing escalation: %v", err)
	}
}

// TestHoldSurvivesCrashAndRestart: recovery finds the open hold (its row)
// and holds the agent again instead of starting a session; a graceful
// restart does the same; an ack keeps the hold.
func TestHoldSurvivesCrashAndRestart(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	ctx := context.Background()
	// What a kill -9 of a supervisor holding alpha leaves behind.
	h.store.RegisterAgent(ctx, mailbox.AgentInfo{Name: "alpha"})
	for _, st := range [][2]string{{"Stopped", "Initializing"}, {"Initializing", "Held"}} {
		if err := h.store.InTx(ctx, func(tx mailbox.Tx) error {
			_, err := tx.Transition(fsm.Change{Kind: fsm.SubjectAgent, Subject: "alpha", From: st[0], To: st[1], Seq: 1})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	esc, _, err := Raise(ctx, h.store, escalation.Draft{Kind: escalation.KindBranchViolation, Agent: "alpha", Hold: true, Summary: "committed on main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decide(ctx, h.store, identity.Operator(), esc.ID, escalation.Ack, "looking"); err != nil {
		t.Fatal(err)
	}
	h.send(message.Draft{From: "operator", To: "alpha", Body: "waiting mail"})
	h.start()
	h.waitFor("alpha", lifecycle.Initializing)
	if n := h.waitFor("alpha", lifecycle.Held); n.Cause != "held: escalation 1" {
		t.Fatalf("after recovery: %+v", n)
	}
	h.noSession()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// A graceful restart holds it again.
	h2 := &harness{t: t, store: h.store, layout: h.layout, notices: make(chan lifecycle.Notice, 1000), eng: h.eng, wt: h.wt, prompts: h.prompts}
	h2.sup = h2.newSupervisor(h.sup.cfg)
	h2.start()
	if n := h2.waitFor("alpha", lifecycle.Held); n.From != lifecycle.Initializing {
		t.Fatalf("after restart: %+v", n)
	}
	if _, err := h2.sup.Decide(ctx, esc.ID, escalation.Event(escalation.Resume), ""); err != nil {
		t.Fatal(err)
	}
	if r := h2.nextRun(); r.s.Seq != 2 || len(r.s.Mail) != 1 {
		t.Fatalf("after resume: session %d with %d mail", r.s.Seq, len(r.s.Mail))
	}
}

// TestGuardRaisesBranchViolation: the base-branch guard holds the agent
// with a critical branch_violation.
func TestGuardRaisesBranchViolation(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.wt.guard = func(string) *fakeGuard {
		return &fakeGuard{check: func() ([]Finding, error) {
			return []Finding{fakeFinding{kind: "branch_violation", key: "main moved", text: "alpha committed on main"}}, nil
		}}
	}
	h.start()
	h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	e := h.waitEscalation(escalation.KindBranchViolation, escalation.Open)
	if e.Severity != escalation.Critical || !e.Holds() || e.AgentName() != "alpha" ||
		!strings.Contains(e.Summary, "alpha committed on main") || !strings.Contains(string(e.Details), `"finding":"alpha committed on main"`) {
		t.Fatalf("escalation = %+v (details %s)", e, e.Details)
	}
	h.waitFor("alpha", lifecycle.Held)
	h.noSession()
}

// TestErrorThresholdRaises: an agent stopped by its error thresholds
// raises a critical errors escalation.
func TestErrorThresholdRaises(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n")
	h.start()
	for range 2 {
		h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	}
	h.send(message.Draft{From: "operator", To: "alpha", Body: "work"})
	for range 3 {
		h.nextRun().finish <- engine.Result{Outcome: engine.Failed, Err: errors.New("model exploded")}
	}
	h.waitFor("alpha", lifecycle.Stopped)
	e := h.waitEscalation(escalation.KindErrors, escalation.Open)
	if e.Severity != escalation.Critical || e.Hold || e.AgentName() != "alpha" || !strings.Contains(e.Summary, "alpha stopped after 3 consecutive / 3 total failed sessions; the last: model exploded") {
		t.Fatalf("escalation = %+v", e)
	}
}

// TestStalledSessionRaises: a running session with no activity for
// stall_after raises one critical stalled escalation, and is not held.
func TestStalledSessionRaises(t *testing.T) {
	h := newHarnessConfig(t, strings.Replace(baseConfig, "[liveness]\n", "[liveness]\nstall_after = \"100ms\"\n", 1)+"[[agent]]\nname = \"alpha\"\n")
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	e := h.waitEscalation(escalation.KindStalled, escalation.Open)
	if e.Severity != escalation.Critical || e.Hold || e.RefText() != "session:alpha-1" || !strings.Contains(e.Summary, "session 1 of alpha shows no activity") {
		t.Fatalf("escalation = %+v", e)
	}
	if a, _ := h.store.Agent(context.Background(), "alpha"); a.State != lifecycle.Running {
		t.Fatalf("state = %s", a.State)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	if es, _ := h.store.Escalations(context.Background(), mailbox.EscalationFilter{}); len(es) != 1 || es[0].Count != 1 {
		t.Fatalf("escalations = %+v", es)
	}
}

// TestEscalateToolHoldsItsAgent: the engines' escalate tool raises about
// the session's agent through the supervisor, which holds it at once.
func TestEscalateToolHoldsItsAgent(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	res, err := r.s.Escalator.Escalate(r.ctx, engine.EscalationRequest{Summary: "may I drop the users table?", Approval: true, Hold: true, Details: []byte(`{"rows": 0}`)})
	if err != nil || !res.Created || !res.Hold || res.Count != 1 {
		t.Fatalf("Escalate = %+v, %v", res, err)
	}
	h.waitFor("alpha", lifecycle.Held)
	e, _ := h.store.Escalation(context.Background(), res.ID)
	if e.Kind != escalation.KindApproval || e.Severity != escalation.Info || e.AgentName() != "alpha" || string(e.Details) != `{"rows": 0}` {
		t.Fatalf("escalation = %+v", e)
	}
	if _, err := r.s.Escalator.Escalate(r.ctx, engine.EscalationRequest{Summary: "x", Severity: "dire"}); err == nil {
		t.Fatal("a bad severity was accepted")
	}
}
