package swarm

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/swarmhq/swarm/identity"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// stepClock is real time moved on by the test: Now is the real time plus
// what the test added; timers are real.
type stepClock struct{ offset atomic.Int64 }

func (c *stepClock) Now() time.Time                       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *stepClock) NewTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }
func (c *stepClock) Add(d time.Duration)                  { c.offset.Add(int64(d)) }

// hookEvent is one notification as a hook received it.
type hookEvent struct {
	Event   string // $SWARM_EVENT, or the X-Swarm-Event header
	Payload map[string]any
	At      time.Time
}

func (e hookEvent) id() int64 { return int64(e.Payload["id"].(float64)) }

// fifoHook is a notify command that writes $SWARM_EVENT, a tab and its
// stdin into a FIFO the test reads: each run is one event, and the test
// waits on the read, not on a clock.
func fifoHook(t *testing.T) ([]string, <-chan hookEvent) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "hook.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ch := make(chan hookEvent, 100)
	var done atomic.Bool
	go func() {
		for !done.Load() {
			b, err := os.ReadFile(fifo) // blocks until a run opens it, ends when it closes
			if err != nil || done.Load() {
				return
			}
			ev, body, _ := strings.Cut(string(b), "\t")
			var p map[string]any
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Errorf("the command got no JSON: %q", b)
				continue
			}
			ch <- hookEvent{Event: ev, Payload: p, At: time.Now()}
		}
	}()
	t.Cleanup(func() {
		done.Store(true)
		// Release a reader blocked in open.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return []string{"sh", "-c", `{ printf '%s\t' "$SWARM_EVENT"; cat; } > "$0"`, fifo}, ch
}

// webhook is an httptest listener that records every POST; fail makes it
// answer 500 to the next n requests.
type webhook struct {
	*httptest.Server
	ch   chan hookEvent
	fail atomic.Int32
	hits atomic.Int32
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{ch: make(chan hookEvent, 100)}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		if w.fail.Add(-1) >= 0 {
			http.Error(rw, "try later", http.StatusServiceUnavailable)
			return
		}
		var p map[string]any
		if err := json.Unmarshal(body, &p); err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook got %s %q (%s): %v", r.Method, body, r.Header.Get("Content-Type"), err)
		}
		w.ch <- hookEvent{Event: r.Header.Get("X-Swarm-Event"), Payload: p, At: time.Now()}
	}))
	t.Cleanup(w.Close)
	return w
}

func next(t *testing.T, what string, ch <-chan hookEvent) hookEvent {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: nothing received", what)
		return hookEvent{}
	}
}

// expect reads the next event from both hooks and checks it is event
// about escalation id.
func expect(t *testing.T, cmd, hook <-chan hookEvent, event string, id int64) hookEvent {
	t.Helper()
	c, w := next(t, "command", cmd), next(t, "webhook", hook)
	for _, e := range []hookEvent{c, w} {
		if e.Event != event || e.Payload["event"] != event || e.id() != id {
			t.Fatalf("got %s about %v (payload event %v), want %s about %d", e.Event, e.Payload["id"], e.Payload["event"], event, id)
		}
	}
	return c
}

func notifyHarness(t *testing.T, clock Clock, cmd []string, hook string, extra string) *harness {
	t.Helper()
	argv, _ := json.Marshal(cmd)
	toml := baseConfig + "[notify]\ncommand = " + string(argv) + "\nwebhook = \"" + hook + "\"\n" + extra + "[[agent]]\nname = \"alpha\"\n"
	h := newHarnessConfig(t, toml)
	if clock != nil {
		h.sup.clock = clock
		h.sup.desk = newDesk(h.sup.deskDeps())
		h.sup.desk.notifier.clock = clock
	}
	h.sup.desk.notifier.backoff = 10 * time.Millisecond
	return h
}

