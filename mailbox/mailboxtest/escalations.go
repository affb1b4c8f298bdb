package mailboxtest

import (
	"errors"
	"slices"
	"time"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// raise stores a draft the way the supervisor does: count an unresolved
// twin, or insert and record the first transition.
func (e *env) raise(d escalation.Draft) (escalation.Escalation, bool) {
	e.t.Helper()
	d = d.Normalize()
	if err := d.Validate(); err != nil {
		e.t.Fatal(err)
	}
	var out escalation.Escalation
	var created bool
	err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		twin, ok, err := tx.UnresolvedTwin(d.DedupeKey)
		if err != nil {
			return err
		}
		if ok {
			out, err = tx.CountEscalation(twin.ID)
			return err
		}
		if out, err = tx.InsertEscalation(d); err != nil {
			return err
		}
		created = true
		_, err = fsm.Apply(tx, escalation.Table, fsm.SubjectEscalation, escalation.Subject(out.ID), "", escalation.Raise, escalation.Open, "raised", 0)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out, created
}

// decide moves an escalation by one event, writing the decision and note.
func (e *env) decide(id int64, from escalation.State, ev escalation.Event, note string) (fsm.Event, error) {
	to := escalation.Resolved
	if ev == escalation.Ack {
		to = escalation.Acked
	}
	var out fsm.Event
	err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		d := escalation.Decision("")
		if ev != escalation.Ack {
			d = escalation.Decision(ev)
		}
		var err error
		if out, err = fsm.Apply(tx, escalation.Table, fsm.SubjectEscalation, escalation.Subject(id), from, ev, to, "", 0); err != nil {
			return err
		}
		return tx.SetDecision(id, d, note)
	})
	return out, err
}

func testEscalationLifecycle(e *env) {
	t, s := e.t, e.s
	draft := escalation.Draft{Kind: escalation.KindAgent, Agent: "backend", Summary: "need a decision on the schema", Hold: true,
		Ref: "msg:7", Details: []byte(`{"tables": ["users"]}`)}
	first, created := e.raise(draft)
	if !created || first.ID == 0 || first.State != escalation.Open || !first.Hold || first.AgentName() != "backend" ||
		first.RefText() != "msg:7" || first.Severity != escalation.Warning || first.Count != 1 || first.Decision != nil ||
		first.AckedAt != nil || first.ResolvedAt != nil || first.CreatedAt.IsZero() || !first.Holds() {
		t.Fatalf("raised = %+v", first)
	}
	if string(first.Details) != `{"tables": ["users"]}` {
		t.Fatalf("details = %s", first.Details)
	}
	// A repeat counts the open twin and stores nothing new.
	twin, created := e.raise(draft)
	if created || twin.ID != first.ID || twin.Count != 2 {
		t.Fatalf("repeat = %+v, created %v", twin, created)
	}
	got, err := s.Escalation(e.ctx, first.ID)
	if err != nil || got.Count != 2 || got.DedupeKey != first.DedupeKey {
		t.Fatalf("read back = %+v, %v", got, err)
	}
	if _, err := s.Escalation(e.ctx, 999); !errors.Is(err, mailbox.ErrNoSuchEscalation) {
		t.Fatalf("missing escalation: %v", err)
	}
	// The raise is the escalation's first event, from nothing, about its agent.
	evs, err := s.Events(e.ctx, mailbox.EventFilter{Kind: fsm.SubjectEscalation})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	if ev := evs[0]; ev.From != nil || ev.To != "open" || ev.Subject != escalation.Subject(first.ID) || ev.AgentName() != "backend" {
		t.Fatalf("raise event = %+v", ev)
	}
	if evs, _ := s.Events(e.ctx, mailbox.EventFilter{Agent: "backend"}); len(evs) != 1 {
		t.Fatalf("the agent's events miss its escalation: %+v", evs)
	}
	if evs, _ := s.Events(e.ctx, mailbox.EventFilter{Kind: fsm.SubjectAgent}); len(evs) != 0 {
		t.Fatalf("agent events = %+v", evs)
	}

	e.clk.Add(time.Minute)
	ev, err := e.decide(first.ID, escalation.Open, escalation.Ack, "looking")
	if err != nil || ev.From == nil || *ev.From != "open" || ev.To != "acked" {
		t.Fatalf("ack = %+v, %v", ev, err)
	}
	got, _ = s.Escalation(e.ctx, first.ID)
	if got.State != escalation.Acked || got.AckedAt == nil || !got.AckedAt.Equal(e.clk.Now()) || got.Note != "looking" || got.Decision != nil || !got.Holds() {
		t.Fatalf("acked = %+v", got)
	}
	// An acked escalation is still unresolved: a repeat counts it.
	if again, created := e.raise(draft); created || again.Count != 3 {
		t.Fatalf("repeat while acked = %+v", again)
	}
	// A stale from state is refused.
	if _, err := e.decide(first.ID, escalation.Open, escalation.Event(escalation.Resume), "x"); !errors.Is(err, mailbox.ErrStateConflict) {
		t.Fatalf("stale decision: %v", err)
	}
	e.clk.Add(time.Minute)
	if _, err := e.decide(first.ID, escalation.Acked, escalation.Event(escalation.Resume), "use plan B"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Escalation(e.ctx, first.ID)
	if got.State != escalation.Resolved || got.Decision == nil || *got.Decision != escalation.Resume || got.Note != "use plan B" ||
		got.ResolvedAt == nil || !got.ResolvedAt.Equal(e.clk.Now()) || got.Holds() {
		t.Fatalf("resolved = %+v", got)
	}
	// Resolved, it no longer takes repeats: the same trigger opens anew.
	fresh, created := e.raise(draft)
	if !created || fresh.ID == first.ID || fresh.Count != 1 {
		t.Fatalf("after resolve = %+v, created %v", fresh, created)
	}
	// The table refuses a second decision before the store sees it.
	var ite *fsm.IllegalTransitionError
	if _, err := e.decide(first.ID, escalation.Resolved, escalation.Event(escalation.Abort), ""); !errors.As(err, &ite) {
		t.Fatalf("decision on a resolved escalation: %v", err)
	}
	// The schema refuses words it does not know, and a decision on an
	// unresolved escalation.
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.SetDecision(first.ID, "maybe", "") }); err == nil {
		t.Fatal("decision maybe accepted")
	}
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.SetDecision(fresh.ID, escalation.Resume, "") }); err == nil {
		t.Fatal("a decision on an open escalation was accepted")
	}
}

