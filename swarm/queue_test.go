package swarm

import (
	"context"
	"testing"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mode"
)

// An execute/queue agent works its queue one session per task with no mail
// sent to it, and goes Idle when the queue is empty, or when a session
// left the queue as it found it (so it cannot loop on a task it cannot do).
func TestQueueAgentTakesTheNextTaskWithoutMail(t *testing.T) {
	h := newHarness(t, `
[[agent]]
name = "worker"
strategy = "queue"
`)
	tasks := &fakeTasks{}
	tasks.set("T-1", "T-2", "T-3")
	h.prompts.tasks = tasks
	h.sup = h.newSupervisorWith(h.sup.cfg, tasks)
	h.start()
	for i, left := range [][]string{{"T-2", "T-3"}, {"T-3"}, nil} {
		r := h.nextRun()
		if r.s.Agent != "worker" || r.s.Seq != int64(i+1) || len(r.s.Mail) != 0 {
			t.Fatalf("run %d = %s/%d with %d mail", i, r.s.Agent, r.s.Seq, len(r.s.Mail))
		}
		if !r.s.Caps.Has(mode.CanUseQueue) || r.s.Strategy != mode.Queue {
			t.Fatalf("session %d: strategy %q, vector %v", r.s.Seq, r.s.Strategy, r.s.Caps)
		}
		tasks.set(left...) // the session completed its task
		r.finish <- engine.Result{Outcome: engine.Success}
	}
	if n := h.waitFor("worker", lifecycle.Idle); n.Seq != 3 {
		t.Fatalf("idle after session %d, want 3", n.Seq)
	}
	// The stored session keeps the vector the engine got.
	sess, err := h.store.Session(context.Background(), "worker", 3)
	if err != nil || !sess.Capabilities.Has(mode.CanUseQueue) || sess.Capabilities.Has(mode.CanDispatch) {
		t.Fatalf("stored vector %v, %v", sess.Capabilities, err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestQueueAgentIdlesWhenASessionTookNothing(t *testing.T) {
	h := newHarness(t, `
[[agent]]
name = "worker"
strategy = "queue"
`)
	tasks := &fakeTasks{}
	tasks.set("T-1", "T-2")
	h.prompts.tasks = tasks
	h.sup = h.newSupervisorWith(h.sup.cfg, tasks)
	h.start()
	h.nextRun().finish <- engine.Result{Outcome: engine.Success}
	if n := h.waitFor("worker", lifecycle.Idle); n.Seq != 1 {
		t.Fatalf("idle after session %d, want 1", n.Seq)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}
