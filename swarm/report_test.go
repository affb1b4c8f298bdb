package swarm

import (
	"context"
	"testing"
	"time"

	"github.com/swarmhq/swarm/message"
)

// A report goes to whoever handed the agent the task: the sender of task
// mail naming it, or of a task_dispatch about it; an ACK or a result the
// agent received does not make its sender the coordinator.
func TestReportGoesToTheDispatcher(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	sup := clockedSupervisor(t, clk)
	p, st, ctx := sup.Protocol(), sup.store, context.Background()
	who := func(agent, task string) string {
		t.Helper()
		c, err := Coordinator(ctx, st, agent, task)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := who("backend", "T-42"); c != message.Operator {
		t.Fatalf("nobody dispatched T-42 yet: %s", c)
	}
	d, _ := send(t, p, dispatchTo("backend", 0)) // lead → backend, T-42
	if c := who("backend", "T-42"); c != "lead" {
		t.Fatalf("after lead's task_dispatch: %s", c)
	}
	if c := who("backend", "T-42.1"); c != message.Operator {
		t.Fatalf("T-42.1 (a child, not T-42): %s", c)
	}
	if c := who("backend", ""); c != "lead" {
		t.Fatalf("session report: %s", c)
	}
	// backend acknowledges: lead receives an ack about T-42, which hands
	// lead nothing, so lead's own report on T-42 still goes to operator.
	startSession(t, st, "backend", 1)
	clk.Add(time.Second)
	if _, err := p.Ack(ctx, sessionOf("backend", 1), d.MsgID); err != nil {
		t.Fatal(err)
	}
	if c := who("lead", "T-42"); c != message.Operator {
		t.Fatalf("lead after backend's ACK: %s", c)
	}
	// Plain task mail from critic naming T-7.
	if _, err := sup.poster.Post(ctx, message.Draft{From: "critic", To: "backend", Kind: message.KindTask, Body: "T-7: fix the lint"}); err != nil {
		t.Fatal(err)
	}
	if c := who("backend", "T-7"); c != "critic" {
		t.Fatalf("after critic's task mail: %s", c)
	}
}
