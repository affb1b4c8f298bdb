package swarm

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// panicky panics in every session of the agent named boom, and hands the
// others to the fake engine.
type panicky struct{ *fakeEngine }

func (e panicky) Run(ctx context.Context, s *engine.Session) engine.Result {
	if s.Agent == "boom" {
		panic("the engine fell over")
	}
	return e.fakeEngine.Run(ctx, s)
}

func TestEnginePanicFailsOnlyThatSession(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"boom\"\n[[agent]]\nname = \"calm\"\n")
	sup, err := New(Options{
		Config:    h.sup.cfg,
		Layout:    h.layout,
		Store:     h.store,
		Engines:   func(config.Agent) (engine.Engine, error) { return panicky{h.eng}, nil },
		Worktrees: h.wt,
		Prompts:   h.prompts,
		Rand:      func() float64 { return 0.5 },
		Notify:    func(n lifecycle.Notice) { h.notices <- n },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.sup = sup
	h.start()
	calm := h.nextRun() // calm's session runs while boom's panics
	n := h.waitFor("boom", lifecycle.CoolingDown)
	if !strings.Contains(n.Cause, "panicked: the engine fell over") {
		t.Fatalf("boom's cause = %q", n.Cause)
	}
	s1, err := h.store.Session(context.Background(), "boom", 1)
	if err != nil || s1.State != mailbox.SessionFailed || !strings.Contains(s1.Error, "the engine fell over") {
		t.Fatalf("boom session 1 = %+v, %v", s1, err)
	}
	logText, err := os.ReadFile(h.layout.SessionLog("boom", 1))
	if err != nil || !strings.Contains(string(logText), "panicked: the engine fell over") || !strings.Contains(string(logText), "goroutine") {
		t.Fatalf("boom's session log lacks the panic and its stack: %v\n%s", err, logText)
	}
	// The other agent and the supervisor carry on.
	calm.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("calm", lifecycle.Idle)
	m := h.send(message.Draft{From: "operator", To: "calm", Body: "still there?"})
	r := h.nextRun()
	if r.s.Agent != "calm" || len(r.s.Mail) != 1 || r.s.Mail[0].ID != m.ID {
		t.Fatalf("calm's next session = %s with %d mail", r.s.Agent, len(r.s.Mail))
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitForSeq("calm", lifecycle.Idle, 2)
	// boom stops at its error threshold; that is its own business.
	h.waitFor("boom", lifecycle.Stopped)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// previewCheck wraps the real prompt builder: just before the runner builds
// a session after an interrupt, it renders `swarm prompt --session-seq N
// --interrupted-by ID` against the same store and clock.
type previewCheck struct {
	inner PipePrompts
	req   func(seq, interruptedBy int64) PreviewRequest
	mu    sync.Mutex
	got   map[int64]string // session → preview text
	err   error
}

func (p *previewCheck) Build(ctx context.Context, req PromptRequest) (Prompt, error) {
	if req.Interrupt != nil {
		out, err := Preview(ctx, p.req(req.Seq, req.Interrupt.Message.ID))
		p.mu.Lock()
		if err != nil {
			p.err = errors.Join(p.err, err)
		}
		p.got[req.Seq] = out.Text
		p.mu.Unlock()
	}
	return p.inner.Build(ctx, req)
}

func TestPreviewIsWhatTheAgentGets(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\nrole = \"You own the API.\"\n[[agent]]\nname = \"bravo\"\n", "[worktree]\ndir = \"wt\"\n")
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	cfg := h.sup.cfg
	pc := &previewCheck{
		inner: NewPipePrompts(cfg, h.layout, h.store, nil, now, slog.Default()),
		got:   map[int64]string{},
		req: func(seq, id int64) PreviewRequest {
			a, _ := cfg.Agent("alpha")
			return PreviewRequest{Config: cfg, Layout: h.layout, Store: h.store, Agent: a, Seq: seq, InterruptedBy: id, Now: now}
		},
	}
	h.prompts = nil
	sup, err := New(Options{
		Config: cfg, Layout: h.layout, Store: h.store,
		Engines:   func(config.Agent) (engine.Engine, error) { return h.eng, nil },
		Worktrees: h.wt, Prompts: pc, Rand: func() float64 { return 0.5 },
		Notify: func(n lifecycle.Notice) { h.notices <- n },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.sup = sup
	// alpha's worktree is a real repository, so the Environment section
	// (git status, the last commits) is part of what is compared.
	wt := filepath.Join(h.wt.root, "alpha")
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, wt, "init", "-q")
	gittest.WriteFile(t, filepath.Join(wt, "api.go"), "package api\n")
	gittest.Git(t, wt, "add", ".")
	gittest.Git(t, wt, "commit", "-q", "-m", "the API")
	gittest.WriteFile(t, filepath.Join(wt, "notes.txt"), "untracked\n")
	h.send(message.Draft{From: "bravo", To: "alpha", Body: "review the schema"})
	h.start()
	var r1 *fakeRun
	for r1 == nil {
		if r := h.nextRun(); r.s.Agent == "alpha" {
			r1 = r
		} else {
			r.finish <- engine.Result{Outcome: engine.Success}
		}
	}
	h.waitFor("alpha", lifecycle.Running)
	h.send(message.Draft{From: "operator", To: "alpha", Body: "later, the docs"})
	urgent := h.send(message.Draft{From: "operator", To: "alpha", Body: "stop: prod is down", Urgency: message.Urgent})
	var r2 *fakeRun
	for r2 == nil {
		if r := h.nextRun(); r.s.Agent == "alpha" {
			r2 = r
		} else {
			r.finish <- engine.Result{Outcome: engine.Success}
		}
	}
	if r2.s.Seq != 2 {
		t.Fatalf("alpha's second session = %d", r2.s.Seq)
	}
	stored, err := h.store.Session(context.Background(), "alpha", 2)
	if err != nil {
		t.Fatal(err)
	}
	pc.mu.Lock()
	preview, perr := pc.got[2], pc.err
	pc.mu.Unlock()
	if perr != nil {
		t.Fatal(perr)
	}
	if preview != stored.Prompt {
		t.Fatalf("swarm prompt --session-seq 2 --interrupted-by %d differs from the stored prompt.\npreview:\n%s\nstored:\n%s", urgent.ID, preview, stored.Prompt)
	}
	for _, want := range []string{"notes.txt", "the API", "### Interrupt Context", "stop: prod is down", "review the schema", "later, the docs", "You own the API."} {
		if !strings.Contains(stored.Prompt, want) {
			t.Errorf("the stored prompt lacks %q", want)
		}
	}
	r2.finish <- engine.Result{Outcome: engine.Success}
	h.waitForSeq("alpha", lifecycle.Idle, 2)
}

// TestRestartStartsNoSessionWithoutWork: a restarted swarm whose agents
// have nothing to do starts no session until mail arrives.
func TestRestartStartsNoSessionWithoutWork(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// Restart on the same database.
	h2 := &harness{t: t, store: h.store, layout: h.layout, notices: make(chan lifecycle.Notice, 1000), eng: h.eng, wt: h.wt, prompts: h.prompts}
	h2.sup = h2.newSupervisor(h.sup.cfg)
	h2.start()
	n := h2.waitFor("alpha", lifecycle.Idle)
	if n.From != lifecycle.Initializing || n.Cause != "no work waiting" {
		t.Fatalf("after the restart alpha went %s → Idle (%s), want Initializing → Idle", n.From, n.Cause)
	}
	if c, err := h.store.SessionCount(context.Background()); err != nil || c != 1 {
		t.Fatalf("%d sessions after the restart, want 1: %v", c, err)
	}
	m := h2.send(message.Draft{From: "operator", To: "alpha", Body: "now there is work"})
	r = h2.nextRun()
	if r.s.Seq != 2 || len(r.s.Mail) != 1 || r.s.Mail[0].ID != m.ID {
		t.Fatalf("session after mail = %d with %+v", r.s.Seq, r.s.Mail)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h2.waitForSeq("alpha", lifecycle.Idle, 2)
}

func TestMailTrackerAnnouncesOnceAndStaysSmall(t *testing.T) {
	var tr mailTracker
	msgs := func(ids ...int64) []message.Message {
		out := make([]message.Message, len(ids))
		for i, id := range ids {
			out[i] = message.Message{ID: id}
		}
		return out
	}
	got := func(ms []message.Message) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	if f := got(tr.fresh(msgs(1, 2))); len(f) != 2 {
		t.Fatalf("fresh = %v", f)
	}
	// A poke for 4 arrives before 3 is seen: 4 waits above the mark.
	if f := got(tr.fresh(msgs(4))); len(f) != 1 || tr.low() != 2 {
		t.Fatalf("fresh = %v, mark %d", f, tr.low())
	}
	// The feed's catch-up reads 3 and 4: only 3 is news, and the mark
	// moves past both.
	if f := got(tr.fresh(msgs(3, 4))); len(f) != 1 || f[0] != 3 || tr.low() != 4 || len(tr.seen) != 0 {
		t.Fatalf("fresh = %v, mark %d, seen %v", f, tr.low(), tr.seen)
	}
	tr.advance(10)
	if f := got(tr.fresh(msgs(9, 10, 11))); len(f) != 1 || f[0] != 11 {
		t.Fatalf("after advance: %v", f)
	}
}
