package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/team"
)

// ackScript acknowledges the session's pending ACKs (the team ping), then
// sits in a long tool call like the members.
const ackScript = `after = "repeat"

[[session]]
[[session.turn]]
tool = "bash"
args = { command = "swarm ack --all" }
[[session.turn]]
tool = "bash"
args = { command = "sleep 900", timeout_seconds = 1800 }
`

type p10Details struct {
	Members int `json:"members"`
	// LaunchMs is swarm up → the launch RUNNING; WorktreesMs the part of
	// it spent making the members' worktrees (TEAM_READY →
	// MEMBERS_READY); HandshakeMs MEMBERS_READY → RUNNING.
	LaunchMs    float64 `json:"launch_ms"`
	WorktreesMs float64 `json:"worktrees_ms"`
	HandshakeMs float64 `json:"handshake_ms"`
	// Spawn is `swarm spawn` (the command starting) → the new agent
	// Running; SpawnWorktree its worktree add (Initializing →
	// BuildingPrompt); SpawnBeyond the first minus the second.
	Spawn         dist `json:"spawn"`
	SpawnWorktree dist `json:"spawn_worktree"`
	SpawnBeyond   dist `json:"spawn_beyond_worktree"`
}

// p10 is the team launch and spawning at run time (DESIGN §9.5): a core
// pair whose scripts acknowledge the ping and 20 members, from `swarm up`
// to the launch RUNNING; then `swarm spawn` of scripted agents into the
// running swarm, from the command to the new agent Running.
func (b *bench) p10(ctx context.Context) error {
	const members = 20
	agents := []string{"core-a", "core-b"}
	for i := range members {
		agents = append(agents, fmt.Sprintf("member-%02d", i+1))
	}
	dir, err := b.newSwarm("p10", agents, longToolScript, 50)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "swarm.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n[team]\nname = \"bench\"\ncore = [\"core-a\", \"core-b\"]\n\n[spawn]\nmax_agents = 100\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	trials := 10
	if b.quick {
		trials = 3
	}
	scripts := filepath.Join(dir, ".swarm", "scripts")
	for _, c := range agents[:2] {
		if err := os.WriteFile(filepath.Join(scripts, c+".toml"), []byte(ackScript), 0o644); err != nil {
			return err
		}
	}
	for i := range trials {
		if err := os.WriteFile(filepath.Join(scripts, fmt.Sprintf("spawned-%02d.toml", i+1)), []byte(longToolScript), 0o644); err != nil {
			return err
		}
	}
	st, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()

	det := p10Details{Members: members}
	t0 := time.Now()
	up, err := b.start(dir, "p10.log", "up", "--engine", "script", "--no-tui")
	if err != nil {
		return err
	}
	defer up.stop(30 * time.Second)
	err = waitFor(ctx, 120*time.Second, 2*time.Millisecond, "the team launch RUNNING", func() (bool, error) {
		if up.exited() {
			return false, b.upExited(up, "p10.log")
		}
		l, err := st.Team(ctx, "bench")
		if errors.Is(err, mailbox.ErrNoSuchTeam) {
			return false, nil
		}
		return err == nil && l.State == team.Running, err
	})
	if err != nil {
		return err
	}
	det.LaunchMs = ms(time.Since(t0))
	evs, err := st.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectTeam})
	if err != nil {
		return err
	}
	at := map[string]time.Time{}
	for _, e := range evs {
		if e.From == nil || *e.From != e.To {
			at[e.To] = e.At
		}
	}
	det.WorktreesMs = ms(at[string(team.MembersReady)].Sub(at[string(team.Ready)]))
	det.HandshakeMs = ms(at[string(team.Running)].Sub(at[string(team.MembersReady)]))

	var spawn, wt, beyond []time.Duration
	for i := range trials {
		name := fmt.Sprintf("spawned-%02d", i+1)
		t1 := time.Now()
		if _, err := b.swarm(dir, "spawn", name, "--role", "measured by swarmbench"); err != nil {
			return err
		}
		err := waitFor(ctx, 60*time.Second, 2*time.Millisecond, name+" Running", func() (bool, error) {
			a, err := st.Agent(ctx, name)
			if errors.Is(err, mailbox.ErrNoSuchAgent) {
				return false, nil
			}
			return err == nil && a.State == lifecycle.Running, err
		})
		if err != nil {
			return err
		}
		d := time.Since(t1)
		evs, err := st.Events(ctx, mailbox.EventFilter{Agent: name})
		if err != nil {
			return err
		}
		var started, ready time.Time
		for _, e := range evs {
			switch {
			case e.To == string(lifecycle.Initializing) && started.IsZero():
				started = e.At
			case e.From != nil && *e.From == string(lifecycle.Initializing) && e.To == string(lifecycle.BuildingPrompt) && ready.IsZero():
				ready = e.At
			}
		}
		w := ready.Sub(started)
		spawn, wt, beyond = append(spawn, d), append(wt, w), append(beyond, d-w)
	}
	det.Spawn, det.SpawnWorktree, det.SpawnBeyond = summarize(spawn), summarize(wt), summarize(beyond)
	if _, err := stopUp(up); err != nil {
		return err
	}
	b.details["P10"] = det
	past := det.LaunchMs - det.WorktreesMs
	b.check(row{ID: "P10", Figure: fmt.Sprintf("team launch, core pair + %d scripted members: swarm up → RUNNING, beyond the worktrees", members),
		Value: round(past/1000, 2), Unit: "s", Text: fmt.Sprintf("%.2f s (%.2f s in all, worktrees %.2f s, handshake %.2f s)", past/1000, det.LaunchMs/1000, det.WorktreesMs/1000, det.HandshakeMs/1000)},
		"< 2 s + worktrees", past < 2000)
	b.check(row{ID: "P10", Figure: "swarm spawn → the new agent Running, beyond its worktree add (p50)", Value: det.SpawnBeyond.P50, Unit: "ms",
		Text: fmt.Sprintf("%.0f ms (in all p50 %.0f ms, max %.0f ms; worktree add p50 %.0f ms; n=%d)", det.SpawnBeyond.P50, det.Spawn.P50, det.Spawn.Max, det.SpawnWorktree.P50, det.Spawn.N)},
		"< 500 ms + worktree", det.SpawnBeyond.P50 < 500)
	return nil
}
