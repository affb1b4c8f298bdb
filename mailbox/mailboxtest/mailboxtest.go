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
	"github.com/swarmhq/swarm/mode"
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

func testSendAndInbox(e *env) {
	t, s := e.t, e.s
	m := e.post(message.Draft{From: "operator", To: "backend", Body: "hi"})
	if m.ID == 0 || m.ThreadID != m.ID || m.ReplyTo != nil || m.State != message.Queued || m.Urgency != message.Normal ||
		m.Kind != message.KindMessage || m.SessionSeq != nil || !m.CreatedAt.Equal(e.clk.Now()) {
		t.Fatalf("stored message = %+v", m)
	}
	e.clk.Add(time.Second)
	u := e.post(message.Draft{From: "frontend", To: "backend", Body: "disk full", Urgency: message.Urgent, Payload: []byte(`{"a":1}`)})
	got, err := s.Inbox(e.ctx, "backend", mailbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), []int64{m.ID, u.ID}) {
		t.Fatalf("inbox = %v, want oldest first", ids(got))
	}
	if string(got[1].Payload) != `{"a":1}` {
		t.Fatalf("payload = %s", got[1].Payload)
	}
	got, _ = s.Inbox(e.ctx, "backend", mailbox.Filter{Limit: 1})
	if !slices.Equal(ids(got), []int64{u.ID}) {
		t.Fatalf("inbox limit 1 = %v, want the newest", ids(got))
	}
	got, _ = s.Inbox(e.ctx, "frontend", mailbox.Filter{Sent: true})
	if !slices.Equal(ids(got), []int64{u.ID}) {
		t.Fatalf("sent by frontend = %v", ids(got))
	}
	if _, err := s.Inbox(e.ctx, "backend", mailbox.Filter{State: "lost"}); err == nil {
		t.Fatal("bad state accepted")
	}
	one, err := s.Message(e.ctx, u.ID)
	if err != nil || one.Body != "disk full" || !one.IsUrgent() {
		t.Fatalf("Message = %+v, %v", one, err)
	}
	if _, err := s.Message(e.ctx, 9999); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Fatalf("missing message: %v", err)
	}
}

func testPostValidation(e *env) {
	t := e.t
	for _, d := range []message.Draft{
		{From: "operator", To: "nobody", Body: "x"},
		{From: "operator", To: "../x", Body: "x"},
		{From: "backend", To: "backend", Body: "x"},
		{From: "operator", To: "backend", Body: ""},
	} {
		if _, err := e.p.Post(e.ctx, d); err == nil {
			t.Errorf("Post(%+v) succeeded", d)
		}
	}
	if _, err := e.p.Post(e.ctx, message.Draft{From: "operator", To: "backend", Body: "x", ReplyTo: 999}); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Errorf("reply to a missing message: %v", err)
	}
	if n, _ := e.s.Inbox(e.ctx, "backend", mailbox.Filter{}); len(n) != 0 {
		t.Fatalf("rejected mail was stored: %+v", n)
	}
	// The poster wakes with exactly what it stored.
	var woke []int64
	p := mailbox.NewPoster(e.s, Agents, mailbox.WakerFunc(func(_ context.Context, ms []message.Message) { woke = append(woke, ids(ms)...) }))
	m, err := p.Post(e.ctx, message.Draft{From: "operator", To: "lead", Body: "wake"})
	if err != nil || !slices.Equal(woke, []int64{m.ID}) {
		t.Fatalf("woke %v for #%d, %v", woke, m.ID, err)
	}
}

func testReplyInheritsThread(e *env) {
	t := e.t
	root := e.post(message.Draft{From: "lead", To: "backend", Body: "build the API"})
	r1, err := e.p.Reply(e.ctx, root.ID, message.Draft{From: "backend", Body: "on it"})
	if err != nil {
		t.Fatal(err)
	}
	r2 := e.post(message.Draft{From: "lead", To: "backend", Body: "thanks", ReplyTo: r1.ID})
	if r1.To != "lead" || r1.ThreadID != root.ID || *r1.ReplyTo != root.ID {
		t.Errorf("reply = %+v", r1)
	}
	if r2.ThreadID != root.ID || *r2.ReplyTo != r1.ID {
		t.Errorf("reply to reply = %+v", r2)
	}
}

