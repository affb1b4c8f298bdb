package swarm

import (
	"context"
	"github.com/swarmhq/swarm/identity"
	"slices"
	"testing"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/team"
)

// TestTeamLaunchWaitsForCore: the core agent's first session carries the
// ping; the member waits in Waiting, starting no session, until the core
// agent acknowledges; then the launch is RUNNING and the member starts.
func TestTeamLaunchWaitsForCore(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n[team]\nname = \"t\"\ncore = [\"alpha\"]\n")
	h.start()
	r := h.nextRun()
	if r.s.Agent != "alpha" || len(r.s.Mail) != 1 || r.s.Mail[0].From != message.Swarm {
		t.Fatalf("first session = %s with mail %+v, want alpha with the ping", r.s.Agent, r.s.Mail)
	}
	ping, err := h.store.Message(context.Background(), r.s.Mail[0].ID)
	if err != nil || ping.ProtocolType != "ping" || ping.TaskID != "team-t" {
		t.Fatalf("alpha's mail = %+v, %v; want the team's ping", ping, err)
	}
	h.waitFor("bravo", lifecycle.Waiting)
	select {
	case other := <-h.eng.runs:
		t.Fatalf("%s started a session before the core acknowledged", other.s.Agent)
	default:
	}
	ctx := context.Background()
	if _, err := h.sup.Protocol().Ack(ctx, sessionOf("alpha", 1), ping.MsgID); err != nil {
		t.Fatal(err)
	}
	h.waitFor("bravo", lifecycle.BuildingPrompt)
	b := h.nextRun()
	if b.s.Agent != "bravo" {
		t.Fatalf("session of %s, want bravo's", b.s.Agent)
	}
	l, err := h.store.Team(ctx, "t")
	if err != nil || l.State != team.Running || !l.Pings["alpha"].Acked || l.Pings["alpha"].Session != 1 {
		t.Fatalf("launch = %+v, %v", l, err)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	b.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	h.waitFor("bravo", lifecycle.Idle)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSpawnStartsAndRetires: a spawned agent gets a runner while the swarm
// runs, its spawner's task mail in its first session, and, ephemeral,
// retires once Idle with no work left.
func TestSpawnStartsAndRetires(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"lead\"\nmode = \"coordinate\"\n")
	h.start()
	lead := h.nextRun()
	ctx := context.Background()
	sp, m, err := Spawn(ctx, h.sup.cfg, h.store, h.sup.Poster(), SpawnRequest{Name: "worker-1", Role: "write the tests", Task: "T-1",
		Ephemeral: true, Caller: sessionOf("lead", 1)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sp.SpawnedBy != "lead" || m.From != "lead" || m.To != "worker-1" || m.Kind != message.KindTask {
		t.Fatalf("spawned %+v with mail %+v", sp, m)
	}
	// The spawner's next prompt names the new teammate.
	if lead, _ := h.sup.cfg.Agent("lead"); !slices.Contains(h.sup.promptRequest(lead, 2, "", nil, nil).Teammates, "worker-1") {
		t.Fatalf("lead's teammates %v lack worker-1", h.sup.promptRequest(lead, 2, "", nil, nil).Teammates)
	}
	if err := h.sup.StartSpawned(ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	w := h.nextRun()
	if w.s.Agent != "worker-1" || w.s.Seq != 1 || len(w.s.Mail) != 1 || w.s.Mail[0].ID != m.ID {
		t.Fatalf("spawned session = %s/%d with %d mail", w.s.Agent, w.s.Seq, len(w.s.Mail))
	}
	if err := h.sup.StartSpawned(ctx, "worker-1"); err != nil {
		t.Fatalf("starting a running spawned agent again: %v", err)
	}
	w.finish <- engine.Result{Outcome: engine.Success}
	n := h.waitFor("worker-1", lifecycle.Stopped)
	if n.Cause != CauseRetired {
		t.Fatalf("worker-1 stopped with cause %q, want %q", n.Cause, CauseRetired)
	}
	rows, err := h.store.SpawnedAgents(ctx)
	if err != nil || len(rows) != 1 || !rows[0].Retired() {
		t.Fatalf("spawned rows = %+v, %v", rows, err)
	}
	if _, _, err := Spawn(ctx, h.sup.cfg, h.store, h.sup.Poster(), SpawnRequest{Name: "lead", Caller: identity.Operator(),
		Running: func(string) bool { return true }}, time.Now()); err == nil {
		t.Fatal("spawning a running configured agent was accepted")
	}
	lead.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("lead", lifecycle.Idle)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	a, err := h.store.Agent(ctx, "worker-1")
	if err != nil || a.State != lifecycle.Stopped {
		t.Fatalf("worker-1 = %+v, %v", a, err)
	}
	var _ mailbox.Spawned = rows[0]
}

// TestTeamLaunchBreachesWithoutASession: a core agent that never starts a
// session (held by an open escalation) never reads its ping, so its ACK
// clock never starts; the launch's does: past ready_timeout from the ping
// the breach is recorded and, with max_relaunch = 0, the team falls back
// with a protocol_breach escalation. The member stays Waiting.
func TestTeamLaunchBreachesWithoutASession(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n[team]\nname = \"t\"\ncore = [\"alpha\"]\nready_timeout = \"1s\"\nmax_relaunch = 0\n")
	ctx := context.Background()
	if _, _, err := Raise(ctx, h.store, escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Hold: true, Summary: "hold alpha"}); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitFor("alpha", lifecycle.Held)
	h.waitFor("bravo", lifecycle.Waiting)
	deadline := time.After(20 * time.Second)
	for {
		var n lifecycle.Notice
		select {
		case n = <-h.notices:
		case <-deadline:
			t.Fatal("no protocol_breach escalation")
		}
		h.history = append(h.history, n)
		h.used = append(h.used, false)
		if n.Kind == lifecycle.NoticeEscalation && n.Escalation != nil && n.Escalation.Kind == escalation.KindProtocolBreach {
			break
		}
	}
	// The escalation and the launch's move to FALLBACK are two writes: the
	// notice of the first may come before the second is stored.
	var l team.Launch
	var err error
	for wait := time.After(20 * time.Second); ; {
		l, err = h.store.Team(ctx, "t")
		if err != nil || l.State == team.Fallback {
			break
		}
		select {
		case <-wait:
			t.Fatalf("the launch never fell back: %+v", l)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err != nil || l.State != team.Fallback || len(l.Breaches) != 1 || l.Breaches[0].Code != team.BreachCoreNotReady {
		t.Fatalf("launch = %+v, %v", l, err)
	}
	if r, _ := h.sup.lookup("bravo"); r.liveState() != lifecycle.Waiting {
		t.Fatalf("bravo is %s, want Waiting", r.liveState())
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}
