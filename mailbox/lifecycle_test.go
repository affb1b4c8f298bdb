package mailbox

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/swarmhq/swarm/message"
)

func TestTransitionCompareAndSet(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.RegisterAgent(ctx, AgentInfo{Name: "backend", Mode: "code", Engine: "script", Branch: "swarm/backend"}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Agent(ctx, "backend")
	if err != nil || a.State != "Stopped" || a.SessionSeq != 0 {
		t.Fatalf("new agent = %+v, %v", a, err)
	}
	ev, err := s.Transition(ctx, Change{Agent: "backend", From: "Stopped", To: "Initializing", Cause: "start"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.From != nil || ev.To != "Initializing" {
		t.Fatalf("first event = %+v, want from null", ev)
	}
	ev, err = s.Transition(ctx, Change{Agent: "backend", From: "Initializing", To: "BuildingPrompt"})
	if err != nil || ev.From == nil || *ev.From != "Initializing" {
		t.Fatalf("second event = %+v, %v", ev, err)
	}
	// A stale from state is rejected, and nothing is recorded.
	if _, err := s.Transition(ctx, Change{Agent: "backend", From: "Initializing", To: "Idle"}); !errors.Is(err, ErrStateConflict) {
		t.Fatalf("stale CAS: %v", err)
	}
	// The schema rejects unknown states.
	if _, err := s.Transition(ctx, Change{Agent: "backend", From: "BuildingPrompt", To: "Dancing"}); err == nil {
		t.Fatal("state Dancing accepted")
	}
	evs, _ := s.Events(ctx, EventFilter{Agent: "backend"})
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	// Re-registering keeps state and counters.
	s.RegisterAgent(ctx, AgentInfo{Name: "backend", Mode: "review"})
	a, _ = s.Agent(ctx, "backend")
	if a.State != "BuildingPrompt" || a.Mode != "review" {
		t.Fatalf("after re-register: %+v", a)
	}
}

func TestSessionEndSettlesMail(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	s.RegisterAgent(ctx, AgentInfo{Name: "backend"})
	send(t, s, message.Draft{From: "operator", To: "backend", Body: "one"})

	start := func(seq int64) []message.Message {
		var ms []message.Message
		err := s.InTx(ctx, func(tx *Tx) error {
			var err error
			if ms, err = tx.Deliver("backend", seq); err != nil {
				return err
			}
			_, err = tx.StartSession("backend", seq, "script", "the prompt", []string{"bd-1"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	end := func(e SessionEnd) {
		if err := s.InTx(ctx, func(tx *Tx) error { return tx.EndSession(e) }); err != nil {
			t.Fatal(err)
		}
	}
	if ms := start(1); len(ms) != 1 {
		t.Fatalf("session 1 got %d messages", len(ms))
	}
	if err := s.AddSessionPgid(ctx, "backend", 1, 4242); err != nil {
		t.Fatal(err)
	}
	end(SessionEnd{Agent: "backend", Seq: 1, State: SessionFailed, TokensIn: 10, TokensOut: 5, Error: "boom"})
	a, _ := s.Agent(ctx, "backend")
	if a.ConsecutiveErrors != 1 || a.TotalErrors != 1 || a.Tokens != 15 {
		t.Fatalf("after failure: %+v", a)
	}
	ms := start(2)
	if len(ms) != 1 || ms[0].Shown != 1 {
		t.Fatalf("session 2 = %+v", ms)
	}
	end(SessionEnd{Agent: "backend", Seq: 2, State: SessionCompleted})
	a, _ = s.Agent(ctx, "backend")
	if a.ConsecutiveErrors != 0 || a.TotalErrors != 1 {
		t.Fatalf("after success: %+v", a)
	}
	done, _ := s.Inbox(ctx, "backend", Filter{State: message.Done})
	if len(done) != 1 || *done[0].SessionSeq != 2 {
		t.Fatalf("done = %+v", done)
	}
	sess, err := s.Session(ctx, "backend", 1)
	if err != nil || sess.State != SessionFailed || !slices.Equal(sess.Pgids, []int{4242}) || sess.Prompt != "the prompt" ||
		!slices.Equal(sess.Tasks, []string{"bd-1"}) || sess.EndedAt == nil || sess.Error != "boom" {
		t.Fatalf("session 1 = %+v, %v", sess, err)
	}
	// A session can end only once.
	if err := s.InTx(ctx, func(tx *Tx) error {
		return tx.EndSession(SessionEnd{Agent: "backend", Seq: 2, State: SessionFailed})
	}); !errors.Is(err, ErrNoSuchSession) {
		t.Fatalf("second end: %v", err)
	}
	// Session numbers are unique per agent.
	if err := s.InTx(ctx, func(tx *Tx) error {
		_, err := tx.StartSession("backend", 2, "script", "", nil)
		return err
	}); err == nil {
		t.Fatal("duplicate session number accepted")
	}
}

func TestRecoverAgent(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	s.RegisterAgent(ctx, AgentInfo{Name: "backend"})
	m := send(t, s, message.Draft{From: "operator", To: "backend", Body: "in flight"})
	s.InTx(ctx, func(tx *Tx) error {
		tx.Deliver("backend", 1)
		_, err := tx.StartSession("backend", 1, "exec", "p", nil)
		return err
	})
	var r Recovered
	if err := s.InTx(ctx, func(tx *Tx) error {
		var err error
		r, err = tx.RecoverAgent("backend")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(r.Sessions) != 1 || r.Sessions[0].Seq != 1 || r.Requeued != 1 {
		t.Fatalf("recovered = %+v", r)
	}
	sess, _ := s.Session(ctx, "backend", 1)
	if sess.State != SessionCrashed {
		t.Fatalf("session state = %s", sess.State)
	}
	got, _ := s.Get(ctx, m.ID)
	if got.State != message.Queued || got.Shown != 1 {
		t.Fatalf("message = %+v", got)
	}
}

func TestHeartbeatStampsOnlyTheNamedAgents(t *testing.T) {
	s, clk := newStore(t)
	ctx := context.Background()
	for _, n := range []string{"backend", "frontend", "lead"} {
		s.RegisterAgent(ctx, AgentInfo{Name: n})
	}
	s.Transition(ctx, Change{Agent: "backend", From: "Stopped", To: "Initializing"})
	s.Transition(ctx, Change{Agent: "frontend", From: "Stopped", To: "Initializing"})
	clk.Add(time.Minute)
	if err := s.Heartbeat(ctx, []string{"backend", "lead"}); err != nil {
		t.Fatal(err)
	}
	be, _ := s.Agent(ctx, "backend")
	fe, _ := s.Agent(ctx, "frontend")
	ld, _ := s.Agent(ctx, "lead")
	if !be.HeartbeatAt.Equal(clk.Now()) {
		t.Errorf("backend heartbeat = %v, want now", be.HeartbeatAt)
	}
	if fe.HeartbeatAt.Equal(clk.Now()) {
		t.Error("frontend, not run by this supervisor, was stamped")
	}
	if ld.HeartbeatAt != nil {
		t.Error("a Stopped agent was stamped")
	}
}