// Thread reads a whole thread from any of its messages, oldest first,
// and nothing of other threads.
func testThread(e *env) {
	t := e.t
	root := e.post(message.Draft{From: "lead", To: "backend", Body: "build the API"})
	other := e.post(message.Draft{From: "lead", To: "frontend", Body: "another thread"})
	r1, err := e.p.Reply(e.ctx, root.ID, message.Draft{From: "backend", Body: "on it"})
	if err != nil {
		t.Fatal(err)
	}
	r2 := e.post(message.Draft{From: "lead", To: "backend", Body: "thanks", ReplyTo: r1.ID})
	r3 := e.post(message.Draft{From: "frontend", To: "backend", Body: "me too", ReplyTo: root.ID})
	want := []int64{root.ID, r1.ID, r2.ID, r3.ID}
	for _, from := range want {
		got, err := e.s.Thread(e.ctx, from)
		if err != nil || !slices.Equal(ids(got), want) {
			t.Fatalf("Thread(%d) = %v, %v; want %v", from, ids(got), err, want)
		}
	}
	if got, err := e.s.Thread(e.ctx, other.ID); err != nil || !slices.Equal(ids(got), []int64{other.ID}) {
		t.Fatalf("a thread of one = %v, %v", ids(got), err)
	}
	if _, err := e.s.Thread(e.ctx, 999); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Fatalf("Thread(999) = %v, want ErrNoSuchMessage", err)
	}
}

// Inbox narrows by sender, kind and body text, before the limit.
func testInboxFilters(e *env) {
	t := e.t
	a := e.post(message.Draft{From: "lead", To: "backend", Body: "deploy <prod> && smile"})
	b := e.post(message.Draft{From: "frontend", To: "backend", Body: "Deploy staging"})
	c := e.post(message.Draft{From: "lead", To: "backend", Body: "T-1: write docs", Kind: message.KindTask})
	e.post(message.Draft{From: "lead", To: "backend", Body: "lunch?"})
	for _, tc := range []struct {
		f    mailbox.Filter
		want []int64
	}{
		{mailbox.Filter{From: "lead"}, []int64{a.ID, c.ID, c.ID + 1}},
		{mailbox.Filter{Kind: message.KindTask}, []int64{c.ID}},
		{mailbox.Filter{Grep: "deploy"}, []int64{a.ID}}, // case-sensitive
		{mailbox.Filter{Grep: "<prod> &&"}, []int64{a.ID}},
		{mailbox.Filter{Grep: "%"}, nil}, // no LIKE patterns
		{mailbox.Filter{Grep: "e", From: "lead", Limit: 1}, []int64{c.ID}},
		{mailbox.Filter{From: "frontend", Kind: message.KindMessage, Grep: "staging"}, []int64{b.ID}},
	} {
		got, err := e.s.Inbox(e.ctx, "backend", tc.f)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Errorf("Inbox(%+v) = %v, %v; want %v", tc.f, ids(got), err, tc.want)
		}
	}
}

func testBroadcast(e *env) {
	t := e.t
	ms, err := e.p.Broadcast(e.ctx, message.Draft{From: "lead", Body: "standup"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].To != "backend" || ms[1].To != "frontend" {
		t.Fatalf("broadcast = %+v", ms)
	}
	ms, err = e.p.Broadcast(e.ctx, message.Draft{From: "operator", Body: "all hands"})
	if err != nil || len(ms) != 3 {
		t.Fatalf("operator broadcast = %d messages, %v", len(ms), err)
	}
}

func testDeliveryLifecycle(e *env) {
	t, s := e.t, e.s
	if err := s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"}); err != nil {
		t.Fatal(err)
	}
	a := e.post(message.Draft{From: "operator", To: "backend", Body: "first"})
	e.clk.Add(time.Minute)
	b := e.post(message.Draft{From: "frontend", To: "backend", Body: "second"})
	e.clk.Add(time.Minute)
	u := e.post(message.Draft{From: "lead", To: "backend", Body: "urgent", Urgency: message.Urgent})

	q, err := s.Queued(e.ctx, "backend")
	if err != nil || !slices.Equal(ids(q), []int64{u.ID, a.ID, b.ID}) {
		t.Fatalf("queued = %v, %v; want urgent first, then oldest", ids(q), err)
	}
	// Session 1 gets all three, urgent first, then oldest.
	got := e.startSession("backend", 1)
	if !slices.Equal(ids(got), []int64{u.ID, a.ID, b.ID}) {
		t.Fatalf("delivery order = %v", ids(got))
	}
	for _, m := range got {
		if m.State != message.Delivered || *m.SessionSeq != 1 || m.Shown != 0 {
			t.Fatalf("delivered = %+v", m)
		}
	}
	// Nothing is left to deliver twice.
	if again := e.deliver("backend", 2, nil); len(again) != 0 {
		t.Fatalf("delivered twice: %v", ids(again))
	}
	// Session 1 is interrupted: back to queued, shown once.
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionInterrupted}); err != nil {
		t.Fatal(err)
	}
	q, _ = s.Queued(e.ctx, "backend")
	if !slices.Equal(ids(q), []int64{u.ID, a.ID, b.ID}) || q[0].Shown != 1 || q[0].SessionSeq != nil {
		t.Fatalf("requeued = %+v", q)
	}
	c := e.post(message.Draft{From: "operator", To: "backend", Body: "third"})
	got = e.startSession("backend", 2)
	if len(got) != 4 || got[3].ID != c.ID || got[3].Shown != 0 || got[1].Shown != 1 {
		t.Fatalf("session 2 = %+v", got)
	}
	// Session 2 completes: all done, in session 2.
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 2, State: mailbox.SessionCompleted}); err != nil {
		t.Fatal(err)
	}
	done, _ := s.Inbox(e.ctx, "backend", mailbox.Filter{State: message.Done})
	if len(done) != 4 {
		t.Fatalf("%d done, want 4", len(done))
	}
	for _, m := range done {
		if *m.SessionSeq != 2 {
			t.Fatalf("done message in session %d", *m.SessionSeq)
		}
	}
}

