package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

// fakeEngine hands every session to the test, which decides how it ends.
type fakeEngine struct {
	name string
	runs chan *fakeRun
	work func(agent string, seq int64) bool
}

type fakeRun struct {
	s      *engine.Session
	ctx    context.Context
	finish chan engine.Result
}

func (e *fakeEngine) Name() string { return e.name }
func (e *fakeEngine) Run(ctx context.Context, s *engine.Session) engine.Result {
	fr := &fakeRun{s: s, ctx: ctx, finish: make(chan engine.Result, 1)}
	e.runs <- fr
	select {
	case res := <-fr.finish:
		return res
	case <-ctx.Done():
		return engine.Result{Outcome: engine.Cancelled, Cause: context.Cause(ctx)}
	}
}
func (e *fakeEngine) HasWork(agent string, seq int64) bool {
	return e.work != nil && e.work(agent, seq)
}

type fakeWorktrees struct {
	root string
	// unlocked counts RemoveStaleLock calls, by agent.
	mu       sync.Mutex
	unlocked map[string]int
	// guard, when set, makes the guard of each of agent's sessions.
	guard func(agent string) *fakeGuard
}

func (w *fakeWorktrees) Preflight(context.Context) error { return nil }
func (w *fakeWorktrees) Ensure(_ context.Context, agent string) (string, string, error) {
	p := filepath.Join(w.root, agent)
	return p, "swarm/" + agent, os.MkdirAll(p, 0o755)
}
func (w *fakeWorktrees) Lock(context.Context, string, string) error { return nil }
func (w *fakeWorktrees) Unlock(context.Context, string) error       { return nil }
func (w *fakeWorktrees) RemoveStaleLock(agent string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unlocked == nil {
		w.unlocked = map[string]int{}
	}
	w.unlocked[agent]++
	return false, nil
}
func (w *fakeWorktrees) Push(context.Context, string, string) error { return nil }
func (w *fakeWorktrees) Guard(_ context.Context, agent string) (Guard, error) {
	if w.guard != nil {
		if g := w.guard(agent); g != nil {
			return g, nil
		}
	}
	return &fakeGuard{}, nil
}

// fakeGuard finds prior when it is made and, at Check, prior plus what
// check returns.
type fakeGuard struct {
	prior []Finding
	check func() ([]Finding, error)
}

func (g *fakeGuard) Prior() []Finding { return g.prior }
func (g *fakeGuard) Check(context.Context) ([]Finding, error) {
	found := append([]Finding(nil), g.prior...)
	if g.check == nil {
		return found, nil
	}
	more, err := g.check()
	return append(found, more...), err
}

// fakeFinding is a guard finding.
type fakeFinding struct {
	kind, key, text string
	blame           []string
}

func (f fakeFinding) Escalation() string { return f.kind }
func (f fakeFinding) Blame() []string    { return f.blame }
func (f fakeFinding) Dedupe() string     { return f.key }
func (f fakeFinding) String() string     { return f.text }

type fakePrompts struct {
	mu    sync.Mutex
	reqs  []PromptRequest
	tasks *fakeTasks // when set, the prompt lists its ready tasks
}

func (p *fakePrompts) Build(_ context.Context, req PromptRequest) (Prompt, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	text := fmt.Sprintf("prompt for %s session %d with %d message(s)", req.Agent.Name, req.Seq, len(req.Mail))
	if req.Interrupt != nil {
		text += fmt.Sprintf("\n### Interrupt Context\nsession %d was interrupted by %s", req.Interrupt.Seq, req.Interrupt.Reason)
	}
	var ids []string
	if p.tasks != nil {
		ids, _ = p.tasks.ReadyIDs(context.Background())
	}
	return Prompt{Text: text, TaskIDs: ids}, nil
}

type fakeTasks struct {
	mu  sync.Mutex
	ids []string
}

func (f *fakeTasks) set(ids ...string) { f.mu.Lock(); f.ids = ids; f.mu.Unlock() }
func (f *fakeTasks) ReadyIDs(context.Context) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...), true
}
func (f *fakeTasks) Board(string, string) engine.TaskBoard { return nil }

