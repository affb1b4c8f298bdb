package mailboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// Protocol mail (DESIGN §9.2): msg_id lookups and uniqueness, the ACK
// clock that starts at delivery, the deadline sweep's queries, ACKs stored
// with the message they acknowledge, and the operator's resume and abort.

// protocolDraft is a protocol message as Poster.PostProtocol would store
// it; ack 0 asks for no ACK.
func protocolDraft(from, to, typ, task string, ms int64, ack time.Duration) message.Draft {
	id := fmt.Sprintf("%s-%s-%d", typ, task, ms)
	return message.Draft{From: from, To: to, Kind: message.KindProtocol, Body: typ + " " + task,
		Payload: []byte(fmt.Sprintf(`{"msg_id":%q,"type":%q,"task_id":%q}`, id, typ, task)),
		MsgID:   id, TaskID: task, ProtocolType: typ, AckTimeout: ack}
}

func (e *env) ackOf(m message.Message) message.Ack {
	e.t.Helper()
	got, err := e.s.ProtocolMessage(e.ctx, m.MsgID)
	if err != nil {
		e.t.Fatal(err)
	}
	if got.Ack == nil {
		e.t.Fatalf("%s has no ACK record", m.MsgID)
	}
	return *got.Ack
}

func testProtocolLookups(e *env) {
	t, s := e.t, e.s
	plain := e.post(message.Draft{From: "operator", To: "backend", Body: "hi"})
	if plain.MsgID != "" || plain.TaskID != "" || plain.Ack != nil {
		t.Fatalf("plain mail has protocol fields: %+v", plain)
	}
	d := e.post(protocolDraft("lead", "backend", "task_dispatch", "T-1", 1, 5*time.Minute))
	if d.MsgID != "task_dispatch-T-1-1" || d.TaskID != "T-1" || d.Kind != message.KindProtocol {
		t.Fatalf("stored dispatch = %+v", d)
	}
	if a := d.Ack; a == nil || !a.Required || a.State != message.AckPending || a.Timeout != 300 || a.DueAt != nil || a.AckedAt != nil {
		t.Fatalf("a fresh dispatch's ACK = %+v; want pending with no deadline before delivery", a)
	}
	r := e.post(protocolDraft("backend", "lead", "task_result", "T-1", 2, 0))
	if a := r.Ack; a == nil || a.Required || a.State != message.AckNone {
		t.Fatalf("a result's ACK = %+v; want none", a)
	}
	e.post(protocolDraft("lead", "frontend", "task_dispatch", "T-2", 3, time.Minute))

	got, err := s.ProtocolMessage(e.ctx, d.MsgID)
	if err != nil || got.ID != d.ID || string(got.Payload) != string(d.Payload) {
		t.Fatalf("ProtocolMessage = %+v, %v", got, err)
	}
	if _, err := s.ProtocolMessage(e.ctx, "task_dispatch-T-9-1"); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Fatalf("a missing msg_id: %v", err)
	}
	chain, err := s.TaskMessages(e.ctx, "T-1")
	if err != nil || len(chain) != 2 || chain[0].ID != d.ID || chain[1].ID != r.ID {
		t.Fatalf("TaskMessages(T-1) = %v, %v", ids(chain), err)
	}
	if all, err := s.ProtocolMessages(e.ctx, 0); err != nil || len(all) != 3 || all[0].ID != d.ID {
		t.Fatalf("ProtocolMessages = %v, %v", ids(all), err)
	}
	if last, err := s.ProtocolMessages(e.ctx, 1); err != nil || len(last) != 1 || last[0].TaskID != "T-2" {
		t.Fatalf("ProtocolMessages(1) = %v, %v", ids(last), err)
	}

	// The same msg_id twice is refused by the store, and nothing is stored.
	before, _ := s.NewestMessageID(e.ctx)
	if _, err := s.InsertMessages(e.ctx, []message.Draft{protocolDraft("lead", "backend", "task_dispatch", "T-1", 1, time.Minute)}); !errors.Is(err, mailbox.ErrDuplicateMsgID) {
		t.Fatalf("a duplicate msg_id: %v, want ErrDuplicateMsgID", err)
	}
	if after, _ := s.NewestMessageID(e.ctx); after != before {
		t.Fatalf("a refused duplicate was stored: newest id %d → %d", before, after)
	}
}