func testDeliverSelected(e *env) {
	t := e.t
	a := e.post(message.Draft{From: "operator", To: "backend", Body: "a"})
	b := e.post(message.Draft{From: "operator", To: "backend", Body: "b", Urgency: message.Urgent})
	got := e.deliver("backend", 3, []int64{b.ID, 9999})
	if !slices.Equal(ids(got), []int64{b.ID}) || *got[0].SessionSeq != 3 {
		t.Fatalf("Deliver(ids) = %+v", got)
	}
	if got := e.deliver("backend", 3, []int64{b.ID}); len(got) != 0 {
		t.Fatalf("delivered again: %+v", got)
	}
	if got := e.deliver("backend", 3, []int64{}); len(got) != 0 {
		t.Fatalf("an empty id list delivered %v", ids(got))
	}
	q, _ := e.s.Queued(e.ctx, "backend")
	if !slices.Equal(ids(q), []int64{a.ID}) {
		t.Fatalf("queued = %v", ids(q))
	}
}

func testPendingCounts(e *env) {
	t := e.t
	e.post(message.Draft{From: "operator", To: "backend", Body: "a", Urgency: message.Urgent})
	e.post(message.Draft{From: "operator", To: "backend", Body: "b", Kind: message.KindStatus})
	e.post(message.Draft{From: "operator", To: "backend", Body: "c", Kind: message.KindNudge})
	c, err := e.s.Pending(e.ctx, "backend")
	if err != nil || c != (mailbox.Counts{Queued: 3, Urgent: 1, Waking: 2}) {
		t.Fatalf("Pending = %+v, %v", c, err)
	}
	e.deliver("backend", 1, nil)
	c, _ = e.s.Pending(e.ctx, "backend")
	if c != (mailbox.Counts{Delivered: 3}) {
		t.Fatalf("Pending after delivery = %+v", c)
	}
}

func testPendingAll(e *env) {
	t := e.t
	all, err := e.s.PendingAll(e.ctx)
	if err != nil || len(all) != 0 {
		t.Fatalf("PendingAll of an empty store = %+v, %v", all, err)
	}
	e.post(message.Draft{From: "operator", To: "backend", Body: "a", Urgency: message.Urgent})
	e.post(message.Draft{From: "operator", To: "backend", Body: "b", Kind: message.KindStatus})
	e.post(message.Draft{From: "lead", To: "frontend", Body: "c"})
	e.post(message.Draft{From: "lead", To: "operator", Body: "d"})
	e.deliver("frontend", 1, nil)
	// A completed session's mail is done: not counted, and its agent is absent.
	e.s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "lead"})
	e.post(message.Draft{From: "operator", To: "lead", Body: "e"})
	e.startSession("lead", 1)
	if err := e.endSession(mailbox.SessionEnd{Agent: "lead", Seq: 1, State: mailbox.SessionCompleted}); err != nil {
		t.Fatal(err)
	}
	all, err = e.s.PendingAll(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"backend", "frontend", "lead", "operator"} {
		one, err := e.s.Pending(e.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if all[name] != one {
			t.Fatalf("PendingAll[%s] = %+v, Pending = %+v", name, all[name], one)
		}
	}
	if _, ok := all["lead"]; ok || len(all) != 3 {
		t.Fatalf("PendingAll = %+v, want backend, frontend and operator only", all)
	}
	if all["backend"] != (mailbox.Counts{Queued: 2, Urgent: 1, Waking: 1}) {
		t.Fatalf("PendingAll[backend] = %+v", all["backend"])
	}
}

func testPrune(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	old := e.post(message.Draft{From: "operator", To: "backend", Body: "old"})
	e.startSession("backend", 1)
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionCompleted}); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(40 * 24 * time.Hour)
	// A reply to the pruned message survives with reply_to cleared.
	reply := e.post(message.Draft{From: "backend", To: "operator", Body: "re", ReplyTo: old.ID})
	queued := e.post(message.Draft{From: "operator", To: "backend", Body: "still queued"})
	n, err := s.Prune(e.ctx, e.clk.Now().Add(-30*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	if _, err := s.Message(e.ctx, old.ID); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Fatalf("old message still there: %v", err)
	}
	r, err := s.Message(e.ctx, reply.ID)
	if err != nil || r.ReplyTo != nil {
		t.Fatalf("reply = %+v, %v", r, err)
	}
	if _, err := s.Message(e.ctx, queued.ID); err != nil {
		t.Fatal(err)
	}
	// Ids are never reused after pruning.
	m := e.post(message.Draft{From: "operator", To: "backend", Body: "new"})
	if m.ID <= queued.ID {
		t.Fatalf("id %d reused", m.ID)
	}
}

