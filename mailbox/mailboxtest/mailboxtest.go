// Package mailboxtest is the conformance suite every mailbox.Store
// implementation must pass: delivery semantics, compare-and-set
// transitions, sessions, recovery, events, meta, the change feed,
// escalations, operator mail and protocol mail with its ACKs. Each
// backend's tests call Run with a factory that opens a fresh, empty store.
package mailboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/workflow"
)

// Clock is a manual clock for deterministic timestamps.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts a clock at a fixed moment.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)} }

// Now reads the clock.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock on.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Factory opens a fresh, empty store whose clock is now. The second store
// it returns, when not nil, is another connection (another process's view)
// to the same database: the change feed is tested against it.
type Factory func(t testing.TB, now func() time.Time) (store mailbox.Store, other func() mailbox.Store)

// Agents are the names the suite addresses mail to.
var Agents = []string{"backend", "frontend", "lead"}

type env struct {
	t     *testing.T
	s     mailbox.Store
	p     *mailbox.Poster
	clk   *Clock
	other func() mailbox.Store
	hooks Hooks
	ctx   context.Context
}

// Hooks are what a backend must do for the suite that the Store interface
// cannot say.
type Hooks struct {
	// CutLeaseLocks ends whatever keeps s's leases alive outside the
	// lease rows (PostgreSQL: the advisory-lock connection), as a network
	// cut or a frozen process would, so another holder can take them over
	// while s stays open. Nil: the backend has nothing of the kind
	// (SQLite), and a takeover needs only a stale heartbeat or Gone.
	CutLeaseLocks func(t testing.TB, s mailbox.Store)
}

// Run runs the whole suite against the stores newStore opens; hooks, at
// most one, are the backend's.
func Run(t *testing.T, newStore Factory, hooks ...Hooks) {
	var h Hooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	tests := []struct {
		name string
		fn   func(e *env)
	}{
		{"SendAndInbox", testSendAndInbox},
		{"PostValidation", testPostValidation},
		{"ReplyInheritsThread", testReplyInheritsThread},
		{"Thread", testThread},
		{"InboxFilters", testInboxFilters},
		{"Broadcast", testBroadcast},
		{"DeliveryLifecycle", testDeliveryLifecycle},
		{"DeliverSelected", testDeliverSelected},
		{"PendingCounts", testPendingCounts},
		{"PendingAll", testPendingAll},
		{"Prune", testPrune},
		{"MessagesSince", testMessagesSince},
		{"TransitionCompareAndSet", testTransitionCompareAndSet},
		{"EveryLifecycleStateStores", testEveryState},
		{"SessionEndSettlesMail", testSessionEndSettlesMail},
		{"RecoverAgent", testRecoverAgent},
		{"Heartbeat", testHeartbeat},
		{"ActivityAndNudges", testActivityAndNudges},
		{"Meta", testMeta},
		{"RollbackLeavesNothing", testRollback},
		{"FeedSeesOtherConnections", testFeed},
		{"Check", testCheck},
		{"TeamLaunch", testTeamLaunch},
		{"Spawned", testSpawned},
		{"EscalationLifecycle", testEscalationLifecycle},
		{"EscalationLists", testEscalationLists},
		{"EscalationRefusals", testEscalationRefusals},
		{"EscalationsByRef", testEscalationsByRef},
		{"OperatorMailDone", testOperatorMailDone},
		{"ProtocolLookups", testProtocolLookups},
		{"AckClock", testAckClock},
		{"AckStoredWithItsMessage", testAckStoredWithItsMessage},
		{"AckResumeAndAbort", testAckResumeAndAbort},
		{"PostProtocol", testPostProtocol},
		{"OneAnswerPerRequest", testOneAnswerPerRequest},
		{"Leases", testLeases},
		{"LeaseFence", testLeaseFence},
		{"SessionCapabilities", testSessionCapabilities},
		{"Reports", testReports},
		{"UsageSince", testUsageSince},
		{"SessionCost", testSessionCost},
		{"WorkItems", testWorkItems},
		{"MergeQueue", testMergeQueue},
		{"MergeQueueRacingTwins", testMergeQueueRacingTwins},
		{"Reservations", testReservations},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewClock()
			s, other := newStore(t, clk.Now)
			tc.fn(&env{t: t, s: s, p: mailbox.NewPoster(s, Agents, nil), clk: clk, other: other, hooks: h, ctx: context.Background()})
		})
	}
}

