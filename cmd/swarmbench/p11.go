package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/sandbox"
)

// oneCallScript runs one short bash call per session, then ends it.
const oneCallScript = `after = "repeat"

[[session]]
[[session.turn]]
tool = "bash"
args = { command = "true" }
[[session.turn]]
text = "Done."
`

type p11Details struct {
	Sessions int `json:"sessions"`
	// Start is BuildingPrompt → Running per session (prompt, delivery,
	// the sandbox's directory, the engine's start); Call is Running →
	// SessionComplete of a session that makes one `true` bash call (in a
	// sandbox, one bwrap per call).
	NoneStart  dist   `json:"none_start"`
	NoneCall   dist   `json:"none_call"`
	BwrapStart dist   `json:"bwrap_start"`
	BwrapCall  dist   `json:"bwrap_call"`
	Bwrap      string `json:"bwrap"` // why bubblewrap is or is not measured
}

// p11 is the sandbox's cost at session start (DESIGN §13.3): one scripted
// agent running session after session (its script repeats), with [sandbox] mode = "none" and
// with bubblewrap, side by side in this run.
func (b *bench) p11(ctx context.Context) error {
	n := 30
	if b.quick {
		n = 10
	}
	det := p11Details{Sessions: n}
	// Without a usable bubblewrap the bwrap half is skipped; d.Why says why.
	d, _ := sandbox.Decide(ctx, sandbox.Bwrap, os.Getenv)
	det.Bwrap = d.Why
	var none, bw [2]dist
	var err error
	if none, err = b.p11Run(ctx, "none", n); err != nil {
		return err
	}
	det.NoneStart, det.NoneCall = none[0], none[1]
	if d.Contained() {
		if bw, err = b.p11Run(ctx, "bwrap", n); err != nil {
			return err
		}
		det.BwrapStart, det.BwrapCall = bw[0], bw[1]
	}
	b.details["P11"] = det
	b.add(row{ID: "P11", Figure: fmt.Sprintf("session start, BuildingPrompt → Running, no sandbox: p50 / p99 (%d sessions)", n), Value: none[0].P50, Unit: "ms",
		Text: fmt.Sprintf("%.1f / %.1f ms", none[0].P50, none[0].P99)})
	if !d.Contained() {
		b.add(row{ID: "P11", Figure: "session start under bubblewrap: not measured (" + d.Why + ")", Status: "MISS", Target: "bwrap"})
		return nil
	}
	added := bw[0].P50 - none[0].P50
	b.add(row{ID: "P11", Figure: "session start under bubblewrap: p50 / p99", Value: bw[0].P50, Unit: "ms",
		Text: fmt.Sprintf("%.1f / %.1f ms", bw[0].P50, bw[0].P99)})
	b.check(row{ID: "P11", Figure: "  added by the sandbox at p50", Value: round(added, 2), Unit: "ms", Text: fmt.Sprintf("%.1f ms", added)},
		"< 20 ms", added < 20)
	b.add(row{ID: "P11", Figure: "session of one `true` bash call, Running → complete: none / bwrap p50", Value: bw[1].P50, Unit: "ms",
		Text: fmt.Sprintf("%.1f / %.1f ms", none[1].P50, bw[1].P50)})
	return nil
}

// p11Run runs n sessions of one agent in [sandbox] mode and returns the
// distributions of its BuildingPrompt → Running and Running →
// SessionComplete.
func (b *bench) p11Run(ctx context.Context, mode string, n int) ([2]dist, error) {
	var out [2]dist
	name := "p11-" + mode
	dir, err := b.newSwarm(name, []string{"starter"}, oneCallScript, 0)
	if err != nil {
		return out, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "swarm.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return out, err
	}
	_, err = fmt.Fprintf(f, "\n[sandbox]\nmode = %q\n", mode)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return out, err
	}
	log := name + "-up.log"
	up, err := b.start(dir, log, "up", "--engine", "script", "--no-tui")
	if err != nil {
		return out, err
	}
	st, err := openStore(ctx, dir)
	if err != nil {
		return out, err
	}
	defer st.Close()
	// The script repeats: it always has work, so sessions follow one
	// another as fast as the supervisor starts them.
	err = waitFor(ctx, 5*time.Minute, 10*time.Millisecond, fmt.Sprintf("%d sessions", n+2), func() (bool, error) {
		if up.exited() {
			return false, b.upExited(up, log)
		}
		a, err := st.Agent(ctx, "starter")
		if errors.Is(err, mailbox.ErrNoSuchAgent) {
			return false, nil // not registered yet
		}
		return err == nil && a.SessionSeq >= int64(n+2), err
	})
	if err != nil {
		return out, err
	}
	if _, err := stopUp(up); err != nil {
		return out, err
	}
	evs, err := st.Events(ctx, mailbox.EventFilter{Agent: "starter"})
	if err != nil {
		return out, err
	}
	building, running := map[int64]time.Time{}, map[int64]time.Time{}
	var start, call []time.Duration
	for _, e := range evs {
		switch e.To {
		case string(lifecycle.BuildingPrompt):
			// Its session is the next one: the event carries the last.
			building[e.SessionSeq+1] = e.At
		case string(lifecycle.Running):
			if e.From != nil && *e.From == string(lifecycle.Spawning) {
				running[e.SessionSeq] = e.At
				if t, ok := building[e.SessionSeq]; ok && e.SessionSeq > 1 {
					start = append(start, e.At.Sub(t))
				}
			}
		case string(lifecycle.SessionComplete):
			if t, ok := running[e.SessionSeq]; ok && e.SessionSeq > 1 {
				call = append(call, e.At.Sub(t))
			}
		}
	}
	if len(start) == 0 || len(call) == 0 {
		return out, fmt.Errorf("%s: no sessions found in the events", name)
	}
	out[0], out[1] = summarize(start), summarize(call)
	return out, nil
}
