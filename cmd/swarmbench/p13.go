package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
)

type p13Details struct {
	// Landing: `swarm land dev` (the real binary) against a running
	// `swarm up` until the candidate is landed, with [merge] ci = "sleep 1"
	// and batch 1, on a repository of RepoFiles files.
	RepoFiles int  `json:"repo_files"`
	Landing   dist `json:"land_to_landed"`
	// Overhead is the landing's p50 beyond the 1 s CI; where it goes, from
	// the candidates' events: the `swarm land` process (Command), queued →
	// testing (Claim: the poke reaching the queue), testing → landed
	// (Test: the scratch worktree, the CI, the landing).
	OverheadMs float64 `json:"overhead_p50_ms"`
	Command    dist    `json:"command"`
	Claim      dist    `json:"queued_to_testing"`
	Test       dist    `json:"testing_to_landed"`
	// The bisection: 8 candidates, one of which fails CI, at batch 8.
	Candidates int    `json:"candidates"`
	Landed     int    `json:"landed"`
	Bad        string `json:"bad"`
	// CIRuns counts the CI's runs as swarm merges --json reports them:
	// the runs the bad candidate took part in (its ci_runs: the whole batch
	// and every failing half) plus one per passing part, each of which
	// landed as one commit; CIRunsSeen is the CI script's own count.
	CIRuns      int     `json:"ci_runs"`
	CIRunsSeen  int     `json:"ci_runs_seen"`
	CIRunsBound int     `json:"ci_runs_bound"`
	BisectMs    float64 `json:"bisect_wall_ms"`
	// Routing: sessions started and tokens spent by agents the queue sent
	// nothing to, while it tested and landed (the queue runs no model);
	// the agent whose candidate failed answers its mail in its own session
	// (AnswerSessions), which is its work, not routing.
	RoutingSessions int64 `json:"routing_sessions"`
	RoutingTokens   int64 `json:"routing_tokens"`
	AnswerSessions  int64 `json:"answer_sessions"`
}

// answerScript is an agent that answers its mail in one short session and
// is otherwise idle: no session starts unless something mails it.
const answerScript = `after = "mail"
[[session]]
[[session.turn]]
text = "noted"
`

// p13 is the merge queue (DESIGN §14): the time from `swarm land` to
// landed with a 1 s CI; the CI runs a batch of 8 with one bad candidate
// spends (bisection); and the tokens spent on routing, none.
func (b *bench) p13(ctx context.Context) error {
	det := p13Details{}
	if err := b.p13Land(ctx, &det); err != nil {
		return err
	}
	if err := b.p13Bisect(ctx, &det); err != nil {
		return err
	}
	b.details["P13"] = det
	b.add(row{ID: "P13", Figure: fmt.Sprintf("swarm land → landed, a 1 s [merge] ci, p50 (n=%d, %d-file repo)", det.Landing.N, det.RepoFiles),
		Value: det.Landing.P50, Unit: "ms",
		Text: fmt.Sprintf("%.2f s (max %.2f s; test+land %.2f s, claim %.0f ms, command %.0f ms)",
			det.Landing.P50/1000, det.Landing.Max/1000, det.Test.P50/1000, det.Claim.P50, det.Command.P50)})
	b.check(row{ID: "P13", Figure: fmt.Sprintf("CI runs, %d candidates at batch 8, one bad (%s named, %d landed)", det.Candidates, det.Bad, det.Landed),
		Value: float64(det.CIRuns), Unit: "runs",
		Text: fmt.Sprintf("%d (the CI counted %d)", det.CIRuns, det.CIRunsSeen)},
		fmt.Sprintf("≤ %d", det.CIRunsBound), det.CIRuns <= det.CIRunsBound && det.CIRuns == det.CIRunsSeen && det.Landed == det.Candidates-1)
	b.check(row{ID: "P13", Figure: fmt.Sprintf("tokens on routing, testing, landing, bisecting (%d sessions)", det.RoutingSessions),
		Value: float64(det.RoutingTokens), Unit: "tokens", Text: fmt.Sprint(det.RoutingTokens)}, "0", det.RoutingTokens == 0 && det.RoutingSessions == 0)
	return nil
}