func (e *env) post(d message.Draft) message.Message {
	e.t.Helper()
	m, err := e.p.Post(e.ctx, d)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) deliver(agent string, seq int64, ids []int64) []message.Message {
	e.t.Helper()
	var ms []message.Message
	if err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		var err error
		ms, err = tx.Deliver(agent, seq, ids)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return ms
}

func (e *env) startSession(agent string, seq int64) []message.Message {
	e.t.Helper()
	var ms []message.Message
	if err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		var err error
		if ms, err = tx.Deliver(agent, seq, nil); err != nil {
			return err
		}
		return tx.StartSession(mailbox.SessionStart{Agent: agent, Seq: seq, Engine: "script", Prompt: "the prompt", Tasks: []string{"bd-1"}})
	}); err != nil {
		e.t.Fatal(err)
	}
	return ms
}

func (e *env) endSession(end mailbox.SessionEnd) error {
	return e.s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.EndSession(end) })
}

func (e *env) move(agent string, from, to lifecycle.State) (fsm.Event, error) {
	var ev fsm.Event
	err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		var err error
		ev, err = tx.Transition(fsm.Change{Kind: fsm.SubjectAgent, Subject: agent, From: string(from), To: string(to), Cause: "test"})
		return err
	})
	return ev, err
}

func ids(ms []message.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func testReports(e *env) {
	t, s := e.t, e.s
	if _, err := s.LastReport(e.ctx, "backend"); !errors.Is(err, mailbox.ErrNoReport) {
		t.Fatalf("no reports yet: %v", err)
	}
	r1, err := s.AddReport(e.ctx, mailbox.Report{Agent: "backend", SessionSeq: 2, Kind: mailbox.ReportProgress, Task: "T-1", Message: "half done"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.ID == 0 || !r1.At.Equal(e.clk.Now()) {
		t.Errorf("stored report %+v", r1)
	}
	e.clk.Add(time.Minute)
	r2, err := s.AddReport(e.ctx, mailbox.Report{Agent: "backend", Kind: mailbox.ReportSession, Message: "API done"})
	if err != nil {
		t.Fatal(err)
	}
	r3, err := s.AddReport(e.ctx, mailbox.Report{Agent: "frontend", Kind: mailbox.ReportBlocked, Task: "T-2", Message: "waiting"})
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.LastReport(e.ctx, "backend")
	if err != nil || last != r2 || last.Task != "" || last.Kind != mailbox.ReportSession {
		t.Errorf("LastReport = %+v, %v; want %+v", last, err, r2)
	}
	all, err := s.LastReports(e.ctx)
	if err != nil || len(all) != 2 || all["backend"] != r2 || all["frontend"] != r3 {
		t.Errorf("LastReports = %+v, %v; want backend's %+v and frontend's %+v", all, err, r2, r3)
	}
	for _, bad := range []mailbox.Report{
		{Agent: "backend", Kind: "gossip", Task: "T-1", Message: "x"},
		{Agent: "backend", Kind: mailbox.ReportProgress, Message: "no task"},
		{Agent: "backend", Kind: mailbox.ReportSession, Task: "T-1", Message: "a task on a session report"},
		{Agent: "backend", Kind: mailbox.ReportComplete, Task: "T-1"},
	} {
		if _, err := s.AddReport(e.ctx, bad); err == nil {
			t.Errorf("bad report accepted: %+v", bad)
		}
	}
	if last, _ := s.LastReport(e.ctx, "backend"); last != r2 {
		t.Errorf("a refused report changed the last one: %+v", last)
	}
}

func testUsageSince(e *env) {
	t, s := e.t, e.s
	run := func(agent string, seq int64, state mailbox.SessionState, in, out, cw, cr int64) {
		t.Helper()
		if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
			if err := tx.StartSession(mailbox.SessionStart{Agent: agent, Seq: seq, Engine: "script"}); err != nil {
				return err
			}
			return tx.EndSession(mailbox.SessionEnd{Agent: agent, Seq: seq, State: state, TokensIn: in, TokensOut: out, CacheWrite: cw, CacheRead: cr})
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"backend", "frontend"} {
		if err := s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: a, Mode: "execute", Engine: "script"}); err != nil {
			t.Fatal(err)
		}
	}
	if u, err := s.UsageSince(e.ctx, e.clk.Now().Add(-time.Hour)); err != nil || len(u) != 0 {
		t.Fatalf("no sessions: %v, %v", u, err)
	}
	run("backend", 1, mailbox.SessionCompleted, 100, 10, 5, 1000) // before the window
	e.clk.Add(time.Hour)
	since := e.clk.Now()
	run("backend", 2, mailbox.SessionFailed, 200, 20, 0, 7)
	run("backend", 3, mailbox.SessionInterrupted, 1, 2, 3, 4)
	run("frontend", 1, mailbox.SessionCompleted, 50, 5, 0, 0)
	// A running session has reported nothing yet and is not counted.
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
		return tx.StartSession(mailbox.SessionStart{Agent: "frontend", Seq: 2, Engine: "script"})
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.UsageSince(e.ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]mailbox.Usage{
		"backend":  {Input: 201, Output: 22, CacheWrite: 3, CacheRead: 11, Unpriced: 2},
		"frontend": {Input: 50, Output: 5, Unpriced: 1},
	}
	if len(got) != len(want) || got["backend"] != want["backend"] || got["frontend"] != want["frontend"] {
		t.Fatalf("UsageSince = %+v, want %+v", got, want)
	}
	if w := got["backend"].Work(); w != 226 {
		t.Errorf("backend work tokens %d, want 226 (cache reads left out)", w)
	}
	// The lifetime counter counts the same work tokens.
	if a, err := s.Agent(e.ctx, "backend"); err != nil || a.Tokens != 115+226 {
		t.Errorf("backend lifetime tokens %d (%v), want %d", a.Tokens, err, 115+226)
	}
	if got, err := s.UsageSince(e.ctx, since.Add(time.Nanosecond)); err != nil || len(got) != 0 {
		t.Errorf("after every session ended: %v, %v", got, err)
	}
}

// testSessionCost: a session's cost is stored as given, nil (unknown) kept
// apart from 0; UsageSince sums the known costs and counts the unknown.
func testSessionCost(e *env) {
	t, s := e.t, e.s
	if err := s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend", Mode: "execute", Engine: "script"}); err != nil {
		t.Fatal(err)
	}
	since := e.clk.Now()
	usd := func(f float64) *float64 { return &f }
	for seq, cost := range map[int64]*float64{1: usd(0.25), 2: nil, 3: usd(0.5), 4: usd(0)} {
		if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
			if err := tx.StartSession(mailbox.SessionStart{Agent: "backend", Seq: seq, Engine: "script"}); err != nil {
				return err
			}
			return tx.EndSession(mailbox.SessionEnd{Agent: "backend", Seq: seq, State: mailbox.SessionCompleted, TokensIn: 10, CostUSD: cost})
		}); err != nil {
			t.Fatal(err)
		}
	}
	for seq, want := range map[int64]string{1: "0.25", 2: "unknown", 3: "0.5", 4: "0"} {
		got, err := s.Session(e.ctx, "backend", seq)
		if err != nil {
			t.Fatal(err)
		}
		text := "unknown"
		if got.CostUSD != nil {
			text = fmt.Sprint(*got.CostUSD)
		}
		if text != want {
			t.Errorf("session %d cost %s, want %s", seq, text, want)
		}
	}
	u, err := s.UsageSince(e.ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	if got := u["backend"]; got.CostUSD != 0.75 || got.Unpriced != 1 || got.Input != 40 {
		t.Fatalf("UsageSince = %+v, want $0.75 known, 1 unpriced, 40 in", got)
	}
}

