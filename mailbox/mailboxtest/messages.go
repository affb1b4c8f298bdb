package mailboxtest

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

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