type harness struct {
	t       *testing.T
	history []lifecycle.Notice // notices read so far; used marks the ones a wait matched
	used    []bool
	once    sync.Once
	runErr  error
	store   mailbox.Store
	sup     *Supervisor
	eng     *fakeEngine
	wt      *fakeWorktrees
	prompts *fakePrompts
	layout  repo.Layout
	notices chan lifecycle.Notice
	cancel  context.CancelCauseFunc
	done    chan error
}

const baseConfig = `
[defaults]
engine = "script"
interrupt_grace = "5s"
[errors]
backoff_min = "1ms"
backoff_max = "2ms"
max_consecutive = 3
[liveness]
nudge_after = "0s"
task_poll = "1h"
`

func newHarness(t *testing.T, agents string, extra ...string) *harness {
	t.Helper()
	return newHarnessConfig(t, baseConfig+strings.Join(extra, "\n")+agents)
}

// newHarnessConfig builds a harness from a whole swarm.toml.
func newHarnessConfig(t *testing.T, toml string) *harness {
	t.Helper()
	root := t.TempDir()
	cfg, err := config.Parse([]byte(toml), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	store, err := sqlite.Open(context.Background(), l.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := &harness{t: t, store: store, layout: l, notices: make(chan lifecycle.Notice, 1000),
		eng: &fakeEngine{name: "script", runs: make(chan *fakeRun, 100)}, wt: &fakeWorktrees{root: filepath.Join(root, "wt")}, prompts: &fakePrompts{}}
	h.sup = h.newSupervisor(cfg)
	return h
}

func (h *harness) newSupervisor(cfg *config.Config) *Supervisor {
	return h.newSupervisorWith(cfg, nil)
}

func (h *harness) newSupervisorWith(cfg *config.Config, tasks Tasks) *Supervisor {
	sup, err := New(Options{
		Tasks:     tasks,
		Config:    cfg,
		Layout:    h.layout,
		Store:     h.store,
		Engines:   func(config.Agent) (engine.Engine, error) { return h.eng, nil },
		Worktrees: h.wt,
		Prompts:   h.prompts,
		Rand:      func() float64 { return 0.5 },
		Notify:    func(n lifecycle.Notice) { h.notices <- n },
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return sup
}

func (h *harness) start() {
	ctx, cancel := context.WithCancelCause(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.sup.Run(ctx) }()
	h.t.Cleanup(func() { h.stop() })
}

// stop cancels Run and waits for it, once.
func (h *harness) stop() error {
	h.once.Do(func() {
		h.cancel(ErrShutdown)
		h.runErr = <-h.done
	})
	return h.runErr
}

// waitFor returns the next notice, not matched before, of agent reaching
// state to, reading more notices as needed and failing after a generous
// deadline so a broken supervisor cannot hang the suite.
func (h *harness) waitFor(agent string, to lifecycle.State) lifecycle.Notice {
	h.t.Helper()
	return h.waitForSeq(agent, to, 0)
}

// waitForSeq is waitFor for a given session number (0: any).
func (h *harness) waitForSeq(agent string, to lifecycle.State, seq int64) lifecycle.Notice {
	h.t.Helper()
	match := func(i int) bool {
		n := h.history[i]
		return !h.used[i] && n.Kind == "transition" && n.Agent == agent && n.To == to && (seq == 0 || n.Seq == seq)
	}
	for i := range h.history {
		if match(i) {
			h.used[i] = true
			return h.history[i]
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case n := <-h.notices:
			h.history = append(h.history, n)
			h.used = append(h.used, false)
			if i := len(h.history) - 1; match(i) {
				h.used[i] = true
				return n
			}
		case <-deadline:
			h.t.Fatalf("%s never reached %s", agent, to)
		}
	}
}

func (h *harness) nextRun() *fakeRun {
	h.t.Helper()
	select {
	case r := <-h.eng.runs:
		return r
	case <-time.After(20 * time.Second):
		h.t.Fatal("no session started")
		return nil
	}
}

func (h *harness) send(d message.Draft) message.Message {
	h.t.Helper()
	m, err := h.sup.Poster().Post(context.Background(), d)
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

func (h *harness) states(agent string) []string {
	evs, err := h.store.Events(context.Background(), mailbox.EventFilter{Agent: agent, Kind: fsm.SubjectAgent})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.To)
	}
	return out
}

func TestStartRunIdleAndWake(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n")
	h.start()
	seen := map[string]*fakeRun{}
	for range 2 {
		r := h.nextRun()
		seen[r.s.Agent] = r
	}
	for _, name := range []string{"alpha", "bravo"} {
		r := seen[name]
		if r == nil || r.s.Seq != 1 || !strings.Contains(r.s.Prompt, "session 1") {
			t.Fatalf("%s: first session = %+v", name, r)
		}
		r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 10, OutputTokens: 2}}
		h.waitFor(name, lifecycle.Idle)
	}
	got := strings.Join(h.states("alpha"), " ")
	if want := "Initializing BuildingPrompt Spawning Running SessionComplete Idle"; got != want {
		t.Fatalf("alpha states = %s, want %s", got, want)
	}
	// Status mail does not wake an idle agent; a message does, for exactly one session.
	h.send(message.Draft{From: "operator", To: "alpha", Body: "fyi", Kind: message.KindStatus})
	m := h.send(message.Draft{From: "bravo", To: "alpha", Body: "please review"})
	r := h.nextRun()
	if r.s.Agent != "alpha" || r.s.Seq != 2 || len(r.s.Mail) != 2 {
		t.Fatalf("woken session = %s/%d with %d mail", r.s.Agent, r.s.Seq, len(r.s.Mail))
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	got2, _ := h.store.Message(context.Background(), m.ID)
	if got2.State != message.Done || *got2.SessionSeq != 2 {
		t.Fatalf("message = %+v", got2)
	}
	select {
	case r := <-h.eng.runs:
		t.Fatalf("unexpected session %s/%d", r.s.Agent, r.s.Seq)
	default:
	}
	a, _ := h.store.Agent(context.Background(), "alpha")
	if a.Tokens != 12 || a.SessionSeq != 2 {
		t.Fatalf("alpha row = %+v", a)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alpha", "bravo"} {
		a, _ := h.store.Agent(context.Background(), name)
		if a.State != lifecycle.Stopped {
			t.Errorf("%s ended %s", name, a.State)
		}
	}
}

func TestUrgentMailInterrupts(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	r1 := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	normal := h.send(message.Draft{From: "operator", To: "alpha", Body: "later"})
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "stop", Urgency: message.Urgent})
	n := h.waitFor("alpha", lifecycle.Interrupting)
	if !strings.Contains(n.Cause, fmt.Sprintf("urgent mail #%d", m.ID)) {
		t.Fatalf("cause = %q", n.Cause)
	}
	<-r1.ctx.Done()
	var ue *UrgentError
	if !errors.As(context.Cause(r1.ctx), &ue) || ue.Message.ID != m.ID {
		t.Fatalf("session cause = %v", context.Cause(r1.ctx))
	}
	r2 := h.nextRun()
	if r2.s.Seq != 2 || !strings.Contains(r2.s.Prompt, "Interrupt Context") || len(r2.s.Mail) != 2 || r2.s.Mail[0].ID != m.ID {
		t.Fatalf("session 2 = seq %d prompt %q mail %+v", r2.s.Seq, r2.s.Prompt, r2.s.Mail)
	}
	r2.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	for _, id := range []int64{m.ID, normal.ID} {
		got, _ := h.store.Message(context.Background(), id)
		if got.State != message.Done || *got.SessionSeq != 2 {
			t.Fatalf("message %d = %+v", id, got)
		}
	}
	s1, _ := h.store.Session(context.Background(), "alpha", 1)
	if s1.State != mailbox.SessionInterrupted {
		t.Fatalf("session 1 = %s", s1.State)
	}
	if got := strings.Join(h.states("alpha"), " "); !strings.Contains(got, "Running Interrupting BuildingPrompt Spawning Running SessionComplete Idle") {
		t.Fatalf("states = %s", got)
	}
}