// agentsNow reads every agent's row by name.
func agentsNow(ctx context.Context, st mailbox.Store) (map[string]mailbox.Agent, error) {
	as, err := st.Agents(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]mailbox.Agent{}
	for _, a := range as {
		out[a.Name] = a
	}
	return out, nil
}

// agentCommit commits a new file on the agent's branch, in its worktree,
// as the agent's session would.
func (b *bench) agentCommit(dir, agent, file, body string) error {
	wt := filepath.Join(dir, ".swarm", "worktrees", agent)
	if err := os.WriteFile(filepath.Join(wt, file), []byte(body), 0o644); err != nil {
		return err
	}
	if _, err := b.git(wt, "add", file); err != nil {
		return err
	}
	_, err := b.git(wt, "commit", "-qm", agent+": "+file)
	return err
}

// p13Land times `swarm land dev` → landed, one landing at a time.
func (b *bench) p13Land(ctx context.Context, det *p13Details) error {
	n := 5
	if b.quick {
		n = 3
	}
	det.RepoFiles = 1000
	dir, err := b.newSwarm("p13", []string{"dev"}, answerScript, det.RepoFiles)
	if err != nil {
		return err
	}
	if err := b.appendConfig(dir, "\n[merge]\nci = \"sleep 1\"\n"); err != nil {
		return err
	}
	up, err := b.start(dir, "p13-up.log", "up", "--engine", "script", "--no-tui")
	if err != nil {
		return err
	}
	defer stopUp(up)
	st, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := b.waitIdle(ctx, up, "p13-up.log", st, 1); err != nil {
		return err
	}
	before, err := agentsNow(ctx, st)
	if err != nil {
		return err
	}
	var samples, command, claim, test []time.Duration
	for i := range n {
		if err := b.agentCommit(dir, "dev", fmt.Sprintf("land%d.txt", i), fmt.Sprintf("landing %d\n", i)); err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := b.swarm(dir, "land", "dev"); err != nil {
			return err
		}
		command = append(command, time.Since(t0))
		var last merge.Candidate
		err := waitFor(ctx, 60*time.Second, 2*time.Millisecond, fmt.Sprintf("landing %d", i+1), func() (bool, error) {
			if up.exited() {
				return false, b.upExited(up, "p13-up.log")
			}
			cs, err := st.Candidates(ctx, mailbox.CandidateFilter{})
			if err != nil || len(cs) <= i {
				return false, err
			}
			last = cs[len(cs)-1]
			switch last.State {
			case merge.Landed:
				return true, nil
			case merge.Queued, merge.Testing:
				return false, nil
			}
			return false, fmt.Errorf("candidate #%d is %s: %s", last.ID, last.State, last.Reason)
		})
		if err != nil {
			return err
		}
		samples = append(samples, time.Since(t0))
		evs, err := st.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectMerge, Subjects: []string{merge.Subject(last.ID)}})
		if err != nil {
			return err
		}
		at := map[string]time.Time{}
		for _, e := range evs {
			at[e.To] = e.At
		}
		claim = append(claim, at[string(merge.Testing)].Sub(at[string(merge.Queued)]))
		test = append(test, at[string(merge.Landed)].Sub(at[string(merge.Testing)]))
	}
	det.Landing, det.Command, det.Claim, det.Test = summarize(samples), summarize(command), summarize(claim), summarize(test)
	det.OverheadMs = round(det.Landing.P50-1000, 0)
	after, err := agentsNow(ctx, st)
	if err != nil {
		return err
	}
	for name, a := range after {
		det.RoutingSessions += a.SessionSeq - before[name].SessionSeq
		det.RoutingTokens += a.Tokens - before[name].Tokens
	}
	return nil
}