func testAckClock(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	d := e.post(protocolDraft("lead", "backend", "task_dispatch", "T-1", 1, 2*time.Minute))
	late := e.post(protocolDraft("lead", "backend", "review_request", "T-1", 2, 10*time.Minute))
	if _, ok, err := s.NextAckDeadline(e.ctx); ok || err != nil {
		t.Fatalf("a deadline before any delivery: %v, %v", ok, err)
	}
	if acks, _ := s.PendingAcks(e.ctx, "backend"); len(acks) != 0 {
		t.Fatalf("PendingAcks before delivery = %v; the clock has not started", ids(acks))
	}

	// The clock starts at delivery: deadline = delivered_at + timeout.
	e.clk.Add(time.Minute)
	delivered := e.clk.Now()
	e.startSession("backend", 1)
	wantDue := delivered.Add(2 * time.Minute)
	if a := e.ackOf(d); a.DueAt == nil || !a.DueAt.Equal(wantDue) || a.State != message.AckPending {
		t.Fatalf("after delivery: %+v, want due %s", a, wantDue)
	}
	if due, ok, err := s.NextAckDeadline(e.ctx); !ok || err != nil || !due.Equal(wantDue) {
		t.Fatalf("NextAckDeadline = %s, %v, %v; want %s", due, ok, err, wantDue)
	}
	if acks, _ := s.PendingAcks(e.ctx, "backend"); len(acks) != 2 || acks[0].ID != d.ID {
		t.Fatalf("PendingAcks = %v", ids(acks))
	}

	// An interrupted session does not buy time: the redelivery keeps it.
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionInterrupted}); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(30 * time.Second)
	e.startSession("backend", 2)
	if a := e.ackOf(d); a.DueAt == nil || !a.DueAt.Equal(wantDue) {
		t.Fatalf("after redelivery: due %v, want %s kept", a.DueAt, wantDue)
	}

	// The sweep sees only pending ACKs whose deadline passed.
	if due, _ := s.DueAcks(e.ctx, wantDue.Add(-time.Millisecond), 0); len(due) != 0 {
		t.Fatalf("DueAcks before the deadline = %v", ids(due))
	}
	due, err := s.DueAcks(e.ctx, wantDue, 0)
	if err != nil || len(due) != 1 || due[0].ID != d.ID {
		t.Fatalf("DueAcks at the deadline = %v, %v", ids(due), err)
	}
	if ok, err := s.MarkAckOverdue(e.ctx, late.MsgID, wantDue); ok || err != nil {
		t.Fatalf("marked a message overdue before its deadline: %v, %v", ok, err)
	}
	if ok, err := s.MarkAckOverdue(e.ctx, d.MsgID, wantDue); !ok || err != nil {
		t.Fatalf("MarkAckOverdue = %v, %v", ok, err)
	}
	if ok, _ := s.MarkAckOverdue(e.ctx, d.MsgID, wantDue); ok {
		t.Fatal("marked overdue twice")
	}
	if a := e.ackOf(d); a.State != message.AckOverdue {
		t.Fatalf("after the sweep: %+v", a)
	}
	if due, _ := s.DueAcks(e.ctx, wantDue.Add(time.Hour), 0); len(due) != 1 || due[0].ID != late.ID {
		t.Fatalf("DueAcks after marking = %v; overdue ACKs are not swept again", ids(due))
	}
	if next, ok, _ := s.NextAckDeadline(e.ctx); !ok || !next.Equal(delivered.Add(10*time.Minute)) {
		t.Fatalf("NextAckDeadline after marking = %s, %v", next, ok)
	}
	// A late ACK is still owed, and still taken.
	if acks, _ := s.PendingAcks(e.ctx, "backend"); len(acks) != 2 {
		t.Fatalf("PendingAcks with one overdue = %v", ids(acks))
	}
}

