package swarm

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// logLines is a supervisor log a test can wait on.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
	hit chan struct{}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.hit <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

// waitFor waits until the log has n lines containing s, failing at once
// when bad (polled meanwhile) says what went wrong instead.
func (l *logLines) waitFor(t *testing.T, s string, n int, bad func() string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		ok := strings.Count(l.buf.String(), s) >= n
		l.mu.Unlock()
		if ok {
			return
		}
		if why := bad(); why != "" {
			t.Fatal(why)
		}
		select {
		case <-l.hit:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the log never said %q:\n%s", s, l.buf.String())
		}
	}
}

// withLog rebuilds the harness's supervisor with a log the test reads.
func (h *harness) withLog() *logLines {
	l := &logLines{hit: make(chan struct{}, 1)}
	cfg := h.sup.cfg
	sup, err := New(Options{Config: cfg, Layout: h.layout, Store: h.store,
		Engines:   func(config.Agent) (engine.Engine, error) { return h.eng, nil },
		Worktrees: h.wt, Prompts: h.prompts, Rand: func() float64 { return 0.5 },
		Notify: func(n lifecycle.Notice) { h.notices <- n },
		Logger: slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		h.t.Fatal(err)
	}
	h.sup = sup
	return l
}

// writeConfig writes toml as the harness's swarm.toml, where Reload reads it.
func (h *harness) writeConfig(toml string) {
	h.t.Helper()
	path := filepath.Join(h.layout.Root, "swarm.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.sup.cfg.Path = path // before Run: nothing reads it concurrently yet
}

// clearEvent returns the event that resolved escalation id.
func (h *harness) resolvedBy(id int64) fsm.Event {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), mailbox.EventFilter{Kind: fsm.SubjectEscalation})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range evs {
		if e.Subject == escalation.Subject(id) && e.To == string(escalation.Resolved) {
			return e
		}
	}
	h.t.Fatalf("escalation %d has no resolving event", id)
	return fsm.Event{}
}

// TestBudgetHoldClearsAfterRestartWithHigherLimit (issue 28 item 11): an
// agent held by its spent budget, restarted with a higher limit, is
// released: swarm resolves the escalation (no decision) with an event
// saying why, and the waiting mail starts a session.
func TestBudgetHoldClearsAfterRestartWithHigherLimit(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n", "[budget]\ntokens = 1000\n")
	h.start()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 1200}}
	h.waitFor("alpha", lifecycle.Held)
	e := h.waitEscalation(escalation.KindBudget, escalation.Open)
	h.send(message.Draft{From: "operator", To: "alpha", Body: "more work"})
	h.stop()

	higher, err := config.Parse([]byte(baseConfig+"[budget]\ntokens = 50000\n[[agent]]\nname = \"alpha\"\n"), "swarm.toml", h.layout.Root)
	if err != nil {
		t.Fatal(err)
	}
	h2 := &harness{t: t, store: h.store, layout: h.layout, notices: make(chan lifecycle.Notice, 1000), eng: h.eng, wt: h.wt, prompts: h.prompts}
	h2.sup = h2.newSupervisor(higher)
	h2.start()
	defer h2.stop()
	r2 := h2.nextRun()
	if r2.s.Seq != 2 {
		t.Fatalf("session %d after the restart", r2.s.Seq)
	}
	got, err := h.store.Escalation(context.Background(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != escalation.Resolved || got.Decision != nil {
		t.Fatalf("escalation after the restart: %s, decision %v", got.State, got.Decision)
	}
	ev := h2.resolvedBy(e.ID)
	if want := "clear by swarm: alpha's budget is no longer spent: 1200 of 50000 work tokens in 24h"; ev.Cause != want {
		t.Fatalf("event cause %q, want %q", ev.Cause, want)
	}
	h2.waitForSeq("alpha", lifecycle.Running, 2)
}

// TestReloadReleasesBudgetHold (issue 28 items 11, 20): `swarm reload`
// with a higher limit in swarm.toml releases the agent held by its spent
// budget, without a restart, and reports what it applied.
func TestReloadReleasesBudgetHold(t *testing.T) {
	cfg := baseConfig + "[budget]\ntokens = 1000\n[[agent]]\nname = \"alpha\"\n"
	h := newHarnessConfig(t, cfg)
	h.writeConfig(cfg)
	h.start()
	defer h.stop()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 1200}}
	h.waitFor("alpha", lifecycle.Held)
	e := h.waitEscalation(escalation.KindBudget, escalation.Open)
	h.send(message.Draft{From: "operator", To: "alpha", Body: "more work"})

	// A broken file is refused with file:line; the running config stays.
	h.writeConfig(cfg + "[budget]\nbogus = 1\n")
	if _, err := h.sup.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "swarm.toml:") || !strings.Contains(err.Error(), "running configuration stays") {
		t.Fatalf("broken file: %v", err)
	}
	h.noSession()

	next := strings.Replace(cfg, "tokens = 1000", "tokens = 50000", 1)
	next = strings.Replace(next, "name = \"alpha\"\n", "name = \"alpha\"\nrole = \"You review.\"\nmode = \"review\"\nengine = \"other\"\n", 1)
	h.writeConfig(next + "[engine.other]\nkind = \"script\"\n[[agent]]\nname = \"zulu\"\n")
	rep, err := h.sup.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Applied, "|") != "[budget]: tokens 50000 per 24h, action pause|agent alpha: role, mode, budget (from its next session)" ||
		strings.Join(rep.Restart, "|") != "[engine.*]|agent alpha: engine, model or script|agent zulu: new" {
		t.Fatalf("report %+v", rep)
	}
	h.waitEscalation(escalation.KindBudget, escalation.Resolved)
	if ev := h.resolvedBy(e.ID); !strings.HasPrefix(ev.Cause, "clear by swarm: alpha's budget is no longer spent: 1200 of 50000") {
		t.Fatalf("cause %q", ev.Cause)
	}
	if n := h.waitForSeq("alpha", lifecycle.BuildingPrompt, 1); n.Cause != "released: escalation 1 cleared by swarm" {
		t.Fatalf("release cause %q", n.Cause)
	}
	if r2 := h.nextRun(); r2.s.Seq != 2 {
		t.Fatalf("session %d after the reload", r2.s.Seq)
	}
	// The role and the mode apply from this session; the engine stays.
	if p := h.lastPrompt(); p.Agent.Role != "You review." || p.Agent.Mode != "review" || p.Agent.Engine != "script" {
		t.Fatalf("session 2's agent: role %q, mode %q, engine %q", p.Agent.Role, p.Agent.Mode, p.Agent.Engine)
	}
}