func TestUrgentMailDuringSpawningInterruptsAtOnce(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	// Urgent mail queued before the first prompt is built goes into
	// session 1 itself; mail that arrives after delivery must interrupt.
	h.start()
	r1 := h.nextRun()
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "now", Urgency: message.Urgent})
	h.waitFor("alpha", lifecycle.Interrupting)
	<-r1.ctx.Done()
	r2 := h.nextRun()
	if len(r2.s.Mail) != 1 || r2.s.Mail[0].ID != m.ID {
		t.Fatalf("session 2 mail = %+v", r2.s.Mail)
	}
	r2.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
}

func TestFailuresBackOffThenStop(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "work"})
	for i := range 3 {
		r := h.nextRun()
		r.finish <- engine.Result{Outcome: engine.Failed, Err: errors.New("model exploded")}
		if i < 2 {
			h.waitFor("alpha", lifecycle.CoolingDown)
		}
	}
	n := h.waitFor("alpha", lifecycle.Stopped)
	if !strings.Contains(n.Cause, "stopping after 3 consecutive") {
		t.Fatalf("cause = %q", n.Cause)
	}
	// With its only agent stopped, the supervisor ends, and says why.
	if err := <-h.done; err == nil || !strings.Contains(err.Error(), "every agent stopped: alpha: session 3 failed") {
		t.Fatalf("Run = %v", err)
	}
	h.once.Do(func() {}) // Run has returned; nothing left to stop
	a, _ := h.store.Agent(context.Background(), "alpha")
	if a.ConsecutiveErrors != 3 || a.TotalErrors != 3 {
		t.Fatalf("counters = %+v", a)
	}
	got, _ := h.store.Message(context.Background(), m.ID)
	if got.State != message.Queued || got.Shown < 2 {
		t.Fatalf("message after failures = %+v", got)
	}
}