func testAckStoredWithItsMessage(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	d := e.post(protocolDraft("lead", "backend", "task_dispatch", "T-1", 1, time.Minute))
	e.startSession("backend", 1)
	ack := func(from, of string, ms int64) (message.Message, error) {
		dr := protocolDraft(from, "lead", "ack", "T-1", ms, 0)
		dr.AckOf = of
		out, err := s.InsertMessages(e.ctx, []message.Draft{dr})
		if err != nil {
			return message.Message{}, err
		}
		return out[0], nil
	}
	count := func() int64 { n, _ := s.NewestMessageID(e.ctx); return n }

	before := count()
	if _, err := ack("frontend", d.MsgID, 10); !errors.Is(err, mailbox.ErrAckClosed) {
		t.Fatalf("an ACK by someone else: %v, want ErrAckClosed", err)
	}
	if _, err := ack("backend", "task_dispatch-T-9-1", 11); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Fatalf("an ACK of nothing: %v, want ErrNoSuchMessage", err)
	}
	if count() != before {
		t.Fatal("a refused ACK was stored")
	}
	e.clk.Add(10 * time.Second)
	a, err := ack("backend", d.MsgID, 12)
	if err != nil || a.Kind != message.KindProtocol {
		t.Fatalf("ACK = %+v, %v", a, err)
	}
	got := e.ackOf(d)
	if got.State != message.AckAcked || got.AckedAt == nil || !got.AckedAt.Equal(e.clk.Now()) {
		t.Fatalf("after the ACK: %+v", got)
	}
	// An ACK is read in the recipient's next session but never starts one.
	if c, err := s.Pending(e.ctx, "lead"); err != nil || c.Queued != 1 || c.Waking != 0 {
		t.Fatalf("lead's mail after an ACK = %+v, %v; want 1 queued, none waking", c, err)
	}
	if a.ProtocolType != "ack" || mailbox.StoredOf(a).Type != "ack" {
		t.Fatalf("the ACK's type = %q", a.ProtocolType)
	}
	if _, err := ack("backend", d.MsgID, 13); !errors.Is(err, mailbox.ErrAckClosed) {
		t.Fatalf("a second ACK: %v, want ErrAckClosed", err)
	}
	if acks, _ := s.PendingAcks(e.ctx, "backend"); len(acks) != 0 {
		t.Fatalf("PendingAcks after the ACK = %v", ids(acks))
	}
	if _, ok, _ := s.NextAckDeadline(e.ctx); ok {
		t.Fatal("an acknowledged message still has a running clock")
	}
	// An overdue message still takes its (late) ACK.
	o := e.post(protocolDraft("lead", "backend", "task_dispatch", "T-1", 20, time.Second))
	e.startSession("backend", 2)
	e.clk.Add(time.Minute)
	if ok, _ := s.MarkAckOverdue(e.ctx, o.MsgID, e.clk.Now()); !ok {
		t.Fatal("not overdue")
	}
	if _, err := ack("backend", o.MsgID, 21); err != nil {
		t.Fatalf("a late ACK: %v", err)
	}
	if got := e.ackOf(o); got.State != message.AckAcked {
		t.Fatalf("after a late ACK: %+v", got)
	}
}