func testEscalationLists(e *env) {
	t, s := e.t, e.s
	info, _ := e.raise(escalation.Draft{Kind: escalation.KindApproval, Agent: "backend", Summary: "may I drop the old table?"})
	e.clk.Add(time.Second)
	warn, _ := e.raise(escalation.Draft{Kind: escalation.KindAgent, Summary: "the operator's own note"})
	e.clk.Add(time.Second)
	crit1, _ := e.raise(escalation.Draft{Kind: escalation.KindBranchViolation, Agent: "frontend", Summary: "committed on main", Hold: true})
	e.clk.Add(time.Second)
	crit2, _ := e.raise(escalation.Draft{Kind: escalation.KindStalled, Agent: "backend", Summary: "no activity", Ref: "session:backend-3"})
	if warn.AgentName() != "" || warn.Agent != nil || warn.Ref != nil {
		t.Fatalf("no agent, no ref = %+v", warn)
	}
	list, err := s.Escalations(e.ctx, mailbox.EscalationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{crit2.ID, crit1.ID, warn.ID, info.ID} // most severe first, then newest first
	if got := escIDs(list); !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	if list, _ := s.Escalations(e.ctx, mailbox.EscalationFilter{Agent: "backend"}); !slices.Equal(escIDs(list), []int64{crit2.ID, info.ID}) {
		t.Fatalf("backend's = %v", escIDs(list))
	}
	if _, err := e.decide(info.ID, escalation.Open, escalation.Event(escalation.Approve), "yes"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.Escalations(e.ctx, mailbox.EscalationFilter{}); len(list) != 3 {
		t.Fatalf("unresolved = %v", escIDs(list))
	}
	if list, _ := s.Escalations(e.ctx, mailbox.EscalationFilter{All: true}); len(list) != 4 {
		t.Fatalf("all = %v", escIDs(list))
	}
	// The decision waits for backend's next prompt, then is shown once.
	unshown, err := s.Escalations(e.ctx, mailbox.EscalationFilter{Agent: "backend", Unshown: true})
	if err != nil || !slices.Equal(escIDs(unshown), []int64{info.ID}) {
		t.Fatalf("unshown = %v, %v", escIDs(unshown), err)
	}
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.MarkShown([]int64{info.ID}, 4) }); err != nil {
		t.Fatal(err)
	}
	if unshown, _ := s.Escalations(e.ctx, mailbox.EscalationFilter{Agent: "backend", Unshown: true}); len(unshown) != 0 {
		t.Fatalf("shown decision still unshown: %v", escIDs(unshown))
	}
	if got, _ := s.Escalation(e.ctx, info.ID); got.ShownIn != 4 {
		t.Fatalf("shown in = %d", got.ShownIn)
	}
	// The notifier's bookkeeping survives, and decides what is unsettled.
	now := e.clk.Now()
	n := escalation.Notified{State: escalation.Open, At: &now, Reminders: 2, LastRemindedAt: &now}
	if err := s.SetNotified(e.ctx, crit1.ID, n); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Escalation(e.ctx, crit1.ID)
	if got.Notified.State != escalation.Open || got.Notified.At == nil || !got.Notified.At.Equal(now) || got.Notified.Reminders != 2 || got.State != escalation.Open {
		t.Fatalf("notified = %+v", got.Notified)
	}
	if err := s.SetNotified(e.ctx, 999, n); !errors.Is(err, mailbox.ErrNoSuchEscalation) {
		t.Fatalf("notify a missing escalation: %v", err)
	}
	if _, err := e.decide(crit1.ID, escalation.Open, escalation.Event(escalation.Abort), ""); err != nil {
		t.Fatal(err)
	}
	// crit1 was announced and is now resolved: still unsettled. info was
	// never announced: settled once resolved.
	unsettled, _ := s.Escalations(e.ctx, mailbox.EscalationFilter{Unsettled: true})
	if got := escIDs(unsettled); !slices.Equal(got, []int64{crit2.ID, crit1.ID, warn.ID}) {
		t.Fatalf("unsettled = %v", got)
	}
	n.State = escalation.Resolved
	s.SetNotified(e.ctx, crit1.ID, n)
	if unsettled, _ := s.Escalations(e.ctx, mailbox.EscalationFilter{Unsettled: true}); len(unsettled) != 2 {
		t.Fatalf("settled escalation still listed: %v", escIDs(unsettled))
	}
}