// TestBudgetAbortWaitsWithoutSecondEscalation (issue 28 item 12): after the
// operator aborts a budget hold, mail that waits starts no session while
// the budget is spent, and raises no second escalation; a reload with a
// higher limit lets it start.
func TestBudgetAbortWaitsWithoutSecondEscalation(t *testing.T) {
	cfg := baseConfig + "[budget]\ntokens = 1000\n[[agent]]\nname = \"alpha\"\n"
	h := newHarnessConfig(t, cfg)
	logs := h.withLog()
	h.writeConfig(cfg)
	h.start()
	defer h.stop()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success, Usage: engine.Usage{InputTokens: 1200}}
	h.waitFor("alpha", lifecycle.Held)
	e := h.waitEscalation(escalation.KindBudget, escalation.Open)
	h.send(message.Draft{From: "operator", To: "alpha", Body: "more work"})
	if _, err := h.sup.Decide(context.Background(), e.ID, escalation.Event(escalation.Abort), ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor("alpha", lifecycle.Idle)
	// The runner finds the mail and the spent budget, and waits.
	retripped := func() string {
		es, err := h.store.Escalations(context.Background(), mailbox.EscalationFilter{All: true})
		if err != nil {
			return err.Error()
		}
		if len(es) != 1 || es[0].Count != 1 {
			return fmt.Sprintf("the aborted window escalated again: %d escalation(s), the first counted %d", len(es), es[0].Count)
		}
		select {
		case r := <-h.eng.runs:
			return fmt.Sprintf("session %d started on a spent budget", r.s.Seq)
		default:
		}
		return ""
	}
	logs.waitFor(t, "work waits: the budget is spent", 1, retripped)
	h.send(message.Draft{From: "operator", To: "alpha", Body: "and more"})
	logs.waitFor(t, "work waits: the budget is spent", 2, retripped)
	h.noSession()

	h.writeConfig(strings.Replace(cfg, "tokens = 1000", "tokens = 5000", 1))
	if _, err := h.sup.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r2 := h.nextRun(); r2.s.Seq != 2 {
		t.Fatalf("session %d", r2.s.Seq)
	}
	h.waitForSeq("alpha", lifecycle.Running, 2)
	es, err := h.store.Escalations(context.Background(), mailbox.EscalationFilter{All: true})
	if err != nil || len(es) != 1 || es[0].Count != 1 || es[0].Decision == nil || *es[0].Decision != escalation.Abort {
		t.Fatalf("escalations %+v, %v", es, err)
	}
	got := strings.Join(h.states("alpha"), " ")
	if !strings.HasSuffix(got, "Held Idle BuildingPrompt Spawning Running") {
		t.Fatalf("states %s", got)
	}
}
