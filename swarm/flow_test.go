package swarm

import (
	"context"
	"encoding/json"
	"github.com/swarmhq/swarm/identity"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/workflow"
)

// reviewSupervisor is a supervisor (not running) over the store at root,
// with a dev-review workflow whose result_timeout is given, on clk.
func reviewSupervisor(t *testing.T, root string, clk *manualClock, resultTimeout string) *Supervisor {
	t.Helper()
	toml := baseConfig + "[[agent]]\nname = \"dev\"\n[[agent]]\nname = \"critic\"\n" +
		"[[workflow]]\nname = \"review\"\nkind = \"dev-review\"\ndev = \"dev\"\nreviewer = \"critic\"\nresult_timeout = \"" + resultTimeout + "\"\n"
	cfg, err := config.Parse([]byte(toml), "swarm.toml", root)
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

// TestResultDeadline: a dev that acknowledges a dispatch and never answers
// gets a stage_timeout escalation when the dispatch's timeout_minutes (set
// from result_timeout) pass after its ACK: computed from stored rows (a
// restarted supervisor with another result_timeout raises it), once per
// round, and the operator's abort on it ends the item.
func TestResultDeadline(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	clk := &manualClock{t: t0}
	sup := reviewSupervisor(t, root, clk, "30m")
	st := sup.store
	for _, id := range []string{"T-1", "T-2"} {
		if _, err := StartItem(ctx, st, sup.cfg, StartRequest{Workflow: "review", Item: id, Title: "paginate " + id,
			Criteria: []string{"page 2 works"}, Caller: identity.Operator()}); err != nil {
			t.Fatal(err)
		}
	}
	sup.flow.look(ctx) // the dispatches
	item := func(id string) workflow.Item {
		t.Helper()
		it, err := st.Item(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	d, err := st.ProtocolMessage(ctx, item("T-1").Dispatch)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := mailbox.Envelope(d)
	var p protocol.TaskDispatch
	if err := json.Unmarshal(env.Payload, &p); err != nil || p.TimeoutMinutes != 30 {
		t.Fatalf("dispatch payload %s: timeout_minutes %d, %v; want 30 (result_timeout)", env.Payload, p.TimeoutMinutes, err)
	}

	// dev acknowledges both in its session 1; the items go in_progress.
	startSession(t, st, "dev", 1)
	for _, id := range []string{"T-1", "T-2"} {
		if _, err := sup.Protocol().Ack(ctx, sessionOf("dev", 1), item(id).Dispatch); err != nil {
			t.Fatal(err)
		}
	}
	sup.flow.look(ctx)
	if it := item("T-1"); it.State != workflow.InProgress {
		t.Fatalf("T-1 is %s after dev's ACK, want in_progress", it.State)
	}
	stageTimeouts := func() []escalation.Escalation {
		t.Helper()
		var out []escalation.Escalation
		for _, e := range escalations(t, st) {
			if e.Kind == escalation.KindStageTimeout {
				out = append(out, e)
			}
		}
		return out
	}
	clk.Add(30*time.Minute - time.Second)
	sup.flow.look(ctx)
	if es := stageTimeouts(); len(es) != 0 {
		t.Fatalf("a stage_timeout before the deadline: %+v", es)
	}

	// The deadline passes while the supervisor is down; the next one, with
	// another result_timeout, reads the dispatch's own.
	clk.Add(2 * time.Second)
	sup = reviewSupervisor(t, root, clk, "10h")
	st = sup.store
	sup.flow.look(ctx)
	es := stageTimeouts()
	if len(es) != 2 {
		t.Fatalf("%d stage_timeout escalations after the deadline, want one per item: %+v", len(es), es)
	}
	byItem := map[string]escalation.Escalation{}
	for _, e := range es {
		byItem[e.RefText()] = e
		if e.AgentName() != "dev" || e.Severity != escalation.Warning || e.Holds() {
			t.Fatalf("escalation = %+v; want a warning about dev that holds nothing", e)
		}
	}
	e1, e2 := byItem["item:T-1"], byItem["item:T-2"]
	if e1.ID == 0 || e2.ID == 0 {
		t.Fatalf("escalations by ref: %v", byItem)
	}

	// Once per round: more looks count nothing, and neither does a
	// resolved one.
	sup.flow.look(ctx)
	sup.flow.look(ctx)
	if _, err := Decide(ctx, st, identity.Operator(), e1.ID, escalation.Event(escalation.Resume), "keep waiting"); err != nil {
		t.Fatal(err)
	}
	if _, err := Decide(ctx, st, identity.Operator(), e2.ID, escalation.Event(escalation.Abort), "drop it"); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour)
	sup.flow.look(ctx)
	sup.flow.look(ctx)
	if es := stageTimeouts(); len(es) != 2 || es[0].Count != 1 || es[1].Count != 1 {
		t.Fatalf("after more looks and the decisions: %+v; want the same two, counted once", es)
	}
	// Resume keeps T-1 waiting for its late result; abort ended T-2.
	if it := item("T-1"); it.State != workflow.InProgress {
		t.Fatalf("T-1 is %s after resume, want in_progress", it.State)
	}
	if it := item("T-2"); it.State != workflow.Aborted {
		t.Fatalf("T-2 is %s after abort, want aborted", it.State)
	}
}

// offsetClock is the real clock moved by a constant; in a synctest bubble,
// fake time that reads as a date of the test's choosing.
type offsetClock time.Duration

func (c offsetClock) Now() time.Time                       { return time.Now().Add(time.Duration(c)) }
func (c offsetClock) NewTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }

// TestResultDeadlineService runs the workflows service itself in a
// synctest bubble, on the real clock (fake time): the escalation comes
// within one poll of the deadline, with no look called by hand.
func TestResultDeadlineService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		root := t.TempDir()
		toml := baseConfig + "[[agent]]\nname = \"dev\"\n[[agent]]\nname = \"critic\"\n" +
			"[[workflow]]\nname = \"review\"\nkind = \"dev-review\"\ndev = \"dev\"\nreviewer = \"critic\"\nresult_timeout = \"30m\"\n"
		cfg, err := config.Parse([]byte(toml), "swarm.toml", root)
		if err != nil {
			t.Fatal(err)
		}
		l := repo.At(root, "")
		// The bubble's clock starts in 2000, before msg_ids had 13 digits:
		// the injected clock moves it to 2026, and its timers stay the
		// bubble's.
		clk := offsetClock(time.Until(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)))
		st, err := sqlite.Open(ctx, l.DB, sqlite.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		sup, err := New(Options{Config: cfg, Layout: l, Store: st, Clock: clk,
			Engines:   func(config.Agent) (engine.Engine, error) { return &fakeEngine{name: "script"}, nil },
			Worktrees: &fakeWorktrees{root: filepath.Join(root, "wt")}, Prompts: &fakePrompts{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := StartItem(ctx, st, cfg, StartRequest{Workflow: "review", Item: "T-1", Title: "paginate", Criteria: []string{"page 2"}, Caller: identity.Operator()}); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); sup.flow.run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait() // the first look sent the dispatch
		it, err := st.Item(ctx, "T-1")
		if err != nil || it.Dispatch == "" {
			t.Fatalf("item %+v, %v: no dispatch after the first look", it, err)
		}
		startSession(t, st, "dev", 1)
		if _, err := sup.Protocol().Ack(ctx, sessionOf("dev", 1), it.Dispatch); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		count := func() int {
			n := 0
			for _, e := range escalations(t, st) {
				if e.Kind == escalation.KindStageTimeout {
					n++
				}
			}
			return n
		}
		time.Sleep(30*time.Minute - time.Second)
		synctest.Wait()
		if n := count(); n != 0 {
			t.Fatalf("%d stage_timeout escalations %s after the ACK, before the deadline", n, time.Since(acked))
		}
		time.Sleep(flowPoll + time.Second)
		synctest.Wait()
		if n := count(); n != 1 {
			t.Fatalf("%d stage_timeout escalations within a poll of the deadline, want 1", n)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := count(); n != 1 {
			t.Fatalf("%d stage_timeout escalations an hour later, want still 1", n)
		}
	})
}