func testMessagesSince(e *env) {
	t := e.t
	if id, err := e.s.NewestMessageID(e.ctx); err != nil || id != 0 {
		t.Fatalf("NewestMessageID on an empty store = %d, %v", id, err)
	}
	a := e.post(message.Draft{From: "operator", To: "backend", Body: "a"})
	b := e.post(message.Draft{From: "operator", To: "lead", Body: "b"})
	c := e.post(message.Draft{From: "operator", To: "frontend", Body: "c"})
	got, err := e.s.MessagesSince(e.ctx, a.ID, 10)
	if err != nil || !slices.Equal(ids(got), []int64{b.ID, c.ID}) {
		t.Fatalf("MessagesSince = %v, %v", ids(got), err)
	}
	got, _ = e.s.MessagesSince(e.ctx, 0, 1)
	if !slices.Equal(ids(got), []int64{a.ID}) {
		t.Fatalf("MessagesSince limit 1 = %v", ids(got))
	}
	if id, _ := e.s.NewestMessageID(e.ctx); id != c.ID {
		t.Fatalf("NewestMessageID = %d, want %d", id, c.ID)
	}
}

func testTransitionCompareAndSet(e *env) {
	t, s := e.t, e.s
	if err := s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend", Mode: "code", Engine: "script", Branch: "swarm/backend"}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Agent(e.ctx, "backend")
	if err != nil || a.State != lifecycle.Stopped || a.SessionSeq != 0 {
		t.Fatalf("new agent = %+v, %v", a, err)
	}
	if _, err := s.Agent(e.ctx, "nobody"); !errors.Is(err, mailbox.ErrNoSuchAgent) {
		t.Fatalf("missing agent: %v", err)
	}
	ev, err := e.move("backend", lifecycle.Stopped, lifecycle.Initializing)
	if err != nil {
		t.Fatal(err)
	}
	if ev.From != nil || ev.To != "Initializing" || ev.SubjectKind != fsm.SubjectAgent || ev.Subject != "backend" || ev.AgentName() != "backend" {
		t.Fatalf("first event = %+v, want from null", ev)
	}
	ev, err = e.move("backend", lifecycle.Initializing, lifecycle.BuildingPrompt)
	if err != nil || ev.From == nil || *ev.From != "Initializing" {
		t.Fatalf("second event = %+v, %v", ev, err)
	}
	// A stale from state is rejected, and nothing is recorded.
	if _, err := e.move("backend", lifecycle.Initializing, lifecycle.Idle); !errors.Is(err, mailbox.ErrStateConflict) {
		t.Fatalf("stale CAS: %v", err)
	}
	// The schema rejects unknown states.
	if _, err := e.move("backend", lifecycle.BuildingPrompt, "Dancing"); err == nil {
		t.Fatal("state Dancing accepted")
	}
	evs, _ := s.Events(e.ctx, mailbox.EventFilter{Agent: "backend"})
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	if evs, _ := s.Events(e.ctx, mailbox.EventFilter{SinceID: evs[0].ID}); len(evs) != 1 {
		t.Fatalf("events since the first = %d, want 1", len(evs))
	}
	// Re-registering keeps state and counters.
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend", Mode: "review"})
	a, _ = s.Agent(e.ctx, "backend")
	if a.State != lifecycle.BuildingPrompt || a.Mode != "review" || a.StateSince == nil {
		t.Fatalf("after re-register: %+v", a)
	}
	// fsm.Apply refuses what the table does not allow, before the store.
	err = s.InTx(e.ctx, func(tx mailbox.Tx) error {
		_, err := fsm.Apply(tx, lifecycle.Table, fsm.SubjectAgent, "backend", lifecycle.BuildingPrompt, lifecycle.Wake, lifecycle.Running, "", 0)
		return err
	})
	var ite *fsm.IllegalTransitionError
	if !errors.As(err, &ite) {
		t.Fatalf("illegal transition: %v", err)
	}
}

func testEveryState(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	from := lifecycle.Stopped
	for _, st := range lifecycle.States[1:] {
		if _, err := e.move("backend", from, st); err != nil {
			t.Fatalf("store state %s: %v", st, err)
		}
		from = st
	}
	a, _ := s.Agent(e.ctx, "backend")
	if a.State != from {
		t.Fatalf("state = %s, want %s", a.State, from)
	}
}