// p13Bisect queues 8 candidates while no supervisor runs, so the queue
// takes them as one batch of 8 when `swarm up` starts; the CI fails when
// a6's file is there.
func (b *bench) p13Bisect(ctx context.Context, det *p13Details) error {
	const n = 8
	var agents []string
	for i := 1; i <= n; i++ {
		agents = append(agents, fmt.Sprintf("a%d", i))
	}
	det.Candidates, det.Bad = n, "a6"
	// At most 1 + ceil(log2 8) + 1 runs beyond the first batch's
	// (DESIGN §14); with one bad candidate the bisection needs 1 + 3 + 1
	// in all.
	det.CIRunsBound = 5
	dir, err := b.newSwarm("p13b", agents, answerScript, 0)
	if err != nil {
		return err
	}
	runs := filepath.Join(b.tmp, "p13b-ci-runs")
	ci := filepath.Join(b.tmp, "p13b-ci.sh")
	script := fmt.Sprintf("#!/bin/sh\necho run >> %q\nif [ -e f6.txt ]; then echo 'f6.txt is bad'; exit 1; fi\necho fine\n", runs)
	if err := os.WriteFile(ci, []byte(script), 0o755); err != nil {
		return err
	}
	if err := b.appendConfig(dir, fmt.Sprintf("\n[merge]\nci = %q\nbatch = 8\n", "sh "+ci)); err != nil {
		return err
	}
	// A first start makes the worktrees; the agents commit while it is
	// stopped, and the candidates are queued before the next start.
	up, err := b.start(dir, "p13b-up1.log", "up", "--engine", "script", "--no-tui")
	if err != nil {
		return err
	}
	st, err := openStore(ctx, dir)
	if err != nil {
		stopUp(up)
		return err
	}
	defer st.Close()
	if err := b.waitIdle(ctx, up, "p13b-up1.log", st, n); err != nil {
		stopUp(up)
		return err
	}
	if _, err := stopUp(up); err != nil {
		return err
	}
	for i, a := range agents {
		if err := b.agentCommit(dir, a, fmt.Sprintf("f%d.txt", i+1), a+"\n"); err != nil {
			return err
		}
	}
	if _, err := b.swarm(dir, "land", "--all"); err != nil {
		return err
	}
	before, err := agentsNow(ctx, st)
	if err != nil {
		return err
	}
	t0 := time.Now()
	up, err = b.start(dir, "p13b-up2.log", "up", "--engine", "script", "--no-tui")
	if err != nil {
		return err
	}
	defer stopUp(up)
	var out struct {
		Candidates []merge.Candidate `json:"candidates"`
	}
	err = waitFor(ctx, 120*time.Second, 10*time.Millisecond, "the 8 candidates out of the queue", func() (bool, error) {
		if up.exited() {
			return false, b.upExited(up, "p13b-up2.log")
		}
		cs, err := st.Candidates(ctx, mailbox.CandidateFilter{States: []merge.State{merge.Queued, merge.Testing}})
		return err == nil && len(cs) == 0, err
	})
	if err != nil {
		return err
	}
	det.BisectMs = ms(time.Since(t0))
	// The failure mail wakes a6: its session ends before the tokens are
	// read.
	if err := b.waitIdle(ctx, up, "p13b-up2.log", st, n); err != nil {
		return err
	}
	js, err := b.swarm(dir, "merges", "--all", "--json")
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		return fmt.Errorf("swarm merges --json: %w", err)
	}
	if len(out.Candidates) != n {
		return fmt.Errorf("swarm merges --json lists %d candidates, want %d", len(out.Candidates), n)
	}
	var landings []string
	for _, c := range out.Candidates {
		switch {
		case c.State == merge.Landed:
			det.Landed++
			if !slices.Contains(landings, c.LandedAs) {
				landings = append(landings, c.LandedAs)
			}
		case c.Agent == det.Bad && c.State == merge.Failed:
			det.CIRuns += c.CIRuns
		default:
			return fmt.Errorf("candidate #%d (%s) is %s: %s", c.ID, c.Agent, c.State, c.Reason)
		}
	}
	det.CIRuns += len(landings)
	data, err := os.ReadFile(runs)
	if err != nil {
		return err
	}
	det.CIRunsSeen = strings.Count(string(data), "run\n")
	after, err := agentsNow(ctx, st)
	if err != nil {
		return err
	}
	for name, a := range after {
		sessions, tokens := a.SessionSeq-before[name].SessionSeq, a.Tokens-before[name].Tokens
		if name == det.Bad {
			det.AnswerSessions += sessions
			continue
		}
		det.RoutingSessions += sessions
		det.RoutingTokens += tokens
	}
	return nil
}

// appendConfig appends text to a swarm's swarm.toml.
func (b *bench) appendConfig(dir, text string) error {
	f, err := os.OpenFile(filepath.Join(dir, "swarm.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