func testAckResumeAndAbort(e *env) {
	t, s := e.t, e.s
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	d := e.post(protocolDraft("lead", "backend", "task_dispatch", "T-1", 1, time.Minute))
	x := e.post(protocolDraft("lead", "backend", "task_dispatch", "T-2", 2, time.Minute))
	e.startSession("backend", 1)
	if err := e.endSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionCompleted}); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(2 * time.Minute)
	for _, m := range []message.Message{d, x} {
		if ok, _ := s.MarkAckOverdue(e.ctx, m.MsgID, e.clk.Now()); !ok {
			t.Fatalf("%s not overdue", m.MsgID)
		}
	}
	tx := func(fn func(tx mailbox.Tx) error) error { return s.InTx(e.ctx, fn) }

	// Resume: the same message, queued again, its clock reset.
	var back message.Message
	if err := tx(func(tx mailbox.Tx) (err error) { back, err = tx.RequeueAck(d.MsgID); return err }); err != nil {
		t.Fatal(err)
	}
	if back.ID != d.ID || back.MsgID != d.MsgID || back.State != message.Queued || back.SessionSeq != nil || back.Shown != 1 {
		t.Fatalf("requeued = %+v", back)
	}
	if a := back.Ack; a.State != message.AckPending || a.DueAt != nil {
		t.Fatalf("requeued ACK = %+v, want pending with no deadline", a)
	}
	e.clk.Add(time.Second)
	e.startSession("backend", 2)
	if a := e.ackOf(d); a.DueAt == nil || !a.DueAt.Equal(e.clk.Now().Add(time.Minute)) {
		t.Fatalf("the redelivery's deadline = %v, want a fresh one", a.DueAt)
	}

	// Abort: done without a session, cancelled; the queue no longer has it.
	if err := tx(func(tx mailbox.Tx) error {
		_, err := tx.RequeueAck(x.MsgID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var gone message.Message
	if err := tx(func(tx mailbox.Tx) (err error) { gone, err = tx.CancelAck(x.MsgID); return err }); err != nil {
		t.Fatal(err)
	}
	if gone.State != message.Done || gone.SessionSeq != nil || gone.Ack.State != message.AckCancelled {
		t.Fatalf("cancelled = %+v, ack %+v", gone, gone.Ack)
	}
	if q, _ := s.Queued(e.ctx, "backend"); len(q) != 0 {
		t.Fatalf("queued after the abort = %v", ids(q))
	}
	// A delivered message keeps the session it was shown in.
	var shown message.Message
	if err := tx(func(tx mailbox.Tx) (err error) { shown, err = tx.CancelAck(d.MsgID); return err }); err != nil {
		t.Fatal(err)
	}
	if shown.State != message.Done || shown.SessionSeq == nil || *shown.SessionSeq != 2 {
		t.Fatalf("cancelled while delivered = %+v", shown)
	}
	// Nothing to move twice.
	for _, fn := range []func(tx mailbox.Tx) error{
		func(tx mailbox.Tx) error { _, err := tx.CancelAck(d.MsgID); return err },
		func(tx mailbox.Tx) error { _, err := tx.RequeueAck(x.MsgID); return err },
	} {
		if err := tx(fn); !errors.Is(err, mailbox.ErrAckClosed) {
			t.Fatalf("moving a closed ACK: %v, want ErrAckClosed", err)
		}
	}
	if err := tx(func(tx mailbox.Tx) error { _, err := tx.RequeueAck("nope-1"); return err }); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Fatalf("requeueing nothing: %v", err)
	}
}

// builder builds protocol messages against the store, at the suite's
// clock; commits are the hashes the repository has.
func (e *env) builder(commits ...string) *protocol.Builder {
	return &protocol.Builder{Now: e.clk.Now, BaseBranch: "main", Resolver: mailbox.Resolver{Store: e.s,
		Commits: func(_ context.Context, hash string) (bool, error) { return slices.Contains(commits, hash), nil }}}
}

const dispatchPayload = `{"description": "Add pagination", "branch": "swarm/backend",
	"acceptance_criteria": ["GET /users?page=2 works"], "risk_level": "low"}`

func testPostProtocol(e *env) {
	t, s, b := e.t, e.s, e.builder("abc1234")
	newest := func() int64 { n, _ := s.NewestMessageID(e.ctx); return n }

	// Refused drafts name their fields, and nothing is stored.
	for name, d := range map[string]protocol.Draft{
		"empty criteria": {Type: protocol.TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-1",
			Payload: []byte(`{"description":"x","branch":"swarm/backend","acceptance_criteria":[],"risk_level":"low"}`)},
		"made-up ref": {Type: protocol.TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-1",
			Payload: []byte(dispatchPayload), ContextRef: []string{"task_result-T-1-1763900000000"}},
	} {
		before := newest()
		_, _, err := e.p.PostProtocol(e.ctx, b, d)
		var ve *protocol.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: %v, want a ValidationError", name, err)
		}
		if newest() != before {
			t.Fatalf("%s: a refused message was stored", name)
		}
	}
	// An unknown recipient is the mail service's refusal.
	if _, _, err := e.p.PostProtocol(e.ctx, b, protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "db",
		TaskID: "T-1", Payload: []byte(dispatchPayload)}); !errors.Is(err, message.ErrUnknownRecipient) {
		t.Fatalf("to an unknown agent: %v", err)
	}

	d, env, err := e.p.PostProtocol(e.ctx, b, protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "backend",
		TaskID: "T-1", Payload: []byte(dispatchPayload), AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d.MsgID != env.MsgID || d.TaskID != "T-1" || d.Kind != message.KindProtocol || d.Body != protocol.Body(env) {
		t.Fatalf("stored %+v for %+v", d, env)
	}
	if d.Ack == nil || d.Ack.Timeout != 2 || d.Ack.State != message.AckPending {
		t.Fatalf("ACK record = %+v", d.Ack)
	}
	stored, err := mailbox.Envelope(d)
	if err != nil || stored.MsgID != env.MsgID || string(stored.Payload) != string(env.Payload) {
		t.Fatalf("stored envelope = %+v, %v", stored, err)
	}
	if st := mailbox.StoredOf(d); st.Type != protocol.TypeTaskDispatch || !st.RequiresAck || st.To != "backend" {
		t.Fatalf("StoredOf = %+v", st)
	}

	// The same millisecond again: the id is bumped, never reused.
	d2, _, err := e.p.PostProtocol(e.ctx, b, protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "frontend",
		TaskID: "T-1", Payload: []byte(dispatchPayload)})
	if err != nil || d2.MsgID == d.MsgID {
		t.Fatalf("second dispatch = %q, %v", d2.MsgID, err)
	}

	// An ACK is built against what is stored and marks it; a reply joins
	// the thread of what it answers.
	s.RegisterAgent(e.ctx, mailbox.AgentInfo{Name: "backend"})
	e.startSession("backend", 1)
	a, _, err := e.p.PostProtocol(e.ctx, b, protocol.AckDraft(env, "backend"))
	if err != nil {
		t.Fatal(err)
	}
	if a.ThreadID != d.ID || e.ackOf(d).State != message.AckAcked {
		t.Fatalf("ack thread %d, dispatch ACK %+v", a.ThreadID, e.ackOf(d))
	}
	if _, _, err := e.p.PostProtocol(e.ctx, b, protocol.AckDraft(env, "frontend")); err == nil {
		t.Fatal("an ACK by someone the message was not sent to was stored")
	}
	res := protocol.Draft{Type: protocol.TypeTaskResult, From: "backend", Payload: []byte(`{"status":"completed","summary":"done","commit_hash":"abc1234"}`)}
	if err := res.ReplyTo(env); err != nil {
		t.Fatal(err)
	}
	r, renv, err := e.p.PostProtocol(e.ctx, b, res)
	if err != nil {
		t.Fatal(err)
	}
	if r.To != "lead" || r.TaskID != "T-1" || renv.ContextRef[0] != env.MsgID || r.ReplyTo == nil || *r.ReplyTo != d.ID {
		t.Fatalf("result = %+v, envelope %+v", r, renv)
	}
	chain, _ := s.TaskMessages(e.ctx, "T-1")
	if len(chain) != 4 {
		t.Fatalf("chain of T-1 = %v", ids(chain))
	}
}