// testWorkItems: an item is stored in its first state, moves only by
// compare-and-set with an event naming who triggered it, keeps its
// bookkeeping apart from its state, and lists first in, first out.
func testWorkItems(e *env) {
	t, s := e.t, e.s
	insert := func(it workflow.Item) error {
		return s.InTx(e.ctx, func(tx mailbox.Tx) error {
			if err := tx.InsertItem(it); err != nil {
				return err
			}
			_, err := fsm.ApplyBy(tx, it.Kind.Table(), fsm.SubjectItem, it.ID, "", workflow.Create, it.State, "", message.Operator)
			return err
		})
	}
	a := workflow.Item{ID: "T-1", Workflow: "review", Kind: workflow.DevReview, Title: "add a flag", Criteria: []string{"flag exists", "tested"},
		Risk: workflow.RiskHigh, State: workflow.Dispatched, Agent: "backend"}
	if err := insert(a); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(time.Second)
	if err := insert(workflow.Item{ID: "F-1", Workflow: "qa", Kind: workflow.DevQA, Title: "feature", Risk: workflow.RiskLow, Complex: true, State: workflow.Start}); err != nil {
		t.Fatal(err)
	}
	if err := insert(a); !errors.Is(err, mailbox.ErrItemExists) {
		t.Fatalf("second insert of T-1: %v, want ErrItemExists", err)
	}
	got, err := s.Item(e.ctx, "T-1")
	if err != nil || got.State != workflow.Dispatched || got.Risk != workflow.RiskHigh || !slices.Equal(got.Criteria, a.Criteria) || got.Agent != "backend" {
		t.Fatalf("Item = %+v, %v", got, err)
	}
	if _, err := s.Item(e.ctx, "nope"); !errors.Is(err, mailbox.ErrNoSuchItem) {
		t.Fatalf("missing item: %v", err)
	}
	// Compare-and-set: from the wrong state nothing moves.
	err = s.InTx(e.ctx, func(tx mailbox.Tx) error {
		_, err := fsm.ApplyBy(tx, workflow.ReviewTable, fsm.SubjectItem, "T-1", workflow.InProgress, workflow.Result, workflow.InReview, "", "backend")
		return err
	})
	if !errors.Is(err, mailbox.ErrStateConflict) {
		t.Fatalf("move from a stale state: %v, want ErrStateConflict", err)
	}
	at := e.clk.Now()
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
		if _, err := fsm.ApplyBy(tx, workflow.ReviewTable, fsm.SubjectItem, "T-1", workflow.Dispatched, workflow.Acked, workflow.InProgress, "", "backend"); err != nil {
			return err
		}
		it, err := tx.Item("T-1")
		if err != nil {
			return err
		}
		it.RejectCount, it.Dispatch, it.Inputs, it.StageAt, it.Notified = 2, "task_dispatch-T-1-1", []string{"fix \"x\""}, &at, workflow.InProgress
		return tx.UpdateItem(it)
	}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Item(e.ctx, "T-1")
	if err != nil || got.State != workflow.InProgress || got.RejectCount != 2 || got.Dispatch != "task_dispatch-T-1-1" ||
		!slices.Equal(got.Inputs, []string{"fix \"x\""}) || got.StageAt == nil || !got.StageAt.Equal(at) || got.Notified != workflow.InProgress {
		t.Fatalf("after update = %+v, %v", got, err)
	}
	items, err := s.Items(e.ctx, "")
	if err != nil || len(items) != 2 || items[0].ID != "T-1" || items[1].ID != "F-1" || !items[1].Complex {
		t.Fatalf("Items = %+v, %v", items, err)
	}
	if items, err := s.Items(e.ctx, "qa"); err != nil || len(items) != 1 || items[0].ID != "F-1" {
		t.Fatalf("Items(qa) = %+v, %v", items, err)
	}
	evs, err := s.Events(e.ctx, mailbox.EventFilter{Kind: fsm.SubjectItem, Subjects: []string{"T-1"}})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events of T-1 = %+v, %v", evs, err)
	}
	if evs[0].From != nil || evs[0].To != "dispatched" || evs[0].AgentName() != "operator" ||
		evs[1].From == nil || *evs[1].From != "dispatched" || evs[1].To != "in_progress" || evs[1].AgentName() != "backend" || evs[1].Cause != "ack" {
		t.Fatalf("events of T-1 = %+v", evs)
	}
}