func TestGuardFindingFailsTheSession(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.wt.guard = func(string) *fakeGuard {
		return &fakeGuard{check: func() ([]Finding, error) {
			return []Finding{fakeFinding{kind: "branch_violation", key: "base_moved:main:1", text: "alpha committed on main", blame: []string{"alpha"}}}, nil
		}}
	}
	h.start()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.CoolingDown)
	ms, _ := h.store.Inbox(context.Background(), message.Operator, mailbox.Filter{})
	if len(ms) != 1 || ms[0].Kind != message.KindStatus || !strings.Contains(ms[0].Body, "alpha committed on main") {
		t.Fatalf("operator inbox = %+v", ms)
	}
	s, _ := h.store.Session(context.Background(), "alpha", 1)
	if s.State != mailbox.SessionFailed {
		t.Fatalf("session = %s", s.State)
	}
}

func TestShutdownStopsRunningSessions(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "in flight"})
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(r.ctx), ErrShutdown) {
		t.Fatalf("session cause = %v", context.Cause(r.ctx))
	}
	a, _ := h.store.Agent(context.Background(), "alpha")
	if a.State != lifecycle.Stopped {
		t.Fatalf("state = %s", a.State)
	}
	got, _ := h.store.Message(context.Background(), m.ID)
	if got.State != message.Queued || got.Shown != 1 {
		t.Fatalf("message = %+v", got)
	}
}