// TestNotifyOnceThenRemindUntilAcked: one event per change to both hooks,
// the escalation's JSON exactly as listed plus "event"; a repeat counts
// without notifying; reminders come every remind_every while nobody acks,
// at most max_reminders; a restart sends nothing again.
func TestNotifyOnceThenRemindUntilAcked(t *testing.T) {
	cmd, cmdCh := fifoHook(t)
	hook := newWebhook(t)
	clock := &stepClock{}
	h := notifyHarness(t, clock, cmd, hook.URL, "max_reminders = 2\n")
	ctx := context.Background()
	h.start()
	h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)

	draft := escalation.Draft{Kind: escalation.KindBranchViolation, Agent: "alpha", Summary: "committed on main", Details: []byte(`{"commit": "abc123"}`)}
	raised := time.Now()
	esc, _, err := h.sup.Raise(ctx, draft)
	if err != nil {
		t.Fatal(err)
	}
	got := expect(t, cmdCh, hook.ch, escalation.EventOpened, esc.ID)
	t.Logf("raise to notify command: %s", got.At.Sub(raised))
	if d := got.At.Sub(raised); d > time.Second {
		t.Errorf("the command got the event %s after the raise, want within 1s", d)
	}
	// The payload is the listed JSON plus "event".
	listed, _ := json.Marshal(esc)
	var want map[string]any
	json.Unmarshal(listed, &want)
	want["event"] = escalation.EventOpened
	gotJSON, _ := json.Marshal(got.Payload)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("payload\n%s\nwant\n%s", gotJSON, wantJSON)
	}

	// A repeat counts; nobody is notified again. The marker (info, so
	// listed after the critical one) shows what the desk sent meanwhile.
	marker := func(summary string) int64 {
		m, created, err := h.sup.Raise(ctx, escalation.Draft{Kind: escalation.KindAgent, Severity: escalation.Info, Summary: summary})
		if err != nil || !created {
			t.Fatalf("marker: %v", err)
		}
		return m.ID
	}
	if twin, created, _ := h.sup.Raise(ctx, draft); created || twin.Count != 2 {
		t.Fatalf("repeat = %+v", twin)
	}
	m1 := marker("marker 1")
	expect(t, cmdCh, hook.ch, escalation.EventOpened, m1)
	h.sup.Decide(ctx, m1, escalation.Event(escalation.Resume), "")
	expect(t, cmdCh, hook.ch, escalation.EventResolved, m1)

	// Reminders, every remind_every (1h), at most max_reminders (2).
	for range 2 {
		clock.Add(time.Hour)
		h.sup.EscalationChanged()
		if e := expect(t, cmdCh, hook.ch, escalation.EventReminder, esc.ID); e.Payload["count"] != 2.0 {
			t.Fatalf("reminder payload = %v", e.Payload)
		}
	}
	clock.Add(time.Hour)
	m2 := marker("marker 2")
	expect(t, cmdCh, hook.ch, escalation.EventOpened, m2)

	// The ack is sent; reminders stop; the decision is sent.
	h.sup.Decide(ctx, esc.ID, escalation.Ack, "")
	expect(t, cmdCh, hook.ch, escalation.EventAcked, esc.ID)
	h.sup.Decide(ctx, m2, escalation.Event(escalation.Abort), "")
	expect(t, cmdCh, hook.ch, escalation.EventResolved, m2)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	// A restart sends nothing again; what happened meanwhile is sent.
	if _, err := Decide(ctx, h.store, identity.Operator(), esc.ID, escalation.Event(escalation.Resume), "fixed"); err != nil {
		t.Fatal(err)
	}
	h2 := &harness{t: t, store: h.store, layout: h.layout, notices: make(chan lifecycle.Notice, 1000), eng: h.eng, wt: h.wt, prompts: h.prompts}
	h2.sup = h2.newSupervisor(h.sup.cfg)
	h2.sup.clock = clock
	h2.sup.desk = newDesk(h2.sup.deskDeps())
	h2.start()
	if e := expect(t, cmdCh, hook.ch, escalation.EventResolved, esc.ID); e.Payload["note"] != "fixed" || e.Payload["decision"] != "resume" {
		t.Fatalf("resolved payload = %v", e.Payload)
	}
	clock.Add(24 * time.Hour)
	h2.sup.EscalationChanged()
	m3, _, _ := h2.sup.Raise(ctx, escalation.Draft{Kind: escalation.KindAgent, Severity: escalation.Info, Summary: "marker 3"})
	expect(t, cmdCh, hook.ch, escalation.EventOpened, m3.ID)
	if err := h2.stop(); err != nil {
		t.Fatal(err)
	}

	// An escalation raised while no supervisor runs ('swarm escalate'
	// then) is sent when one starts.
	offline, _, err := Raise(ctx, h.store, escalation.Draft{Kind: escalation.KindAgent, Severity: escalation.Warning, Summary: "raised while swarm was down"})
	if err != nil {
		t.Fatal(err)
	}
	h3 := &harness{t: t, store: h.store, layout: h.layout, notices: make(chan lifecycle.Notice, 1000), eng: h.eng, wt: h.wt, prompts: h.prompts}
	h3.sup = h3.newSupervisor(h.sup.cfg)
	h3.sup.clock = clock
	h3.sup.desk = newDesk(h3.sup.deskDeps())
	h3.start()
	if e := expect(t, cmdCh, hook.ch, escalation.EventOpened, offline.ID); e.Payload["summary"] != "raised while swarm was down" {
		t.Fatalf("offline raise payload = %v", e.Payload)
	}
}

