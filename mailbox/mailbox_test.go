package mailbox

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/message"
)

// clock is a manual clock for deterministic timestamps.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t testing.TB) (*Store, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "swarm.db"), Options{
		Agents: []string{"backend", "frontend", "lead"},
		Now:    clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

func send(t *testing.T, s *Store, d message.Draft) message.Message {
	t.Helper()
	m, err := s.Send(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSendAndInbox(t *testing.T) {
	s, clk := newStore(t)
	ctx := context.Background()
	m := send(t, s, message.Draft{From: "operator", To: "backend", Body: "hi"})
	if m.ID == 0 || m.ThreadID != m.ID || m.ReplyTo != nil || m.State != message.Queued || m.Urgency != message.Normal ||
		m.Kind != message.KindMessage || m.SessionSeq != nil || !m.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("stored message = %+v", m)
	}
	clk.Add(time.Second)
	u := send(t, s, message.Draft{From: "frontend", To: "backend", Body: "disk full", Urgency: message.Urgent})
	got, err := s.Inbox(ctx, "backend", Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != m.ID || got[1].ID != u.ID {
		t.Fatalf("inbox = %+v, want oldest first", got)
	}
	got, _ = s.Inbox(ctx, "backend", Filter{Limit: 1})
	if len(got) != 1 || got[0].ID != u.ID {
		t.Fatalf("inbox limit 1 = %+v, want the newest", got)
	}
	got, _ = s.Inbox(ctx, "frontend", Filter{Sent: true})
	if len(got) != 1 || got[0].ID != u.ID {
		t.Fatalf("sent by frontend = %+v", got)
	}
	if _, err := s.Inbox(ctx, "backend", Filter{State: "lost"}); err == nil {
		t.Fatal("bad state accepted")
	}
}

func TestSendValidation(t *testing.T) {
	s, _ := newStore(t)
	for _, d := range []message.Draft{
		{From: "operator", To: "nobody", Body: "x"},
		{From: "operator", To: "../x", Body: "x"},
		{From: "backend", To: "backend", Body: "x"},
		{From: "operator", To: "backend", Body: ""},
	} {
		if _, err := s.Send(context.Background(), d); err == nil {
			t.Errorf("Send(%+v) succeeded", d)
		}
	}
	if _, err := s.Send(context.Background(), message.Draft{From: "operator", To: "backend", Body: "x", ReplyTo: 999}); !errors.Is(err, ErrNoSuchMessage) {
		t.Errorf("reply to a missing message: %v", err)
	}
	n, _ := s.Inbox(context.Background(), "backend", Filter{})
	if len(n) != 0 {
		t.Fatalf("rejected mail was stored: %+v", n)
	}
}

func TestReplyInheritsThread(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	root := send(t, s, message.Draft{From: "lead", To: "backend", Body: "build the API"})
	r1, err := s.Reply(ctx, root.ID, message.Draft{From: "backend", Body: "on it"})
	if err != nil {
		t.Fatal(err)
	}
	r2 := send(t, s, message.Draft{From: "lead", To: "backend", Body: "thanks", ReplyTo: r1.ID})
	if r1.To != "lead" || r1.ThreadID != root.ID || *r1.ReplyTo != root.ID {
		t.Errorf("reply = %+v", r1)
	}
	if r2.ThreadID != root.ID || *r2.ReplyTo != r1.ID {
		t.Errorf("reply to reply = %+v", r2)
	}
}

func TestBroadcast(t *testing.T) {
	s, _ := newStore(t)
	ms, err := s.Broadcast(context.Background(), message.Draft{From: "lead", Body: "standup"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].To != "backend" || ms[1].To != "frontend" {
		t.Fatalf("broadcast = %+v", ms)
	}
	ms, err = s.Broadcast(context.Background(), message.Draft{From: "operator", Body: "all hands"})
	if err != nil || len(ms) != 3 {
		t.Fatalf("operator broadcast = %d messages, %v", len(ms), err)
	}
}

func TestDeliveryLifecycle(t *testing.T) {
	s, clk := newStore(t)
	ctx := context.Background()
	a := send(t, s, message.Draft{From: "operator", To: "backend", Body: "first"})
	clk.Add(time.Minute)
	b := send(t, s, message.Draft{From: "frontend", To: "backend", Body: "second"})
	clk.Add(time.Minute)
	u := send(t, s, message.Draft{From: "lead", To: "backend", Body: "urgent", Urgency: message.Urgent})

	// Session 1 gets all three, urgent first, then oldest.
	got, err := s.Deliver(ctx, "backend", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ids(got) != ids([]message.Message{u, a, b}) {
		t.Fatalf("delivery order = %v", ids(got))
	}
	for _, m := range got {
		if m.State != message.Delivered || *m.SessionSeq != 1 || m.Shown != 0 {
			t.Fatalf("delivered = %+v", m)
		}
	}
	// Nothing is left to deliver twice.
	if again, _ := s.Deliver(ctx, "backend", 2); len(again) != 0 {
		t.Fatalf("delivered twice: %v", ids(again))
	}
	// Session 1 is interrupted: back to queued, shown once.
	if n, err := s.Abandon(ctx, "backend", 1); err != nil || n != 3 {
		t.Fatalf("Abandon = %d, %v", n, err)
	}
	q, _ := s.Queued(ctx, "backend")
	if ids(q) != ids([]message.Message{u, a, b}) || q[0].Shown != 1 || q[0].SessionSeq != nil {
		t.Fatalf("requeued = %+v", q)
	}
	c := send(t, s, message.Draft{From: "operator", To: "backend", Body: "third"})
	got, _ = s.Deliver(ctx, "backend", 2)
	if len(got) != 4 || got[3].ID != c.ID || got[3].Shown != 0 || got[1].Shown != 1 {
		t.Fatalf("session 2 = %+v", got)
	}
	// Session 2 completes: all done, in session 2.
	if n, err := s.Complete(ctx, "backend", 2); err != nil || n != 4 {
		t.Fatalf("Complete = %d, %v", n, err)
	}
	done, _ := s.Inbox(ctx, "backend", Filter{State: message.Done})
	for _, m := range done {
		if *m.SessionSeq != 2 {
			t.Fatalf("done message in session %d", *m.SessionSeq)
		}
	}
	if len(done) != 4 {
		t.Fatalf("%d done, want 4", len(done))
	}
	// Completing or abandoning again changes nothing.
	if n, _ := s.Abandon(ctx, "backend", 2); n != 0 {
		t.Fatalf("abandoned %d done messages", n)
	}
}

func TestDeliverInto(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	a := send(t, s, message.Draft{From: "operator", To: "backend", Body: "a"})
	b := send(t, s, message.Draft{From: "operator", To: "backend", Body: "b", Urgency: message.Urgent})
	got, err := s.DeliverInto(ctx, "backend", 3, []int64{b.ID, 9999})
	if err != nil || len(got) != 1 || got[0].ID != b.ID || *got[0].SessionSeq != 3 {
		t.Fatalf("DeliverInto = %+v, %v", got, err)
	}
	// Already delivered: skipped.
	if got, _ := s.DeliverInto(ctx, "backend", 3, []int64{b.ID}); len(got) != 0 {
		t.Fatalf("delivered again: %+v", got)
	}
	q, _ := s.Queued(ctx, "backend")
	if len(q) != 1 || q[0].ID != a.ID {
		t.Fatalf("queued = %+v", q)
	}
}

func TestPendingCounts(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	send(t, s, message.Draft{From: "operator", To: "backend", Body: "a", Urgency: message.Urgent})
	send(t, s, message.Draft{From: "operator", To: "backend", Body: "b", Kind: message.KindStatus})
	c, err := s.Pending(ctx, "backend")
	if err != nil || c != (Counts{Queued: 2, Urgent: 1, Waking: 1}) {
		t.Fatalf("Pending = %+v, %v", c, err)
	}
}

func TestPrune(t *testing.T) {
	s, clk := newStore(t)
	ctx := context.Background()
	old := send(t, s, message.Draft{From: "operator", To: "backend", Body: "old"})
	s.Deliver(ctx, "backend", 1)
	s.Complete(ctx, "backend", 1)
	clk.Add(40 * 24 * time.Hour)
	// A reply to the pruned message survives with reply_to cleared.
	reply := send(t, s, message.Draft{From: "backend", To: "operator", Body: "re", ReplyTo: old.ID})
	queued := send(t, s, message.Draft{From: "operator", To: "backend", Body: "still queued"})
	n, err := s.Prune(ctx, 30*24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	if _, err := s.Get(ctx, old.ID); !errors.Is(err, ErrNoSuchMessage) {
		t.Fatalf("old message still there: %v", err)
	}
	r, err := s.Get(ctx, reply.ID)
	if err != nil || r.ReplyTo != nil {
		t.Fatalf("reply = %+v, %v", r, err)
	}
	if _, err := s.Get(ctx, queued.ID); err != nil {
		t.Fatal(err)
	}
	// Ids are never reused after pruning.
	m := send(t, s, message.Draft{From: "operator", To: "backend", Body: "new"})
	if m.ID <= queued.ID {
		t.Fatalf("id %d reused", m.ID)
	}
}

func TestSchemaRejectsBadStates(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	m := send(t, s, message.Draft{From: "operator", To: "backend", Body: "a"})
	for _, q := range []string{
		`UPDATE messages SET state = 'lost' WHERE id = ?`,
		`UPDATE messages SET kind = 'memo' WHERE id = ?`,
		`UPDATE messages SET state = 'delivered' WHERE id = ?`, // delivered needs a session
	} {
		if _, err := s.DB().ExecContext(ctx, q, m.ID); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO agents (name, state) VALUES ('x', 'Dancing')`); err == nil {
		t.Error("agent state Dancing accepted")
	}
}

func TestPragmas(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	var mode string
	var fk, busy int
	s.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
	s.DB().QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk)
	s.DB().QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy)
	if mode != "wal" || fk != 1 || busy != 5000 {
		t.Fatalf("journal_mode=%s foreign_keys=%d busy_timeout=%d", mode, fk, busy)
	}
	if res, err := s.IntegrityCheck(ctx); err != nil || res != "ok" {
		t.Fatalf("integrity_check = %q, %v", res, err)
	}
}

func TestPathWithSpaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "my repo", ".swarm", "swarm.db")
	s, err := Open(context.Background(), p, Options{Agents: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Send(context.Background(), message.Draft{From: "operator", To: "a", Body: "x"}); err != nil {
		t.Fatal(err)
	}
}

func TestDataVersionSeesOtherConnections(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	other, err := Open(ctx, s.Path(), Options{Agents: s.AgentNames()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	v1, err := s.DataVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Send(ctx, message.Draft{From: "operator", To: "backend", Body: "poke"}); err != nil {
		t.Fatal(err)
	}
	v2, _ := s.DataVersion(ctx)
	if v2 == v1 {
		t.Fatal("data_version did not change after another connection wrote")
	}
}

func ids(ms []message.Message) string {
	var out []byte
	for _, m := range ms {
		out = append(out, byte('0'+m.ID%10))
	}
	return string(out)
}

func TestMeta(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, ok, err := s.Meta(ctx, "base_branch"); ok || err != nil {
		t.Fatalf("unset meta: ok=%v err=%v", ok, err)
	}
	for _, v := range []string{"main", "trunk"} {
		if err := s.SetMeta(ctx, "base_branch", v); err != nil {
			t.Fatal(err)
		}
		if got, ok, _ := s.Meta(ctx, "base_branch"); !ok || got != v {
			t.Fatalf("meta = %q, %v; want %q", got, ok, v)
		}
	}
}