func TestRecoveryAfterCrash(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	ctx := context.Background()
	// What a kill -9 during session 3 leaves behind.
	h.store.RegisterAgent(ctx, mailbox.AgentInfo{Name: "alpha"})
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "in flight"})
	for _, st := range []string{"Initializing", "BuildingPrompt", "Spawning", "Running"} {
		prev := map[string]string{"Initializing": "Stopped", "BuildingPrompt": "Initializing", "Spawning": "BuildingPrompt", "Running": "Spawning"}[st]
		if err := h.store.InTx(ctx, func(tx mailbox.Tx) error {
			_, err := tx.Transition(fsm.Change{Kind: fsm.SubjectAgent, Subject: "alpha", From: prev, To: st, Seq: 3})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	h.store.InTx(ctx, func(tx mailbox.Tx) error {
		if _, err := tx.Deliver("alpha", 3, nil); err != nil {
			return err
		}
		return tx.StartSession(mailbox.SessionStart{Agent: "alpha", Seq: 3, Engine: "script", Prompt: "p"})
	})
	h.start()
	r := h.nextRun()
	if r.s.Seq != 4 || len(r.s.Mail) != 1 || r.s.Mail[0].ID != m.ID {
		t.Fatalf("after recovery: seq %d mail %+v", r.s.Seq, r.s.Mail)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	s3, _ := h.store.Session(ctx, "alpha", 3)
	if s3.State != mailbox.SessionCrashed {
		t.Fatalf("session 3 = %s", s3.State)
	}
	got, _ := h.store.Message(ctx, m.ID)
	if got.State != message.Done || *got.SessionSeq != 4 || got.Shown != 1 {
		t.Fatalf("message = %+v", got)
	}
	evs, _ := h.store.Events(ctx, mailbox.EventFilter{Agent: "alpha"})
	if evs[4].From == nil || *evs[4].From != "Running" || evs[4].To != "Initializing" || evs[4].Cause != "recovered" {
		t.Fatalf("recovery event = %+v", evs[4])
	}
}

func TestScriptedWorkKeepsGoing(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.eng.work = func(agent string, seq int64) bool { return seq <= 2 }
	h.start()
	for seq := int64(1); seq <= 2; seq++ {
		r := h.nextRun()
		if r.s.Seq != seq {
			t.Fatalf("seq = %d, want %d", r.s.Seq, seq)
		}
		r.finish <- engine.Result{Outcome: engine.Success}
	}
	h.waitFor("alpha", lifecycle.Idle)
}

func TestPauseAndResume(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	resp := h.sup.handle(context.Background(), control.Request{Op: control.OpPause, Agent: "alpha"}, nil)
	if !resp.OK {
		t.Fatal(resp.Error)
	}
	// The running session finishes first.
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Paused)
	h.send(message.Draft{From: "operator", To: "alpha", Body: "while paused"})
	h.sup.handle(context.Background(), control.Request{Op: control.OpResume, Agent: "alpha"}, nil)
	h.waitFor("alpha", lifecycle.BuildingPrompt)
	r2 := h.nextRun()
	r2.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	if resp := h.sup.handle(context.Background(), control.Request{Op: control.OpPause, Agent: "nobody"}, nil); resp.OK {
		t.Fatal("pause of an unknown agent succeeded")
	}
}

func TestBoundaryInterruptInjects(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\ninterrupt = \"boundary\"\n")
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "also update the docs", Urgency: message.Urgent})
	if r.s.Interject == nil {
		t.Fatal("no Interject hook for a boundary agent")
	}
	texts := r.s.Interject(r.ctx)
	if len(texts) != 1 || texts[0] != "[URGENT] From operator: also update the docs" {
		t.Fatalf("interject = %q", texts)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	got, _ := h.store.Message(context.Background(), m.ID)
	if got.State != message.Done || *got.SessionSeq != 1 {
		t.Fatalf("message = %+v", got)
	}
	states := strings.Join(h.states("alpha"), " ")
	if strings.Contains(states, "Interrupting") || !strings.Contains(states, "Running Running SessionComplete") {
		t.Fatalf("states = %s", states)
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := time.Second, 5*time.Minute
	for _, tt := range []struct {
		n    int
		rnd  float64
		want time.Duration
	}{
		{1, 0.5, time.Second}, {2, 0.5, 2 * time.Second}, {3, 0.5, 4 * time.Second},
		{20, 0.5, 5 * time.Minute}, {1, 0, 800 * time.Millisecond}, {1, 0.999999, 1199999600 * time.Nanosecond},
	} {
		if got := Backoff(tt.n, lo, hi, tt.rnd); got.Round(time.Microsecond) != tt.want.Round(time.Microsecond) {
			t.Errorf("Backoff(%d, %v) = %v, want %v", tt.n, tt.rnd, got, tt.want)
		}
	}
}

func TestIdleAgentsAreNudged(t *testing.T) {
	h := newHarnessConfig(t, `
[defaults]
engine = "script"
[liveness]
nudge_after = "10ms"
nudge_every = "10ms"
max_nudges = 2
task_poll = "1h"
[[agent]]
name = "alpha"
`)
	h.start()
	for seq := int64(1); seq <= 3; seq++ {
		r := h.nextRun()
		if r.s.Seq != seq {
			t.Fatalf("session %d, want %d", r.s.Seq, seq)
		}
		if seq > 1 && (len(r.s.Mail) != 1 || !strings.Contains(r.s.Mail[0].Body, fmt.Sprintf("nudge %d of 2", seq-1))) {
			t.Fatalf("session %d mail = %+v", seq, r.s.Mail)
		}
		r.finish <- engine.Result{Outcome: engine.Success}
	}
	h.waitForSeq("alpha", lifecycle.Idle, 3)
	a, _ := h.store.Agent(context.Background(), "alpha")
	if a.Nudges != 2 {
		t.Fatalf("nudges = %d, want the maximum 2", a.Nudges)
	}
	nudges, _ := h.store.Inbox(context.Background(), "alpha", mailbox.Filter{})
	for _, m := range nudges {
		if m.Kind != message.KindNudge || m.From != message.Operator {
			t.Fatalf("nudge = %+v", m)
		}
	}
	// Real mail starts the count over.
	h.send(message.Draft{From: "operator", To: "alpha", Body: "real work"})
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitForSeq("alpha", lifecycle.Idle, 4)
	if a, _ := h.store.Agent(context.Background(), "alpha"); a.Nudges != 0 {
		t.Fatalf("nudges after real mail = %d", a.Nudges)
	}
}

func TestNewReadyTaskWakesIdleAgent(t *testing.T) {
	h := newHarnessConfig(t, `
[defaults]
engine = "script"
[liveness]
nudge_after = "0s"
task_poll = "10ms"
[[agent]]
name = "coder"
[[agent]]
name = "critic"
mode = "review"
`)
	tasks := &fakeTasks{}
	h.prompts.tasks = tasks
	h.sup = h.newSupervisorWith(h.sup.cfg, tasks)
	h.start()
	for range 2 {
		h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	}
	h.waitFor("coder", lifecycle.Idle)
	h.waitFor("critic", lifecycle.Idle)
	tasks.set("bd-1")
	r := h.nextRun()
	if r.s.Agent != "coder" || r.s.Seq != 2 {
		t.Fatalf("woken = %s/%d; only coder may claim tasks", r.s.Agent, r.s.Seq)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	// bd-1 was listed in that completed session: it is no longer new.
	n := h.waitFor("coder", lifecycle.Idle)
	if n.Seq != 2 {
		t.Fatalf("idle after session %d", n.Seq)
	}
	tasks.set("bd-1", "bd-2")
	r = h.nextRun()
	if r.s.Agent != "coder" || r.s.Seq != 3 {
		t.Fatalf("woken = %s/%d", r.s.Agent, r.s.Seq)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("coder", lifecycle.Idle)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if a, _ := h.store.Agent(context.Background(), "critic"); a.SessionSeq != 1 {
		t.Fatalf("review agent ran %d sessions", a.SessionSeq)
	}
}

func TestPauseAfterAnInterruptAndForAStoppedAgent(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	if resp := h.sup.handle(context.Background(), control.Request{Op: control.OpPause, Agent: "alpha"}, nil); !resp.OK {
		t.Fatal(resp.Error)
	}
	// Urgent mail cuts the session short; the pause still holds.
	h.send(message.Draft{From: "operator", To: "alpha", Body: "stop", Urgency: message.Urgent})
	<-r.ctx.Done()
	h.waitFor("alpha", lifecycle.Paused)
	select {
	case r := <-h.eng.runs:
		t.Fatalf("a session started while paused: %d", r.s.Seq)
	default:
	}
	h.sup.handle(context.Background(), control.Request{Op: control.OpResume, Agent: "alpha"}, nil)
	r2 := h.nextRun()
	if len(r2.s.Mail) != 1 {
		t.Fatalf("resumed session mail = %+v", r2.s.Mail)
	}
	r2.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// The runner has ended: pausing it again is an error, not a hang.
	for range 6 {
		resp := h.sup.handle(context.Background(), control.Request{Op: control.OpPause, Agent: "alpha"}, nil)
		if resp.OK || !strings.Contains(resp.Error, "stopped") {
			t.Fatalf("pause of a stopped agent = %+v", resp)
		}
	}
}

// A stop between building a prompt and starting its session used to leave
// the mail delivered forever. Recovery settles it whatever the state, and a
// stop in Spawning settles it at once.
func TestRecoveryOfAStoppedAgentWithDeliveredMail(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	ctx := context.Background()
	h.store.RegisterAgent(ctx, mailbox.AgentInfo{Name: "alpha"})
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "stranded"})
	h.store.InTx(ctx, func(tx mailbox.Tx) error {
		if _, err := tx.Deliver("alpha", 1, nil); err != nil {
			return err
		}
		return tx.StartSession(mailbox.SessionStart{Agent: "alpha", Seq: 1, Engine: "script", Prompt: "p"})
	})
	// The agent row says Stopped, as after the old shutdown path.
	h.start()
	r := h.nextRun()
	if r.s.Seq != 2 {
		t.Fatalf("seq = %d, want 2: session 1 exists", r.s.Seq)
	}
	if len(r.s.Mail) != 1 || r.s.Mail[0].ID != m.ID {
		t.Fatalf("mail = %+v, want the stranded message", r.s.Mail)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	got, _ := h.store.Message(ctx, m.ID)
	if got.State != message.Done {
		t.Fatalf("message = %+v", got)
	}
}

func TestStopInSpawningRequeuesMail(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	ctx := context.Background()
	m := h.send(message.Draft{From: "operator", To: "alpha", Body: "in the window"})
	h.start()
	r := h.nextRun() // the session is built and handed to the engine
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	<-r.ctx.Done()
	got, _ := h.store.Message(ctx, m.ID)
	if got.State != message.Queued || got.Shown != 1 {
		t.Fatalf("message = %+v, want queued again", got)
	}
	s1, _ := h.store.Session(ctx, "alpha", 1)
	if s1.State == mailbox.SessionRunning {
		t.Fatal("session 1 left running")
	}
}

// OpMail wakes the recipients, then answers what each was doing: only the
// first urgent message for a running session interrupts it.
func TestMailAnswerSaysWhatHappened(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n[[agent]]\nname = \"soft\"\ninterrupt = \"boundary\"\n")
	// The mail below is posted without a waker and announced by OpMail
	// alone: the change feed must not wake bravo first (CI saw it).
	h.sup.opts.PollInterval = time.Hour
	parked := idleSignal(h.sup, "bravo")
	h.start()
	runs := map[string]*fakeRun{}
	for range 3 {
		r := h.nextRun()
		runs[r.s.Agent] = r
	}
	h.waitFor("alpha", lifecycle.Running)
	h.waitFor("soft", lifecycle.Running)
	runs["bravo"].finish <- engine.Result{Outcome: engine.Success}
	<-parked // bravo looked for work, found none, and waits

	p := mailbox.NewPoster(h.store, []string{"alpha", "bravo", "soft"}, nil)
	var ms []message.Message
	for _, d := range []message.Draft{
		{To: "alpha", Urgency: message.Urgent},
		{To: "alpha", Urgency: message.Urgent},
		{To: "alpha"},
		{To: "bravo", Urgency: message.Urgent},
		{To: "soft", Urgency: message.Urgent},
		{To: "operator", From: "alpha"},
	} {
		if d.From == "" {
			d.From = "operator"
		}
		d.Body = "x"
		m, err := p.Post(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	ms = append(ms, message.Message{ID: 99, From: "operator", To: "gamma", Urgency: message.Urgent})
	resp := h.sup.handle(context.Background(), control.Request{Op: control.OpMail, Mail: ms}, nil)
	var got []control.Delivery
	if err := json.Unmarshal(resp.Data, &got); !resp.OK || err != nil {
		t.Fatalf("answer %+v: %v", resp, err)
	}
	want := []control.Delivery{
		{ID: ms[0].ID, To: "alpha", Started: true, State: "Running", Interrupted: true},
		{ID: ms[1].ID, To: "alpha", Started: true, State: "Running"},
		{ID: ms[2].ID, To: "alpha", Started: true, State: "Running"},
		{ID: ms[3].ID, To: "bravo", Started: true, State: "Idle"},
		{ID: ms[4].ID, To: "soft", Started: true, State: "Running", Joins: true},
		{ID: ms[5].ID, To: "operator"},
		{ID: 99, To: "gamma"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries:\n got %+v\nwant %+v", got, want)
	}
	// The wake happened: alpha's session was cut short by the first one.
	h.waitFor("alpha", lifecycle.Interrupting)
	<-runs["alpha"].ctx.Done()
}

// TestMailAnswerAfterTheFeedWokeIt: when the change feed found the mail
// and woke its recipient before the sender's OpMail came (a loaded
// machine), the answer still says what the recipient was doing when the
// mail came, not what the wake-up made of it.
func TestMailAnswerAfterTheFeedWokeIt(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"bravo\"\n")
	h.sup.opts.PollInterval = time.Hour
	parked := idleSignal(h.sup, "bravo")
	h.start()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success}
	<-parked
	p := mailbox.NewPoster(h.store, []string{"bravo"}, nil)
	m, err := p.Post(context.Background(), message.Draft{From: "operator", To: "bravo", Body: "look", Urgency: message.Urgent})
	if err != nil {
		t.Fatal(err)
	}
	h.sup.Wake(context.Background(), []message.Message{m}) // as the feed does
	r2 := h.nextRun()                                      // bravo's next session runs
	resp := h.sup.handle(context.Background(), control.Request{Op: control.OpMail, Mail: []message.Message{m}}, nil)
	var got []control.Delivery
	if err := json.Unmarshal(resp.Data, &got); !resp.OK || err != nil {
		t.Fatalf("answer %+v: %v", resp, err)
	}
	want := []control.Delivery{{ID: m.ID, To: "bravo", Started: true, State: "Idle"}}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries:\n got %+v\nwant %+v", got, want)
	}
	r2.finish <- engine.Result{Outcome: engine.Success}
}

func TestPauseAndResumeSayWhatTheyDo(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	ctx := context.Background()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	do := func(pause bool, want string) {
		t.Helper()
		var got string
		var err error
		if pause {
			got, err = h.sup.Pause(ctx, "alpha")
		} else {
			got, err = h.sup.Resume(ctx, "alpha")
		}
		if err != nil || got != want {
			t.Fatalf("pause=%v: %q, %v; want %q", pause, got, err, want)
		}
	}
	do(true, PauseAfterSession)
	do(false, PauseCancelled) // the session had not ended
	if _, err := h.sup.Resume(ctx, "alpha"); !errors.Is(err, ErrNotPaused) || !strings.Contains(err.Error(), "alpha is not paused (it is Running)") {
		t.Fatalf("resume of a running agent: %v", err)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	do(true, PauseNow)
	h.waitFor("alpha", lifecycle.Paused)
	do(true, PauseAlready)
	do(false, Resumed)
	h.waitFor("alpha", lifecycle.Idle)
	if _, err := h.sup.Resume(ctx, "alpha"); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("resume of an idle agent: %v", err)
	}
}

// failStart is a store whose agents cannot leave Stopped: the runner fails
// on its very first transition.
type failStart struct{ mailbox.Store }

func (f failStart) InTx(ctx context.Context, fn func(tx mailbox.Tx) error) error {
	return f.Store.InTx(ctx, func(tx mailbox.Tx) error { return fn(failStartTx{tx}) })
}

type failStartTx struct{ mailbox.Tx }

func (t failStartTx) Transition(c fsm.Change) (fsm.Event, error) {
	if c.To == string(lifecycle.Initializing) {
		return fsm.Event{}, errors.New("database is locked")
	}
	return t.Tx.Transition(c)
}

// Every agent stopped: the error names each one's reason, also for a
// runner that failed while still Stopped.
func TestEveryAgentStoppedSaysWhy(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n")
	cfg := h.sup.cfg
	h.store = failStart{h.store}
	h.sup = h.newSupervisor(cfg)
	err := h.sup.Run(context.Background())
	if err == nil {
		t.Fatal("Run returned nil")
	}
	for _, want := range []string{"every agent stopped: alpha: ", "bravo: "} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), ": ;") || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("a reason is missing: %v", err)
	}
}

// idleSignal returns a channel told each time agent's runner finds no work
// and waits in Idle: a test posts mail after it, so the runner's own look
// for work cannot find that mail first.
func idleSignal(s *Supervisor, agent string) <-chan struct{} {
	ch := make(chan struct{}, 16)
	s.idleHook = func(a string) {
		if a == agent {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	return ch
}
