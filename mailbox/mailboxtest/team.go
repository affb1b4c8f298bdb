package mailboxtest

import (
	"errors"
	"slices"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/team"
)

// testTeamLaunch: a launch row is created by its first transition, moves
// by compare-and-set through every state, keeps what SaveTeam wrote, and
// its events are team events.
func testTeamLaunch(e *env) {
	t, s := e.t, e.s
	if _, err := s.Team(e.ctx, "analysis"); !errors.Is(err, mailbox.ErrNoSuchTeam) {
		t.Fatalf("Team before the first transition: %v, want ErrNoSuchTeam", err)
	}
	move := func(from team.State, ev team.Event, to team.State, cause string) error {
		return s.InTx(e.ctx, func(tx mailbox.Tx) error {
			_, err := fsm.Apply(tx, team.Table, fsm.SubjectTeam, "analysis", from, ev, to, cause, 0)
			return err
		})
	}
	if err := move("", team.Create, team.Init, ""); err != nil {
		t.Fatal(err)
	}
	if err := move("", team.Create, team.Init, ""); !errors.Is(err, mailbox.ErrStateConflict) {
		t.Fatalf("a second first transition: %v, want ErrStateConflict", err)
	}
	if err := move(team.Probed, team.Lock, team.Ready, ""); !errors.Is(err, mailbox.ErrStateConflict) {
		t.Fatalf("a move from the wrong state: %v, want ErrStateConflict", err)
	}
	for _, st := range []struct {
		from team.State
		ev   team.Event
		to   team.State
	}{{team.Init, team.Probe, team.Probed}, {team.Probed, team.Lock, team.Ready}, {team.Ready, team.Members, team.MembersReady},
		{team.MembersReady, team.GiveUp, team.Fallback}, {team.Fallback, team.CoreDone, team.CoreReady}, {team.CoreReady, team.Run, team.Running}} {
		if err := move(st.from, st.ev, st.to, ""); err != nil {
			t.Fatal(err)
		}
	}
	at := e.clk.Now().Add(time.Second)
	want := team.Launch{Name: "analysis", Pings: map[string]team.Ping{"lead": {MsgID: "ping-team-analysis-1", Acked: true, At: &at, Session: 2}},
		Breaches: []team.BreachRecord{{Code: team.BreachCoreNotReady, At: at, Agent: "lead"}}, Relaunches: 1, Escalation: 7}
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.SaveTeam(want) }); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.SaveTeam(team.Launch{Name: "other"}) }); !errors.Is(err, mailbox.ErrNoSuchTeam) {
		t.Fatalf("SaveTeam of no row: %v, want ErrNoSuchTeam", err)
	}
	got, err := s.Team(e.ctx, "analysis")
	if err != nil {
		t.Fatal(err)
	}
	p := got.Pings["lead"]
	if got.State != team.Running || got.Relaunches != 1 || got.Escalation != 7 || p.MsgID != want.Pings["lead"].MsgID || !p.Acked ||
		p.At == nil || !p.At.Equal(at) || p.Session != 2 || len(got.Breaches) != 1 || got.Breaches[0].Code != team.BreachCoreNotReady ||
		got.Breaches[0].Agent != "lead" || !got.Breaches[0].At.Equal(at) {
		t.Fatalf("Team = %+v", got)
	}
	var inTx team.Launch
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) (err error) { inTx, err = tx.Team("analysis"); return err }); err != nil || inTx.State != team.Running {
		t.Fatalf("Tx.Team = %+v, %v", inTx, err)
	}
	if err := move(team.Running, team.Restart, team.Init, "restart"); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(e.ctx, mailbox.EventFilter{Kind: fsm.SubjectTeam})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 8 || evs[0].From != nil || evs[0].To != string(team.Init) || evs[7].Cause != "restart" || evs[7].AgentName() != "" {
		t.Fatalf("team events = %+v", evs)
	}
}

// testSpawned: spawned agents are stored with who spawned them, a live
// name is refused, a retired one may be spawned again.
func testSpawned(e *env) {
	t, s := e.t, e.s
	add := func(sp mailbox.Spawned) error {
		return s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.AddSpawned(sp) })
	}
	w := mailbox.Spawned{Name: "worker-1", Role: "write tests", Mode: "execute", Strategy: "simple", Engine: "script", Task: "bd-3",
		Ephemeral: true, SpawnedBy: "lead", SpawnedAt: e.clk.Now()}
	if err := add(w); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(time.Second)
	if err := add(mailbox.Spawned{Name: "backend", Configured: true, SpawnedBy: "operator", SpawnedAt: e.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := add(w); !errors.Is(err, mailbox.ErrAgentExists) {
		t.Fatalf("spawning a live agent again: %v, want ErrAgentExists", err)
	}
	got, err := s.SpawnedAgents(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "worker-1" || got[0].Role != w.Role || got[0].Mode != "execute" || got[0].Strategy != "simple" ||
		got[0].Engine != "script" || got[0].Task != "bd-3" || !got[0].Ephemeral || got[0].Configured || got[0].SpawnedBy != "lead" ||
		!got[0].SpawnedAt.Equal(w.SpawnedAt) || got[0].Retired() || got[1].Name != "backend" || !got[1].Configured || got[1].Ephemeral {
		t.Fatalf("SpawnedAgents = %+v", got)
	}
	if err := s.RetireSpawned(e.ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	first := e.clk.Now()
	e.clk.Add(time.Second)
	if err := s.RetireSpawned(e.ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RetireSpawned(e.ctx, "nobody"); !errors.Is(err, mailbox.ErrNoSuchAgent) {
		t.Fatalf("retire of no row: %v, want ErrNoSuchAgent", err)
	}
	var inTx []mailbox.Spawned
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) (err error) { inTx, err = tx.SpawnedAgents(); return err }); err != nil {
		t.Fatal(err)
	}
	if !inTx[0].Retired() || !inTx[0].RetiredAt.Equal(first) || inTx[1].Retired() {
		t.Fatalf("after retiring worker-1 twice: %+v", inTx)
	}
	w.Task, w.SpawnedAt = "bd-4", e.clk.Now()
	if err := add(w); err != nil {
		t.Fatalf("spawning a retired agent again: %v", err)
	}
	got, _ = s.SpawnedAgents(e.ctx)
	i := slices.IndexFunc(got, func(sp mailbox.Spawned) bool { return sp.Name == "worker-1" })
	if i < 0 || got[i].Retired() || got[i].Task != "bd-4" {
		t.Fatalf("respawned = %+v", got)
	}
}