// TestNotifyRetriesAndFiltersBySeverity: a webhook that fails is retried
// with backoff and takes the event once; a failing command is logged and
// retried later, never fatal; min_severity drops the rest.
func TestNotifyRetriesAndFiltersBySeverity(t *testing.T) {
	cmd, cmdCh := fifoHook(t)
	hook := newWebhook(t)
	hook.fail.Store(2)
	h := notifyHarness(t, nil, cmd, hook.URL, "min_severity = \"warning\"\n")
	ctx := context.Background()
	h.start()
	h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	if _, _, err := h.sup.Raise(ctx, escalation.Draft{Kind: escalation.KindApproval, Summary: "info: not sent"}); err != nil {
		t.Fatal(err)
	}
	esc, _, err := h.sup.Raise(ctx, escalation.Draft{Kind: escalation.KindAgent, Summary: "warning: sent"})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, cmdCh, hook.ch, escalation.EventOpened, esc.ID)
	if n := hook.hits.Load(); n != 3 {
		t.Fatalf("webhook hits = %d, want 2 failures and 1 success", n)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if e, _ := h.store.Escalation(ctx, esc.ID); e.Notified.State != escalation.Open || e.Notified.At == nil {
		t.Fatalf("bookkeeping = %+v", e.Notified)
	}

	// A command that fails everywhere records nothing and waits to retry.
	n := newNotifier(config.Notify{Command: []string{"sh", "-c", "echo nope >&2; exit 3"}, MinSeverity: escalation.Info, Timeout: 5 * time.Second},
		t.TempDir(), h.store, realClock{}, h.sup.log, func() {})
	n.backoff = time.Millisecond
	var logs safeBuffer
	n.log = slogTo(&logs)
	other, _, _ := Raise(ctx, h.store, escalation.Draft{Kind: escalation.KindAgent, Summary: "fails"})
	n.deliver(ctx, notifyJob{esc: other, event: escalation.EventOpened})
	if e, _ := h.store.Escalation(ctx, other.ID); e.Notified.At != nil {
		t.Fatalf("a failed delivery was recorded: %+v", e.Notified)
	}
	if n.failures[other.ID] != 1 || !n.retryAt[other.ID].After(time.Now()) {
		t.Fatalf("no retry planned: %v %v", n.failures, n.retryAt)
	}
	if !strings.Contains(logs.String(), "exit status 3: nope") || !strings.Contains(logs.String(), "3 attempts") {
		t.Fatalf("log = %s", logs.String())
	}
}

func TestNotifyDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hourAgo := now.Add(-time.Hour)
	n := newNotifier(config.Notify{RemindEvery: time.Hour, MaxReminders: 3}, "", nil, nil, nil, nil)
	for _, tt := range []struct {
		name  string
		e     escalation.Escalation
		event string
		at    time.Time
	}{
		{"new", escalation.Escalation{State: escalation.Open, CreatedAt: now}, escalation.EventOpened, now},
		{"first reminder", escalation.Escalation{State: escalation.Open, Notified: escalation.Notified{State: escalation.Open, At: &hourAgo}}, escalation.EventReminder, now},
		{"next reminder", escalation.Escalation{State: escalation.Open, Notified: escalation.Notified{State: escalation.Open, At: &hourAgo, Reminders: 2, LastRemindedAt: &now}}, escalation.EventReminder, now.Add(time.Hour)},
		{"reminders spent", escalation.Escalation{State: escalation.Open, Notified: escalation.Notified{State: escalation.Open, At: &hourAgo, Reminders: 3}}, "", time.Time{}},
		{"acked", escalation.Escalation{State: escalation.Acked, CreatedAt: now, Notified: escalation.Notified{State: escalation.Open, At: &hourAgo}}, escalation.EventAcked, now},
		{"acked, sent", escalation.Escalation{State: escalation.Acked, Notified: escalation.Notified{State: escalation.Acked, At: &hourAgo}}, "", time.Time{}},
		{"acked, never opened", escalation.Escalation{State: escalation.Acked}, "", time.Time{}},
		{"resolved after ack", escalation.Escalation{State: escalation.Resolved, CreatedAt: now, Notified: escalation.Notified{State: escalation.Acked, At: &hourAgo}}, escalation.EventResolved, now},
		{"resolved, never opened", escalation.Escalation{State: escalation.Resolved}, "", time.Time{}},
	} {
		event, at, ok := n.due(tt.e)
		if event != tt.event || ok != (tt.event != "") || ok && !at.Equal(tt.at) {
			t.Errorf("%s: due = %q at %s (%v), want %q at %s", tt.name, event, at, ok, tt.event, tt.at)
		}
	}
}

// TestEscalationNoticesWithoutNotify: without [notify] there is no
// notifier, and escalations still make notices and events.
func TestEscalationNoticesWithoutNotify(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	if h.sup.desk.notifier != nil {
		t.Fatal("a notifier without [notify]")
	}
	h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	e, _, _ := h.sup.Raise(context.Background(), escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Summary: "fyi"})
	n := h.waitNotice("the escalation", func(n lifecycle.Notice) bool { return n.Kind == lifecycle.NoticeEscalation })
	if n.Agent != "alpha" || !strings.HasPrefix(n.Text, "escalation 1 opened (warning agent): fyi") || n.Escalation.ID != e.ID {
		t.Fatalf("notice = %+v", n)
	}
	h.send(message.Draft{From: "operator", To: "alpha", Body: "hi"})
	if evs, _ := h.store.Events(context.Background(), mailbox.EventFilter{Agent: "alpha"}); len(evs) == 0 {
		t.Fatal("no events")
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *safeBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