func testEscalationRefusals(e *env) {
	t := e.t
	first, _ := e.raise(escalation.Draft{Kind: escalation.KindAgent, Agent: "lead", Summary: "one"})
	// Two unresolved escalations never share a dedupe key.
	err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		_, err := tx.InsertEscalation(escalation.Draft{Kind: escalation.KindAgent, Severity: escalation.Info, Summary: "two", DedupeKey: first.DedupeKey})
		return err
	})
	if err == nil {
		t.Fatal("a second unresolved escalation with the same dedupe key was stored")
	}
	// A raise's first transition needs the row it names, fresh.
	err = e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		_, err := tx.Transition(fsm.Change{Kind: fsm.SubjectEscalation, Subject: escalation.Subject(first.ID), To: "open"})
		return err
	})
	if !errors.Is(err, mailbox.ErrStateConflict) {
		t.Fatalf("second first transition: %v", err)
	}
	// The schema refuses unknown words and a hold about nobody.
	for _, d := range []escalation.Draft{
		{Kind: "gossip", Severity: escalation.Info, Summary: "x", DedupeKey: "a"},
		{Kind: escalation.KindAgent, Severity: "dire", Summary: "x", DedupeKey: "b"},
		{Kind: escalation.KindAgent, Severity: escalation.Info, Summary: "x", DedupeKey: "c", Hold: true},
	} {
		err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error { _, err := tx.InsertEscalation(d); return err })
		if err == nil {
			t.Errorf("stored %+v", d)
		}
	}
}