// testOneAnswerPerRequest: a sender answers a request once (package
// protocol: "One answer per request"). A second answer is refused with the
// answer that stands, also when two connections race; a new round, a
// subtask, another sender and a reply without --reply-to are told apart.
func testOneAnswerPerRequest(e *env) {
	t, s, b := e.t, e.s, e.builder()
	newest := func() int64 { n, _ := s.NewestMessageID(e.ctx); return n }
	send := func(d protocol.Draft) (message.Message, protocol.Envelope, error) {
		e.t.Helper()
		return e.p.PostProtocol(e.ctx, b, d)
	}
	must := func(m message.Message, env protocol.Envelope, err error) (message.Message, protocol.Envelope) {
		e.t.Helper()
		if err != nil {
			e.t.Fatal(err)
		}
		return m, env
	}
	refused := func(name string, first message.Message, d protocol.Draft) {
		e.t.Helper()
		before := newest()
		_, _, err := send(d)
		var ae *mailbox.AnsweredError
		if !errors.As(err, &ae) || !errors.Is(err, mailbox.ErrAlreadyAnswered) {
			t.Fatalf("%s: %v, want an AnsweredError", name, err)
		}
		if ae.Answer.ID != first.ID || ae.Answer.MsgID != first.MsgID {
			t.Fatalf("%s: the answer that stands is #%d %s, want #%d %s", name, ae.Answer.ID, ae.Answer.MsgID, first.ID, first.MsgID)
		}
		if want := fmt.Sprintf("as #%d", first.ID); !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %q does not say %q", name, err, want)
		}
		if newest() != before {
			t.Fatalf("%s: the second answer was stored", name)
		}
	}
	result := func(from string, to protocol.Envelope, payload string) protocol.Draft {
		d := protocol.Draft{Type: protocol.TypeTaskResult, From: from, Payload: []byte(payload)}
		if err := d.ReplyTo(to); err != nil {
			e.t.Fatal(err)
		}
		return d
	}
	const done = `{"status":"completed","summary":"done"}`

	_, disp := must(send(protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-7", Payload: []byte(dispatchPayload)}))
	first, renv := must(send(result("backend", disp, done)))
	refused("the same result again", first, result("backend", disp, done))
	refused("another status", first, result("backend", disp, `{"status":"failed","summary":"it broke after all"}`))
	// Without --reply-to it answers the newest dispatch of its task to it.
	refused("no reply-to", first, protocol.Draft{Type: protocol.TypeTaskResult, From: "backend", To: "lead", TaskID: "T-7", Payload: []byte(done)})
	// A subtask is answered once, apart from the whole task.
	sub, _ := must(send(result("backend", disp, `{"status":"completed","summary":"part","subtask_id":"s1"}`)))
	refused("the subtask again", sub, result("backend", disp, `{"status":"completed","summary":"part","subtask_id":"s1"}`))
	must(send(result("backend", disp, `{"status":"completed","summary":"part","subtask_id":"s2"}`)))
	// A new round is a new request.
	_, disp2 := must(send(protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-7", Payload: []byte(dispatchPayload)}))
	must(send(result("backend", disp2, done)))
	// Another dev's dispatch of the same task is another request.
	_, dispF := must(send(protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "frontend", TaskID: "T-7", Payload: []byte(dispatchPayload)}))
	must(send(result("frontend", dispF, done)))
	// A result to no stored dispatch is not an answer: stored as before.
	must(send(protocol.Draft{Type: protocol.TypeTaskResult, From: "frontend", To: "lead", TaskID: "T-8", Payload: []byte(done)}))
	must(send(protocol.Draft{Type: protocol.TypeTaskResult, From: "frontend", To: "lead", TaskID: "T-8", Payload: []byte(done)}))

	// A verdict answers its review request once.
	_, req := must(send(protocol.Draft{Type: protocol.TypeReviewRequest, From: "lead", To: "frontend", TaskID: "T-7",
		ContextRef: []string{disp.MsgID, renv.MsgID},
		Payload:    []byte(fmt.Sprintf(`{"original_dispatch_ref":%q,"task_result_ref":%q,"reject_count":0,"acceptance_criteria":["x"]}`, disp.MsgID, renv.MsgID))}))
	verdict := protocol.Draft{Type: protocol.TypeReviewVerdict, From: "frontend", Payload: []byte(`{"verdict":"approved"}`)}
	if err := verdict.ReplyTo(req); err != nil {
		t.Fatal(err)
	}
	v, _ := must(send(verdict))
	rejected := verdict
	rejected.Payload = []byte(`{"verdict":"rejected","issues":["late second thoughts"]}`)
	refused("a second verdict", v, rejected)

	// Two connections racing with the same answer: one stores it.
	if e.other == nil {
		return
	}
	_, disp3 := must(send(protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-9", Payload: []byte(dispatchPayload)}))
	stores := []mailbox.Store{s, e.other()}
	type out struct {
		m   message.Message
		err error
	}
	outs := make(chan out, len(stores))
	start := make(chan struct{})
	for i, st := range stores {
		d := protocolDraft("backend", "lead", "task_result", "T-9", int64(100+i), 0)
		d.AnswerKey = protocol.AnswerKey(protocol.Envelope{Type: protocol.TypeTaskResult}, disp3.MsgID)
		go func() {
			<-start
			ms, err := st.InsertMessages(e.ctx, []message.Draft{d})
			var m message.Message
			if len(ms) == 1 {
				m = ms[0]
			}
			outs <- out{m, err}
		}()
	}
	close(start)
	var stored []message.Message
	var lost []error
	for range stores {
		o := <-outs
		if o.err == nil {
			stored = append(stored, o.m)
		} else {
			lost = append(lost, o.err)
		}
	}
	if len(stored) != 1 || len(lost) != 1 {
		t.Fatalf("racing answers: %d stored, errors %v; want exactly one stored", len(stored), lost)
	}
	var ae *mailbox.AnsweredError
	if !errors.As(lost[0], &ae) || ae.Answer.ID != stored[0].ID {
		t.Fatalf("the race's loser got %v, want an AnsweredError naming #%d", lost[0], stored[0].ID)
	}
}
