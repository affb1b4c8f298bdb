package mailboxtest

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

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