func testOperatorMailDone(e *env) {
	t, s := e.t, e.s
	asked := e.post(message.Draft{From: "backend", To: "operator", Body: "which database?"})
	other := e.post(message.Draft{From: "lead", To: "operator", Body: "fyi", Kind: message.KindStatus})
	toAgent := e.post(message.Draft{From: "operator", To: "backend", Body: "hi"})
	n, err := s.MarkOperatorDone(e.ctx, []int64{asked.ID, toAgent.ID})
	if err != nil || n != 1 {
		t.Fatalf("MarkOperatorDone = %d, %v; want only the mail to operator", n, err)
	}
	got, _ := s.Message(e.ctx, asked.ID)
	if got.State != message.Done || got.SessionSeq != nil {
		t.Fatalf("answered mail = %+v", got)
	}
	if got, _ := s.Message(e.ctx, toAgent.ID); got.State != message.Queued {
		t.Fatalf("mail to an agent became %s", got.State)
	}
	if got, _ := s.Message(e.ctx, other.ID); got.State != message.Queued {
		t.Fatalf("unrelated mail became %s", got.State)
	}
	if n, _ := s.MarkOperatorDone(e.ctx, []int64{asked.ID}); n != 0 {
		t.Fatalf("marked done twice: %d", n)
	}
	if ms, _ := s.Inbox(e.ctx, "operator", mailbox.Filter{State: message.Done}); len(ms) != 1 || ms[0].ID != asked.ID {
		t.Fatalf("done operator mail = %+v", ms)
	}
	// A reply to done operator mail still joins its thread.
	r := e.post(message.Draft{From: "operator", To: "backend", Body: "postgres", ReplyTo: asked.ID})
	if r.ThreadID != asked.ID {
		t.Fatalf("reply thread = %d", r.ThreadID)
	}
}

func escIDs(es []escalation.Escalation) []int64 {
	out := make([]int64, len(es))
	for i, x := range es {
		out[i] = x.ID
	}
	return out
}

// testEscalationsByRef: the escalations about one ref, of every kind,
// newest first; openOnly drops the resolved ones; other refs, no ref and
// an empty ref match nothing.
func testEscalationsByRef(e *env) {
	t, s := e.t, e.s
	old, _ := e.raise(escalation.Draft{Kind: escalation.KindApproval, Agent: "backend", Summary: "merge it?", Ref: "item:wf-1"})
	e.clk.Add(time.Second)
	e.raise(escalation.Draft{Kind: escalation.KindApproval, Agent: "backend", Summary: "other item", Ref: "item:wf-10"})
	e.raise(escalation.Draft{Kind: escalation.KindAgent, Summary: "no ref"})
	e.clk.Add(time.Second)
	stalled, _ := e.raise(escalation.Draft{Kind: escalation.KindStalled, Agent: "backend", Summary: "stuck", Ref: "item:wf-1"})
	if _, err := e.decide(old.ID, escalation.Open, escalation.Event(escalation.Approve), "yes"); err != nil {
		t.Fatal(err)
	}
	all, err := s.EscalationsByRef(e.ctx, "item:wf-1", false)
	if err != nil || !slices.Equal(escIDs(all), []int64{stalled.ID, old.ID}) {
		t.Fatalf("by ref = %v, %v; want %v", escIDs(all), err, []int64{stalled.ID, old.ID})
	}
	if all[1].State != escalation.Resolved || all[1].Decision == nil || *all[1].Decision != escalation.Approve || *all[1].Ref != "item:wf-1" {
		t.Fatalf("the resolved one = %+v", all[1])
	}
	if open, err := s.EscalationsByRef(e.ctx, "item:wf-1", true); err != nil || !slices.Equal(escIDs(open), []int64{stalled.ID}) {
		t.Fatalf("open by ref = %v, %v", escIDs(open), err)
	}
	for _, ref := range []string{"", "item:wf", "item:wf-2"} {
		if got, err := s.EscalationsByRef(e.ctx, ref, false); err != nil || len(got) != 0 {
			t.Fatalf("by ref %q = %v, %v; want none", ref, escIDs(got), err)
		}
	}
}
