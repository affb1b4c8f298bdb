package swarm

import (
	"context"
	"errors"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mode"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/repo"
)

const protocolAgents = "[[agent]]\nname = \"lead\"\n[[agent]]\nname = \"backend\"\n[[agent]]\nname = \"critic\"\n"

const dispatch = `{"description": "Add pagination to GET /users", "branch": "swarm/backend",
	"acceptance_criteria": ["GET /users?page=2 returns the second page"], "risk_level": "low"}`

// manualClock is a supervisor and store clock the test moves; timers are
// real, so a sweep is driven by calling it.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time                       { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Add(d time.Duration)                  { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func (c *manualClock) NewTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }

// clockedSupervisor is a supervisor (not running) whose store and clock
// are clk's, for driving the protocol layer and the sweep step by step.
func clockedSupervisor(t *testing.T, clk *manualClock) *Supervisor {
	t.Helper()
	root := t.TempDir()
	cfg, err := config.Parse([]byte(baseConfig+protocolAgents), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	st, err := sqlite.Open(context.Background(), l.DB, sqlite.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sup, err := New(Options{Config: cfg, Layout: l, Store: st, Clock: clk,
		Engines:   func(config.Agent) (engine.Engine, error) { return &fakeEngine{name: "script"}, nil },
		Worktrees: &fakeWorktrees{root: filepath.Join(root, "wt")}, Prompts: &fakePrompts{}})
	if err != nil {
		t.Fatal(err)
	}
	return sup
}

// startSession delivers agent's queued mail into its session seq.
func startSession(t *testing.T, st mailbox.Store, agent string, seq int64) []message.Message {
	t.Helper()
	if err := st.RegisterAgent(context.Background(), mailbox.AgentInfo{Name: agent}); err != nil {
		t.Fatal(err)
	}
	var ms []message.Message
	err := st.InTx(context.Background(), func(tx mailbox.Tx) error {
		var err error
		if ms, err = tx.Deliver(agent, seq, nil); err != nil {
			return err
		}
		return tx.StartSession(mailbox.SessionStart{Agent: agent, Seq: seq})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func send(t *testing.T, p *Protocol, req SendRequest) (message.Message, protocol.Envelope) {
	t.Helper()
	if !req.Caller.Known() {
		req.Caller = identity.Operator()
	}
	m, env, err := p.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return m, env
}

func dispatchTo(to string, ack time.Duration) SendRequest {
	return SendRequest{Draft: protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: to, TaskID: "T-42",
		Payload: []byte(dispatch), AckTimeout: ack}, Caller: identity.Operator()}
}

func escalations(t *testing.T, st mailbox.Store) []escalation.Escalation {
	t.Helper()
	es, err := st.Escalations(context.Background(), mailbox.EscalationFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestProtocolChainAckAndSessionBinding(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	sup := clockedSupervisor(t, clk)
	p, st, ctx := sup.Protocol(), sup.store, context.Background()

	d, env := send(t, p, dispatchTo("backend", 0))
	if d.MsgID != "task_dispatch-T-42-1795428000000" || env.AckTimeoutSec != 300 || !d.NeedsAck() {
		t.Fatalf("dispatch = %+v, envelope %+v", d, env)
	}
	// Nothing to acknowledge before it is delivered.
	if _, err := p.Ack(ctx, sessionOf("backend", 1), d.MsgID); err == nil || !strings.Contains(err.Error(), "not been delivered") {
		t.Fatalf("ACK before delivery: %v", err)
	}
	startSession(t, st, "backend", 1)
	if err := st.InTx(ctx, func(tx mailbox.Tx) error {
		return tx.EndSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionInterrupted})
	}); err != nil {
		t.Fatal(err)
	}
	startSession(t, st, "backend", 2)

	// Whether a leftover of session 1 may act for session 2 is the verbs'
	// rule (verbs.TestAcksAndResultsNeedTheCurrentSession); CheckSession
	// says so for them.
	var stale *StaleSessionError
	if err := p.CheckSession(ctx, "backend", "backend-1", "acknowledge"); !errors.As(err, &stale) || stale.Current != "backend-2" {
		t.Fatalf("CheckSession of backend-1: %v, want a StaleSessionError naming backend-2", err)
	}
	if !strings.Contains((&StaleSessionError{Agent: "backend", Given: "backend-1", Current: "backend-2", What: "acknowledge"}).Error(), "session backend-1, but backend's current session is backend-2") {
		t.Fatal("the refusal does not name both sessions")
	}
	if _, err := p.Ack(ctx, sessionOf("critic", 1), d.MsgID); err == nil || !strings.Contains(err.Error(), "sent to backend") {
		t.Fatalf("an ACK by someone else: %v", err)
	}

	clk.Add(time.Second)
	acks, err := p.AckAll(ctx, sessionOf("backend", 2))
	if err != nil || len(acks) != 1 || acks[0].To != "lead" || acks[0].TaskID != "T-42" {
		t.Fatalf("AckAll = %+v, %v", acks, err)
	}
	if got, _ := st.ProtocolMessage(ctx, d.MsgID); got.Ack.State != message.AckAcked {
		t.Fatalf("after the ACK: %+v", got.Ack)
	}
	if _, err := p.Ack(ctx, sessionOf("backend", 2), "#"+itoa(d.ID)); err == nil || !strings.Contains(err.Error(), "acknowledged already") {
		t.Fatalf("a second ACK: %v", err)
	}

	// A result answering the dispatch by its number: task and context come
	// from it, and it goes back to its sender.
	result := SendRequest{Draft: protocol.Draft{Type: protocol.TypeTaskResult, From: "backend",
		Payload: []byte(`{"status":"completed","summary":"paginated"}`)}, ReplyTo: "#" + itoa(d.ID)}
	clk.Add(time.Second)
	r, renv := send(t, p, result)
	if r.To != "lead" || renv.TaskID != "T-42" || len(renv.ContextRef) != 1 || renv.ContextRef[0] != d.MsgID || r.ThreadID != d.ThreadID {
		t.Fatalf("result = %+v, envelope %+v", r, renv)
	}
	chain, err := p.Log(ctx, "T-42", 0)
	if err != nil || len(chain) != 3 {
		t.Fatalf("log = %d messages, %v", len(chain), err)
	}
	var types []string
	for _, m := range chain {
		types = append(types, string(mailbox.StoredOf(m).Type))
	}
	if got := strings.Join(types, " "); got != "task_dispatch ack task_result" {
		t.Fatalf("chain = %s", got)
	}
	// --reply-to by msg_id works the same; plain mail has no envelope.
	if _, err := ResolveMessage(ctx, st, renv.MsgID); err != nil {
		t.Fatal(err)
	}
	plain, _ := sup.poster.Post(ctx, message.Draft{From: "operator", To: "backend", Body: "hi"})
	_, _, err = p.Send(ctx, SendRequest{Draft: protocol.Draft{Type: protocol.TypeTaskResult, From: "backend", Payload: []byte(`{}`)}, ReplyTo: itoa(plain.ID), Caller: identity.Session("backend", 2, mode.Vector{mode.CanMessage: true})})
	if err == nil || !strings.Contains(err.Error(), "plain mail") {
		t.Fatalf("a reply to plain mail: %v", err)
	}
}

func TestDispatchToAProtectedBranchRaisesAndRefuses(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	sup := clockedSupervisor(t, clk)
	p, st, ctx := sup.Protocol(), sup.store, context.Background()
	before, _ := st.NewestMessageID(ctx)
	req := dispatchTo("backend", 0)
	req.Draft.Payload = []byte(strings.Replace(dispatch, "swarm/backend", "main", 1))
	_, _, err := p.Send(ctx, req)
	var bv *BranchViolationError
	var ve *protocol.ValidationError
	if !errors.As(err, &bv) || !errors.As(err, &ve) {
		t.Fatalf("a dispatch to main: %v", err)
	}
	if _, ok := ve.Field("payload.branch"); !ok {
		t.Fatalf("the refusal does not name payload.branch: %v", ve)
	}
	if after, _ := st.NewestMessageID(ctx); after != before {
		t.Fatal("the refused dispatch was stored")
	}
	es := escalations(t, st)
	if len(es) != 1 || es[0].Kind != escalation.KindBranchViolation || es[0].Severity != escalation.Critical || !es[0].Holds() || es[0].AgentName() != "lead" {
		t.Fatalf("escalations = %+v", es)
	}
	if !strings.Contains(bv.Note(), "lead is held") {
		t.Fatalf("note = %q", bv.Note())
	}
	// From the operator: just a refusal, with no escalation about
	// nobody and no notification.
	req.Draft.From = message.Operator
	if _, _, err := p.Send(ctx, req); !errors.As(err, &bv) || bv.Escalation.ID != 0 || bv.Note() != "" {
		t.Fatalf("from operator: %v, %+v", err, bv.Escalation)
	}
	if es := escalations(t, st); len(es) != 1 {
		t.Fatalf("the operator's refusal raised an escalation: %+v", es)
	}
}

func TestAckDeadlinesAreSwept(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	sup := clockedSupervisor(t, clk)
	p, st, ctx := sup.Protocol(), sup.store, context.Background()
	var pinged []string
	sup.acks.d.PingTimeout = func(_ context.Context, m message.Message) { pinged = append(pinged, m.MsgID) }

	d, _ := send(t, p, dispatchTo("backend", 2*time.Second))
	// A review request needs a stored dispatch and result of its task.
	startSession(t, st, "backend", 1)
	res, _ := send(t, p, SendRequest{Draft: protocol.Draft{Type: protocol.TypeTaskResult, From: "backend", Payload: []byte(`{"status":"completed","summary":"done"}`)},
		ReplyTo: d.MsgID, Caller: identity.Session("backend", 1, mode.Vector{mode.CanMessage: true})})
	rr, _ := send(t, p, SendRequest{Draft: protocol.Draft{Type: protocol.TypeReviewRequest, From: "lead", To: "critic", TaskID: "T-42",
		Payload:    []byte(`{"original_dispatch_ref":"` + d.MsgID + `","task_result_ref":"` + res.MsgID + `","reject_count":0,"acceptance_criteria":["pages"]}`),
		AckTimeout: 3 * time.Second}})
	ping, _ := send(t, p, SendRequest{Draft: protocol.Draft{Type: protocol.TypePing, From: message.Swarm, To: "lead", TaskID: "team-core",
		Payload: []byte(`{"code":"CORE_BOOTSTRAP_PING"}`), AckTimeout: time.Second}})
	startSession(t, st, "critic", 1)
	startSession(t, st, "lead", 1)
	due, _ := st.ProtocolMessage(ctx, d.MsgID)
	if due.Ack.DueAt == nil || !due.Ack.DueAt.Equal(clk.Now().Add(2*time.Second)) {
		t.Fatalf("the dispatch's deadline = %v", due.Ack.DueAt)
	}

	// Before any deadline: nothing, and the sweep sleeps until the first.
	if wait := sup.acks.sweep(ctx); wait != time.Second {
		t.Fatalf("sleep = %s, want 1s (the ping's deadline)", wait)
	}
	clk.Add(5 * time.Second)
	if wait := sup.acks.sweep(ctx); wait != ackRecheck {
		t.Fatalf("sleep after the sweep = %s, want %s (no deadline left)", wait, ackRecheck)
	}

	es := escalations(t, st)
	byRef := map[string]escalation.Escalation{}
	for _, e := range es {
		byRef[e.RefText()] = e
	}
	if len(es) != 2 {
		t.Fatalf("escalations = %+v; want one per dispatch and review request, none for the ping", es)
	}
	de := byRef["msg:"+d.MsgID]
	if de.Kind != escalation.KindAckTimeout || de.Severity != escalation.Critical || !de.Holds() || de.AgentName() != "backend" {
		t.Fatalf("the dispatch's escalation = %+v", de)
	}
	re := byRef["msg:"+rr.MsgID]
	if re.Severity != escalation.Warning || re.Hold || re.AgentName() != "critic" {
		t.Fatalf("the review request's escalation = %+v", re)
	}
	for _, m := range []message.Message{d, rr, ping} {
		got, _ := st.ProtocolMessage(ctx, m.MsgID)
		if got.Ack.State != message.AckOverdue {
			t.Errorf("%s: ACK %s, want overdue", m.MsgID, got.Ack.State)
		}
	}
	if len(pinged) != 1 || pinged[0] != ping.MsgID {
		t.Fatalf("ping hook saw %v", pinged)
	}
	// The reviewer got a reminder from swarm, in the request's thread.
	inbox, _ := st.Inbox(ctx, "critic", mailbox.Filter{})
	last := inbox[len(inbox)-1]
	if last.From != message.Swarm || last.ThreadID != rr.ThreadID || !strings.Contains(last.Body, "swarm ack "+rr.MsgID) {
		t.Fatalf("reminder = %+v", last)
	}
	// A second sweep (a restart) raises nothing again.
	clk.Add(time.Second)
	sup.acks.sweep(ctx)
	if n := len(escalations(t, st)); n != 2 {
		t.Fatalf("%d escalations after a second sweep", n)
	}
	// A late ACK is still taken.
	if _, err := p.Ack(ctx, sessionOf("critic", 1), rr.MsgID); err != nil {
		t.Fatalf("a late ACK: %v", err)
	}

	// Resume queues the same dispatch again; its next delivery starts a
	// fresh deadline.
	resume := escalation.Resume
	de.Decision = &resume
	var moved *message.Message
	if err := st.InTx(ctx, func(tx mailbox.Tx) (err error) { moved, err = SettleAckDecision(tx, de); return err }); err != nil {
		t.Fatal(err)
	}
	if moved == nil || moved.ID != d.ID || moved.MsgID != d.MsgID || moved.State != message.Queued || moved.Ack.State != message.AckPending {
		t.Fatalf("resumed = %+v", moved)
	}
	if err := st.InTx(ctx, func(tx mailbox.Tx) error {
		return tx.EndSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionCompleted})
	}); err != nil {
		t.Fatal(err)
	}
	startSession(t, st, "backend", 2)
	again, _ := st.ProtocolMessage(ctx, d.MsgID)
	if again.Ack.DueAt == nil || !again.Ack.DueAt.Equal(clk.Now().Add(2*time.Second)) || *again.SessionSeq != 2 {
		t.Fatalf("redelivered = %+v, ACK %+v", again, again.Ack)
	}
	// Abort cancels it.
	abort := escalation.Abort
	de.Decision = &abort
	if err := st.InTx(ctx, func(tx mailbox.Tx) (err error) { moved, err = SettleAckDecision(tx, de); return err }); err != nil {
		t.Fatal(err)
	}
	if moved == nil || moved.State != message.Done || moved.Ack.State != message.AckCancelled {
		t.Fatalf("aborted = %+v", moved)
	}
	// A decision on anything else moves no message.
	other := escalation.Escalation{Kind: escalation.KindAgent, Decision: &resume}
	if err := st.InTx(ctx, func(tx mailbox.Tx) (err error) { moved, err = SettleAckDecision(tx, other); return err }); err != nil || moved != nil {
		t.Fatalf("an agent escalation moved %v, %v", moved, err)
	}
}

func TestAckDeadlineServiceWakesOnDelivery(t *testing.T) {
	h := newHarness(t, protocolAgents)
	h.start()
	for range 3 {
		r := h.nextRun()
		r.finish <- engine.Result{Outcome: engine.Success}
	}
	for _, a := range []string{"lead", "backend", "critic"} {
		h.waitFor(a, lifecycle.Idle)
	}
	d, _ := send(t, h.sup.Protocol(), dispatchTo("backend", time.Second))
	r := h.nextRun()
	if r.s.Agent != "backend" || len(r.s.Mail) != 1 {
		t.Fatalf("woken session = %s with %d mail", r.s.Agent, len(r.s.Mail))
	}
	got, _ := h.store.ProtocolMessage(context.Background(), d.MsgID)
	due := *got.Ack.DueAt
	// The service slept for a minute before the delivery: only the wake
	// from the delivery makes it act at the deadline.
	var esc escalation.Escalation
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if es := escalations(t, h.store); len(es) > 0 {
			esc = es[0]
			break
		}
		<-time.After(10 * time.Millisecond)
	}
	if esc.ID == 0 {
		t.Fatal("no ack_timeout was raised")
	}
	if lag := esc.CreatedAt.Sub(due); lag < 0 || lag > time.Second {
		t.Fatalf("raised %s after the deadline, want within 1s", lag)
	}
	// A dispatch's ack_timeout holds the recipient: its session is
	// interrupted, and the dispatch waits in its queue.
	h.waitFor("backend", lifecycle.Held)
	if got, _ := h.store.ProtocolMessage(context.Background(), d.MsgID); got.State != message.Queued || got.Ack.State != message.AckOverdue {
		t.Fatalf("while held: %s, ACK %+v", got.State, got.Ack)
	}
	// Resume: the same message is delivered again, with a fresh deadline.
	if _, err := h.sup.Decide(context.Background(), esc.ID, escalation.Event(escalation.Resume), "go on"); err != nil {
		t.Fatal(err)
	}
	r = h.nextRun()
	if r.s.Agent != "backend" || len(r.s.Mail) != 1 || r.s.Mail[0].ID != d.ID {
		t.Fatalf("after the resume: %s with %+v", r.s.Agent, r.s.Mail)
	}
	again, _ := h.store.ProtocolMessage(context.Background(), d.MsgID)
	if again.Ack.State != message.AckPending || again.Ack.DueAt == nil || !again.Ack.DueAt.After(due) {
		t.Fatalf("redelivered: ACK %+v, first deadline %s", again.Ack, due)
	}
	if _, err := r.s.Protocol.Ack(r.ctx, d.MsgID, false); err != nil {
		t.Fatalf("ACK after the resume: %v", err)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("backend", lifecycle.Idle)
	if n := len(escalations(t, h.store)); n != 1 {
		t.Fatalf("%d escalations; the acknowledged redelivery raised another", n)
	}
}

func TestAbortCancelsTheDispatch(t *testing.T) {
	h := newHarness(t, protocolAgents)
	h.start()
	for range 3 {
		h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	}
	h.waitFor("backend", lifecycle.Idle)
	d, _ := send(t, h.sup.Protocol(), dispatchTo("backend", time.Second))
	r := h.nextRun()
	h.waitFor("backend", lifecycle.Held)
	<-r.ctx.Done()
	es := escalations(t, h.store)
	if _, err := h.sup.Decide(context.Background(), es[0].ID, escalation.Event(escalation.Abort), ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor("backend", lifecycle.Idle)
	got, _ := h.store.ProtocolMessage(context.Background(), d.MsgID)
	if got.State != message.Done || got.Ack.State != message.AckCancelled {
		t.Fatalf("aborted dispatch: %s, ACK %+v", got.State, got.Ack)
	}
	// Cancelled: nothing to acknowledge, and no session for it (Idle means
	// the runner found no work).
	if _, err := h.sup.Protocol().Ack(context.Background(), sessionOf("backend", 2), d.MsgID); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("ACK of a cancelled dispatch: %v", err)
	}
	select {
	case r := <-h.eng.runs:
		t.Fatalf("unexpected session %s/%d after the abort", r.s.Agent, r.s.Seq)
	default:
	}
}

func TestProtocolMailJoinsARunningSession(t *testing.T) {
	h := newHarness(t, protocolAgents)
	h.start()
	runs := map[string]*fakeRun{}
	for range 3 {
		r := h.nextRun()
		runs[r.s.Agent] = r
	}
	r := runs["backend"]
	h.waitFor("backend", lifecycle.Running)
	if r.s.Interject == nil || r.s.Protocol == nil {
		t.Fatal("an in-process session has no Interject or Protocol hook")
	}
	d, _ := send(t, h.sup.Protocol(), dispatchTo("backend", 4*time.Minute))
	texts := r.s.Interject(r.ctx)
	if len(texts) != 1 || !strings.HasPrefix(texts[0], "[PROTOCOL] From lead (#") || !strings.Contains(texts[0], "ACK required within 3m: swarm ack "+d.MsgID) ||
		!strings.Contains(texts[0], `payload: {"description":"Add pagination to GET /users","branch":"swarm/backend"`) {
		t.Fatalf("interject = %q", texts)
	}
	// The tool acknowledges it as the agent, from this session.
	sent, err := r.s.Protocol.Ack(r.ctx, "", true)
	if err != nil || len(sent) != 1 || sent[0].To != "lead" {
		t.Fatalf("ack tool = %+v, %v", sent, err)
	}
	_, err = r.s.Protocol.Send(r.ctx, engine.ProtocolMessage{Type: "task_result", ReplyTo: d.MsgID, Payload: []byte(`{"status":"completed","summary":"done"}`)})
	if err != nil {
		t.Fatalf("send_protocol: %v", err)
	}
	for _, a := range []string{"lead", "backend", "critic"} {
		runs[a].finish <- engine.Result{Outcome: engine.Success}
	}
	h.waitFor("backend", lifecycle.Idle)
	if !strings.Contains(strings.Join(h.states("backend"), " "), "Running Running") {
		t.Fatalf("no injection event: %v", h.states("backend"))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestProtocolSendChecksNoRule: the protocol's Send is the runtime's
// rule-free primitive: who may send what is verbs.SendProtocol's to check,
// once, so a draft from a caller without can_dispatch is stored here.
func TestProtocolSendChecksNoRule(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	sup := clockedSupervisor(t, clk)
	req := dispatchTo("backend", 0)
	req.Caller = identity.Session("backend", 1, mode.Vector{})
	m, _, err := sup.Protocol().Send(context.Background(), req)
	if err != nil || m.From != "lead" {
		t.Fatalf("Send = %+v, %v; want the draft stored as it is", m, err)
	}
}

// sessionOf is session seq of agent with every capability: the tests of
// the protocol's own rules.
func sessionOf(agent string, seq int64) identity.Caller {
	v := mode.Vector{}
	for _, c := range mode.Capabilities {
		v[c] = true
	}
	return identity.Session(agent, seq, v)
}