func testSessionEndSettlesMail(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	e.post(message.Draft{From: "operator", To: "backend", Body: "one"})
	if ms := e.startSession("backend", 1); len(ms) != 1 {
		t.Fatalf("session 1 got %d messages", len(ms))
	}
	if err := s.AddSessionPgid(e.ctx, "backend", 1, 4242); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSessionPgid(e.ctx, "backend", 9, 1); !errors.Is(err, mailbox.ErrNoSuchSession) {
		t.Fatalf("pgid of a missing session: %v", err)
	}
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionFailed, TokensIn: 10, TokensOut: 5,
		CacheWrite: 7, CacheRead: 1000, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Agent(e.ctx, "backend")
	// Lifetime tokens are work tokens: input, output and cache writes.
	if a.ConsecutiveErrors != 1 || a.TotalErrors != 1 || a.Tokens != 22 {
		t.Fatalf("after failure: %+v", a)
	}
	ms := e.startSession("backend", 2)
	if len(ms) != 1 || ms[0].Shown != 1 {
		t.Fatalf("session 2 = %+v", ms)
	}
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 2, State: mailbox.SessionCompleted}); err != nil {
		t.Fatal(err)
	}
	a, _ = s.Agent(e.ctx, "backend")
	if a.ConsecutiveErrors != 0 || a.TotalErrors != 1 {
		t.Fatalf("after success: %+v", a)
	}
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.ResetErrors("backend") }); err != nil {
		t.Fatal(err)
	}
	if a, _ = s.Agent(e.ctx, "backend"); a.TotalErrors != 0 {
		t.Fatalf("after reset: %+v", a)
	}
	done, _ := s.Inbox(e.ctx, "backend", mailbox.Filter{State: message.Done})
	if len(done) != 1 || *done[0].SessionSeq != 2 {
		t.Fatalf("done = %+v", done)
	}
	sess, err := s.Session(e.ctx, "backend", 1)
	if err != nil || sess.State != mailbox.SessionFailed || !slices.Equal(sess.Pgids, []int{4242}) || sess.Prompt != "the prompt" ||
		!slices.Equal(sess.Tasks, []string{"bd-1"}) || sess.EndedAt == nil || sess.Error != "boom" || sess.TokensIn != 10 ||
		sess.TokensOut != 5 || sess.CacheWrite != 7 || sess.CacheRead != 1000 {
		t.Fatalf("session 1 = %+v, %v", sess, err)
	}
	last, err := s.LastSession(e.ctx, "backend", "")
	if err != nil || last.Seq != 2 {
		t.Fatalf("last session = %+v, %v", last, err)
	}
	if last, err := s.LastSession(e.ctx, "backend", mailbox.SessionFailed); err != nil || last.Seq != 1 {
		t.Fatalf("last failed session = %+v, %v", last, err)
	}
	if _, err := s.LastSession(e.ctx, "lead", ""); !errors.Is(err, mailbox.ErrNoSuchSession) {
		t.Fatalf("no sessions: %v", err)
	}
	if n, err := s.SessionCount(e.ctx); err != nil || n != 2 {
		t.Fatalf("SessionCount = %d, %v", n, err)
	}
	// A session can end only once.
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 2, State: mailbox.SessionFailed}); !errors.Is(err, mailbox.ErrNoSuchSession) {
		t.Fatalf("second end: %v", err)
	}
	// Session numbers are unique per agent.
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
		return tx.StartSession(mailbox.SessionStart{Agent: "backend", Seq: 2, Engine: "script"})
	}); err == nil {
		t.Fatal("duplicate session number accepted")
	}
}

func testRecoverAgent(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	m := e.post(message.Draft{From: "operator", To: "backend", Body: "in flight"})
	e.startSession("backend", 1)
	var r mailbox.Recovered
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
		var err error
		r, err = tx.RecoverAgent("backend")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(r.Sessions) != 1 || r.Sessions[0].Seq != 1 || r.Requeued != 1 {
		t.Fatalf("recovered = %+v", r)
	}
	sess, _ := s.Session(e.ctx, "backend", 1)
	if sess.State != mailbox.SessionCrashed || sess.EndedAt == nil {
		t.Fatalf("session = %+v", sess)
	}
	got, _ := s.Message(e.ctx, m.ID)
	if got.State != message.Queued || got.Shown != 1 {
		t.Fatalf("message = %+v", got)
	}
}

func testHeartbeat(e *env) {
	t, s := e.t, e.s
	for _, n := range Agents {
		s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: n})
	}
	e.move("backend", lifecycle.Stopped, lifecycle.Initializing)
	e.move("frontend", lifecycle.Stopped, lifecycle.Initializing)
	e.clk.Add(time.Minute)
	if err := s.Heartbeat(e.ctx, []string{"backend", "lead"}); err != nil {
		t.Fatal(err)
	}
	be, _ := s.Agent(e.ctx, "backend")
	fe, _ := s.Agent(e.ctx, "frontend")
	ld, _ := s.Agent(e.ctx, "lead")
	if be.HeartbeatAt == nil || !be.HeartbeatAt.Equal(e.clk.Now()) {
		t.Errorf("backend heartbeat = %v, want now", be.HeartbeatAt)
	}
	if fe.HeartbeatAt != nil && fe.HeartbeatAt.Equal(e.clk.Now()) {
		t.Error("frontend, not run by this supervisor, was stamped")
	}
	if ld.HeartbeatAt != nil {
		t.Error("a Stopped agent was stamped")
	}
	all, err := s.Agents(e.ctx)
	if err != nil || len(all) != 3 || all[0].Name != "backend" {
		t.Fatalf("Agents = %+v, %v", all, err)
	}
}

func testActivityAndNudges(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	if err := s.SetActivity(e.ctx, "backend", "bash: go test"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNudges(e.ctx, "backend", 2); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Agent(e.ctx, "backend")
	if a.Activity != "bash: go test" || a.Nudges != 2 {
		t.Fatalf("agent = %+v", a)
	}
}

func testMeta(e *env) {
	t, s := e.t, e.s
	if _, ok, err := s.Meta(e.ctx, "base_branch"); ok || err != nil {
		t.Fatalf("unset meta: ok=%v err=%v", ok, err)
	}
	for _, v := range []string{"main", "trunk"} {
		if err := s.SetMeta(e.ctx, "base_branch", v); err != nil {
			t.Fatal(err)
		}
		if got, ok, _ := s.Meta(e.ctx, "base_branch"); !ok || got != v {
			t.Fatalf("meta = %q, %v; want %q", got, ok, v)
		}
	}
}

func testRollback(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	m := e.post(message.Draft{From: "operator", To: "backend", Body: "x"})
	boom := errors.New("boom")
	err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
		if _, err := tx.Deliver("backend", 1, nil); err != nil {
			return err
		}
		if err := tx.StartSession(mailbox.SessionStart{Agent: "backend", Seq: 1}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v", err)
	}
	got, _ := s.Message(e.ctx, m.ID)
	if got.State != message.Queued {
		t.Fatalf("rolled-back delivery left %s", got.State)
	}
	if _, err := s.Session(e.ctx, "backend", 1); !errors.Is(err, mailbox.ErrNoSuchSession) {
		t.Fatalf("rolled-back session exists: %v", err)
	}
}

func testFeed(e *env) {
	t := e.t
	if e.other == nil {
		t.Skip("this backend has no second connection to test the feed with")
	}
	f, err := e.s.Feed(e.ctx, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other := e.other()
	defer other.Close()
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	go func() { done <- f.Wait(ctx) }()
	p := mailbox.NewPoster(other, Agents, nil)
	if _, err := p.Post(e.ctx, message.Draft{From: "operator", To: "backend", Body: "poke"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the feed missed another connection's write: %v", err)
	}
	// A cancelled wait returns its cause.
	cctx, ccancel := context.WithCancelCause(e.ctx)
	ccancel(errors.New("stop"))
	if err := f.Wait(cctx); err == nil || err.Error() != "stop" {
		t.Fatalf("cancelled Wait = %v", err)
	}
}

func testCheck(e *env) {
	if v, err := e.s.Check(e.ctx); err != nil || v != "ok" {
		e.t.Fatalf("Check = %q, %v", v, err)
	}
	if e.s.Location() == "" {
		e.t.Fatal("Location is empty")
	}
}

// testLeases: a claim is all or none, a live holder's agents are refused
// with its name, renewals move the heartbeat, a release frees them, and a
// holder that is gone (its store closed without releasing, as a kill -9
// leaves it) is taken over.
func testLeases(e *env) {
	t := e.t
	a := mailbox.Holder{Host: "host-a", PID: 101}
	b := mailbox.Holder{Host: "host-b", PID: 202}
	la, err := e.s.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: a, Agents: []string{"frontend", "backend"}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	leases := func() map[string]mailbox.Lease {
		t.Helper()
		ls, err := e.s.AgentLeases(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]mailbox.Lease{}
		for _, l := range ls {
			out[l.Agent] = l
		}
		return out
	}
	ls := leases()
	if len(ls) != 2 || ls["backend"].Holder != a || ls["frontend"].Holder != a || !ls["backend"].HeartbeatAt.Equal(e.clk.Now()) {
		t.Fatalf("leases after a's claim: %+v", ls)
	}
	// b asks for one of a's agents and a free one: refused, nothing taken.
	_, err = e.s.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"lead", "frontend"}, TTL: time.Minute})
	var he *mailbox.HeldError
	if !errors.As(err, &he) || len(he.Held) != 1 || he.Held[0].Agent != "frontend" || he.Held[0].Holder != a {
		t.Fatalf("b's claim of a held agent = %v, want a HeldError naming frontend and %s", err, a)
	}
	if _, ok := leases()["lead"]; ok {
		t.Fatal("a refused claim took the free agent anyway")
	}
	// Renewals move the heartbeat, not the start.
	started := e.clk.Now()
	e.clk.Add(10 * time.Second)
	if err := la.Renew(e.ctx); err != nil {
		t.Fatal(err)
	}
	if l := leases()["frontend"]; !l.HeartbeatAt.Equal(e.clk.Now()) || !l.AcquiredAt.Equal(started) {
		t.Fatalf("after a renewal: %+v", l)
	}
	// Released: b gets them.
	if err := la.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(e.ctx); err != nil {
		t.Fatalf("a second Release = %v", err)
	}
	lb, err := e.s.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"lead", "frontend"}, TTL: time.Minute})
	if err != nil {
		t.Fatalf("claim after the release: %v", err)
	}
	if ls := leases(); len(ls) != 2 || ls["lead"].Holder != b {
		t.Fatalf("leases after b's claim: %+v", ls)
	}
	if err := lb.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if e.other == nil {
		return
	}
	// A holder that vanished without releasing: another process's store
	// claims and is closed (on PostgreSQL its lock connection ends; its row
	// stays). The next claim takes the agent over when the caller knows
	// the holder is gone (SQLite) or its lock is free (PostgreSQL).
	dead := mailbox.Holder{Host: "host-c", PID: 303}
	o := e.other()
	if _, err := o.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: dead, Agents: []string{"backend"}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if l := leases()["backend"]; l.Holder != dead {
		t.Fatalf("the vanished holder's row: %+v", l)
	}
	lb, err = e.s.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"backend"}, TTL: time.Hour,
		Gone: func(h mailbox.Holder) bool { return h == dead }})
	if err != nil {
		t.Fatalf("taking over from a holder that is gone: %v", err)
	}
	if l := leases()["backend"]; l.Holder != b || !l.AcquiredAt.Equal(e.clk.Now()) {
		t.Fatalf("after the takeover: %+v", l)
	}
	if err := lb.Renew(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := lb.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// testLeaseFence: a supervisor that lost an agent's lease cannot write
// about that agent any more (DESIGN §12). Store o claims backend for
// holder a and runs a session; the lease is taken over by holder b
// through the suite's store (a is frozen: its lock cut, its heartbeat
// stale); then every write o makes about backend fails with ErrLeaseLost
// and changes nothing, while b moves the agent on and o may still write
// about agents it never claimed.
func testLeaseFence(e *env) {
	t := e.t
	if e.other == nil {
		t.Skip("the backend gives no second store")
	}
	a := mailbox.Holder{Host: "host-a", PID: 101}
	b := mailbox.Holder{Host: "host-b", PID: 202}
	o := e.other()
	defer o.Close()
	for _, name := range []string{"backend", "lead"} {
		if err := o.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: name, Mode: "code", Engine: "script"}); err != nil {
			t.Fatal(err)
		}
	}
	la, err := o.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: a, Agents: []string{"backend"}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(e.ctx)
	move := func(s mailbox.Store, from, to lifecycle.State, seq int64) error {
		return s.InTx(e.ctx, func(tx mailbox.Tx) error {
			_, err := tx.Transition(fsm.Change{Kind: fsm.SubjectAgent, Subject: "backend", From: string(from), To: string(to), Cause: "test", Seq: seq})
			return err
		})
	}
	if err := move(o, lifecycle.Stopped, lifecycle.Running, 1); err != nil {
		t.Fatalf("the holder's own write: %v", err)
	}
	if err := o.InTx(e.ctx, func(tx mailbox.Tx) error {
		return tx.StartSession(mailbox.SessionStart{Agent: "backend", Seq: 1, Engine: "script"})
	}); err != nil {
		t.Fatal(err)
	}
	if e.hooks.CutLeaseLocks != nil {
		e.hooks.CutLeaseLocks(t, o)
	}
	lb, err := e.s.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"backend"}, TTL: time.Minute,
		Gone: func(h mailbox.Holder) bool { return h == a }})
	if err != nil {
		t.Fatalf("taking the lease over from a frozen holder: %v", err)
	}
	defer lb.Release(e.ctx)
	ls, err := e.s.AgentLeases(e.ctx)
	if err != nil || len(ls) != 1 || ls[0].Holder != b || ls[0].Epoch != 2 {
		t.Fatalf("the lease after the takeover: %+v, %v; want b's at epoch 2", ls, err)
	}
	// b's runner recovers the agent and starts session 2.
	if err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		if _, err := tx.RecoverAgent("backend"); err != nil {
			return err
		}
		_, err := tx.Transition(fsm.Change{Kind: fsm.SubjectAgent, Subject: "backend", From: string(lifecycle.Running), To: string(lifecycle.Running), Cause: "test", Seq: 2})
		if err != nil {
			return err
		}
		return tx.StartSession(mailbox.SessionStart{Agent: "backend", Seq: 2, Engine: "script"})
	}); err != nil {
		t.Fatalf("the new holder's writes: %v", err)
	}
	// a resumes: every write about backend is refused.
	late := map[string]error{
		"transition": move(o, lifecycle.Running, lifecycle.Stopped, 2),
		"end session": o.InTx(e.ctx, func(tx mailbox.Tx) error {
			return tx.EndSession(mailbox.SessionEnd{Agent: "backend", Seq: 2, State: mailbox.SessionCrashed})
		}),
		"deliver":      o.InTx(e.ctx, func(tx mailbox.Tx) error { _, err := tx.Deliver("backend", 2, nil); return err }),
		"reset errors": o.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.ResetErrors("backend") }),
		"recover":      o.InTx(e.ctx, func(tx mailbox.Tx) error { _, err := tx.RecoverAgent("backend"); return err }),
		"heartbeat":    o.Heartbeat(e.ctx, []string{"backend"}),
		"activity":     o.SetActivity(e.ctx, "backend", "stale"),
		"nudges":       o.SetNudges(e.ctx, "backend", 3),
		"pgid":         o.AddSessionPgid(e.ctx, "backend", 2, 4242),
		"register":     o.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend", Mode: "review", Engine: "script"}),
	}
	for what, err := range late {
		if !errors.Is(err, mailbox.ErrLeaseLost) {
			t.Errorf("the old holder's %s = %v, want ErrLeaseLost", what, err)
		}
	}
	ag, err := e.s.Agent(e.ctx, "backend")
	if err != nil {
		t.Fatal(err)
	}
	if ag.State != lifecycle.Running || ag.SessionSeq != 2 || ag.Mode != "code" || ag.Activity != "" || ag.Nudges != 0 {
		t.Fatalf("backend after the old holder's late writes: %+v", ag)
	}
	if sess, err := e.s.Session(e.ctx, "backend", 2); err != nil || sess.State != mailbox.SessionRunning || len(sess.Pgids) != 0 {
		t.Fatalf("session 2 after the old holder's late writes: %+v, %v", sess, err)
	}
	// Agents a never claimed are not fenced.
	if err := o.SetActivity(e.ctx, "lead", "reading"); err != nil {
		t.Fatalf("a write about an agent the old holder never claimed: %v", err)
	}
	// The holder's own claim again, where the backend grants it (SQLite;
	// PostgreSQL's lock connection refuses a second claim), keeps the
	// epoch: its earlier claim and its writes stay valid.
	var he *mailbox.HeldError
	switch lb2, err := e.s.ClaimLeases(e.ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"backend"}, TTL: time.Minute}); {
	case errors.As(err, &he):
	case err != nil:
		t.Fatalf("the holder claiming its own lease again: %v", err)
	default:
		defer lb2.Release(e.ctx)
		if ls, err := e.s.AgentLeases(e.ctx); err != nil || len(ls) != 1 || ls[0].Epoch != 2 {
			t.Fatalf("the lease after its holder claimed it again: %+v, %v; want epoch 2 still", ls, err)
		}
	}
	// The new holder's own writes go on.
	if err := e.s.InTx(e.ctx, func(tx mailbox.Tx) error {
		return tx.EndSession(mailbox.SessionEnd{Agent: "backend", Seq: 2, State: mailbox.SessionCompleted})
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Heartbeat(e.ctx, []string{"backend"}); err != nil {
		t.Fatal(err)
	}
}

func testSessionCapabilities(e *env) {
	t, s := e.t, e.s
	v := mode.Spec{Mode: mode.Review, Overrides: map[mode.Capability]bool{mode.CanSpawnSessions: true}}.Vector()
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
		if err := tx.StartSession(mailbox.SessionStart{Agent: "backend", Seq: 1, Engine: "script", Capabilities: v}); err != nil {
			return err
		}
		return tx.StartSession(mailbox.SessionStart{Agent: "frontend", Seq: 1, Engine: "script"})
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(e.ctx, "backend", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Capabilities) != len(mode.Capabilities) {
		t.Fatalf("stored vector %v, want every capability", got.Capabilities)
	}
	for _, c := range mode.Capabilities {
		if got.Capabilities[c] != v[c] {
			t.Errorf("%s = %v, want %v", c, got.Capabilities[c], v[c])
		}
	}
	if last, err := s.LastSession(e.ctx, "backend", ""); err != nil || !last.Capabilities.Has(mode.CanSpawnSessions) || last.Capabilities.Has(mode.CanEditFiles) {
		t.Errorf("LastSession capabilities = %v, %v", last.Capabilities, err)
	}
	// A session started without a vector reads as nil, not all-off.
	if other, err := s.Session(e.ctx, "frontend", 1); err != nil || other.Capabilities != nil {
		t.Errorf("no vector: %v, %v", other.Capabilities, err)
	}
	// Every agent's newest session in one read: frontend's stored none.
	all, err := s.LastCapabilities(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || !all["backend"].Has(mode.CanSpawnSessions) || all["backend"].Has(mode.CanEditFiles) {
		t.Errorf("LastCapabilities = %v, want backend's vector only", all)
	}
	// A newer session's vector wins.
	coord := mode.Spec{Mode: mode.CoordinateMode}.Vector()
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
		return tx.StartSession(mailbox.SessionStart{Agent: "backend", Seq: 2, Engine: "script", Capabilities: coord})
	}); err != nil {
		t.Fatal(err)
	}
	if all, err := s.LastCapabilities(e.ctx); err != nil || !all["backend"].Has(mode.CanDispatch) {
		t.Errorf("LastCapabilities after session 2 = %v, %v", all, err)
	}
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
