package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/repo"
)

type p2Details struct {
	Trials int `json:"trials"`
	// RowToCancel: messages.created_at (the sender's clock, just before
	// it writes the row) to the Running→Interrupting event (the
	// supervisor's clock, right after the session's context is cancelled).
	RowToCancel dist `json:"row_to_cancel"`
	// ExecToCancel adds the sending process's start-up: from just before
	// the bench starts `swarm send` to the same event (P2b, target p99 ≤
	// 10 ms).
	ExecToCancel dist `json:"exec_to_cancel"`
	// SendProcess is how long one `swarm send --urgent` process ran.
	SendProcess dist `json:"send_process"`
	// BackToRunning is from the interrupt to the next session Running.
	BackToRunning dist `json:"back_to_running"`
	// Door is what a session's own control socket costs at its start
	// and end (DESIGN §13.2).
	Door      dist      `json:"door"`
	SamplesMs []float64 `json:"row_to_cancel_samples_ms"`
}

// p2 runs real `swarm send --urgent` processes against a running
// `swarm up --engine script` whose one agent sits in a long bash call, and
// reads the latency from the database: the message row's created_at to the
// Running→Interrupting event of the interrupt that mail caused.
func (b *bench) p2(ctx context.Context) error {
	trials := 50
	if b.quick {
		trials = 10
	}
	agents := []string{"target"}
	dir, err := b.newSwarm("p2", agents, longToolScript, 0)
	if err != nil {
		return err
	}
	up, err := b.start(dir, "p2-up.log", "up", "--engine", "script", "--no-tui")
	if err != nil {
		return err
	}
	st, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	lat, err := b.urgentTrials(ctx, dir, st, up, "p2-up.log", trials)
	if err != nil {
		return err
	}
	det := p2Details{Trials: trials, SamplesMs: lat.samples}
	if err := b.startup(dir); err != nil {
		return err
	}
	if _, err := stopUp(up); err != nil {
		return err
	}
	det.RowToCancel = summarize(lat.row)
	det.ExecToCancel = summarize(lat.exec)
	det.SendProcess = summarize(lat.send)
	det.BackToRunning = summarize(lat.back)
	b.details["P2"] = det
	r := det.RowToCancel
	b.add(row{ID: "P2", Figure: fmt.Sprintf("urgent interrupt, row written → session cancelled, p50 (%d trials)", trials), Value: r.P50, Unit: "ms", Text: fmt.Sprintf("%.2f ms", r.P50)})
	b.check(row{ID: "P2", Figure: "urgent interrupt p99", Value: r.P99, Unit: "ms", Text: fmt.Sprintf("%.2f ms", r.P99)}, "< 50 ms", r.P99 < 50)
	b.add(row{ID: "P2", Figure: "urgent interrupt max", Value: r.Max, Unit: "ms", Text: fmt.Sprintf("%.2f ms", r.Max)})
	// P2b is what the operator waits for: the `swarm send --urgent`
	// process's start-up, its trip to the supervisor (which stores the
	// mail, never the process) and the interrupt, in the same run.
	e := det.ExecToCancel
	b.add(row{ID: "P2b", Figure: fmt.Sprintf("urgent incl. the `swarm send` process: exec → session cancelled, p50 (%d trials)", trials), Value: e.P50, Unit: "ms",
		Text: fmt.Sprintf("%.2f ms", e.P50)})
	b.check(row{ID: "P2b", Figure: "urgent incl. the `swarm send` process, p99", Value: e.P99, Unit: "ms", Text: fmt.Sprintf("%.2f ms", e.P99)}, "≤ 10 ms", e.P99 <= 10)
	b.add(row{ID: "P2b", Figure: "  the `swarm send --urgent` process alone, p50 / p99", Value: det.SendProcess.P50, Unit: "ms",
		Text: fmt.Sprintf("%.2f / %.2f ms", det.SendProcess.P50, det.SendProcess.P99)})
	door, err := doorCost(ctx, dir, 200)
	if err != nil {
		return err
	}
	det.Door = door
	b.details["P2"] = det
	b.add(row{ID: "P2", Figure: "  a session's door at start: open, serve, first ping, close; p50 / p99", Value: door.P50, Unit: "ms",
		Text: fmt.Sprintf("%.2f / %.2f ms", door.P50, door.P99)})
	return nil
}

// startupRuns is how many runs each start-up figure's median takes.
const startupRuns = 20

// startup measures what typing a command costs before it does anything:
// `swarm version`, and `swarm send` to the running swarm in dir (the
// front answers both; its process's own CPU, user and system, and peak
// RSS, medians of startupRuns), and swarmd's `version` for comparison.
func (b *bench) startup(dir string) error {
	version, err := b.processCost(b.bin, dir, "version")
	if err != nil {
		return err
	}
	send, err := b.processCost(b.bin, dir, "send", "target", "start-up probe")
	if err != nil {
		return err
	}
	b.details["P2c"] = map[string]any{"runs": startupRuns, "version": version, "send": send}
	for _, c := range []struct {
		name string
		cost procCost
	}{{"`swarm version`", version}, {"`swarm send` to a running swarm", send}} {
		b.check(row{ID: "P2c", Figure: fmt.Sprintf("start-up: %s, CPU (user+sys), median of %d", c.name, startupRuns), Value: c.cost.CPUms, Unit: "ms",
			Text: fmt.Sprintf("%.2f ms", c.cost.CPUms)}, "< 5 ms", c.cost.CPUms < 5)
		b.check(row{ID: "P2c", Figure: fmt.Sprintf("start-up: %s, peak RSS, median", c.name), Value: c.cost.RSSMiB, Unit: "MiB",
			Text: fmt.Sprintf("%.1f MiB", c.cost.RSSMiB)}, "≤ 15 MiB", c.cost.RSSMiB <= 15)
	}
	// swarmd, the whole program, beside the front: what every command
	// cost before the front (not a target).
	if whole := filepath.Join(filepath.Dir(b.bin), "swarmd"); b.bin != whole && statOK(whole) {
		c, err := b.processCost(whole, dir, "version")
		if err != nil {
			return err
		}
		b.details["P2c"].(map[string]any)["swarmd_version"] = c
		b.add(row{ID: "P2c", Figure: "  for comparison: `swarmd version` (the whole program), CPU / peak RSS", Value: c.CPUms, Unit: "ms",
			Text: fmt.Sprintf("%.2f ms / %.1f MiB", c.CPUms, c.RSSMiB)})
	}
	return nil
}

// procCost is one command's start-up: medians of CPU and peak RSS.
type procCost struct {
	CPUms  float64 `json:"cpu_ms"`
	RSSMiB float64 `json:"rss_mib"`
}

// processCost runs bin args startupRuns times in dir, through the rusage
// helper (see its doc for why), and returns the medians of the process's
// CPU (user+sys) and peak RSS.
func (b *bench) processCost(bin, dir string, args ...string) (procCost, error) {
	if b.rusage == "" {
		b.rusage = filepath.Join(b.tmp, "rusage")
		build := exec.Command("go", "build", "-o", b.rusage, "./cmd/swarmbench/internal/rusage")
		if out, err := build.CombinedOutput(); err != nil {
			b.rusage = ""
			return procCost{}, fmt.Errorf("build the rusage helper: %v: %s", err, out)
		}
	}
	out, err := exec.Command(b.rusage, append([]string{strconv.Itoa(startupRuns), dir, bin}, args...)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return procCost{}, fmt.Errorf("%s", exit.Stderr)
		}
		return procCost{}, err
	}
	var runs []struct {
		CPUNanos int64 `json:"cpu_ns"`
		MaxRSSKB int64 `json:"max_rss_kb"`
	}
	if err := json.Unmarshal(out, &runs); err != nil || len(runs) == 0 {
		return procCost{}, fmt.Errorf("rusage helper printed %q: %v", out, err)
	}
	var cpu []time.Duration
	var rss []float64
	for _, r := range runs {
		cpu = append(cpu, time.Duration(r.CPUNanos))
		rss = append(rss, float64(r.MaxRSSKB)/1024)
	}
	slices.Sort(rss)
	return procCost{CPUms: summarize(cpu).P50, RSSMiB: round(rss[len(rss)/2], 1)}, nil
}

// doorCost measures what a session's door adds to its start and end, as
// the supervisor does it: bind the door, serve it, answer the session's
// first request, close it and wait for its goroutine.
func doorCost(ctx context.Context, dir string, trials int) (dist, error) {
	l := repo.At(dir, "")
	var took []time.Duration
	for i := range trials {
		t0 := time.Now()
		srv, err := control.ListenDoor(l, fmt.Sprintf("bench-%d", i+1))
		if err != nil {
			return dist{}, err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- srv.Serve(sctx, func(context.Context, control.Request, func(any) error) control.Response {
				return control.Response{OK: true}
			})
		}()
		if _, err := control.CallAt(ctx, srv.Path(), control.Request{Op: control.OpPing}); err != nil {
			cancel()
			return dist{}, err
		}
		cancel()
		if err := <-done; err != nil {
			return dist{}, err
		}
		took = append(took, time.Since(t0))
	}
	return summarize(took), nil
}

// interruptedAt is when the agent moved Running→Interrupting because of
// message id.
func interruptedAt(ctx context.Context, st mailbox.Store, id int64) (time.Time, error) {
	cause := fmt.Sprintf("urgent mail #%d from operator", id)
	evs, err := st.Events(ctx, mailbox.EventFilter{Limit: 200})
	if err != nil {
		return time.Time{}, err
	}
	for _, e := range evs {
		if e.From != nil && *e.From == "Running" && e.To == "Interrupting" && e.Cause == cause {
			return e.At, nil
		}
	}
	return time.Time{}, fmt.Errorf("no Running→Interrupting event with cause %q", cause)
}

// urgentLatencies are the measurements of urgentTrials.
type urgentLatencies struct {
	row, exec, send, back []time.Duration
	samples               []float64 // row, in ms
}

// urgentTrials sends `swarm send target --urgent` from sendDir, trials
// times, to the agent target that up runs (its session always in a long
// bash call), waiting each time for its next session, and reads the
// latencies from st: the message row's created_at to the interrupt.
func (b *bench) urgentTrials(ctx context.Context, sendDir string, st mailbox.Store, up *proc, upLog string, trials int) (urgentLatencies, error) {
	var lat urgentLatencies
	running := func(after int64) (int64, error) {
		var seq int64
		err := waitFor(ctx, 30*time.Second, 2*time.Millisecond, "target Running", func() (bool, error) {
			if up.exited() {
				return false, b.upExited(up, upLog)
			}
			a, err := st.Agent(ctx, "target")
			if err != nil {
				return false, nil // not registered yet
			}
			seq = a.SessionSeq
			return a.State == lifecycle.Running && a.SessionSeq > after, nil
		})
		return seq, err
	}
	seq, err := running(0)
	if err != nil {
		return lat, err
	}
	type trial struct {
		id       int64
		execAt   time.Time
		sendTook time.Duration
		backAt   time.Time
	}
	var ts []trial
	for i := range trials {
		t0 := time.Now()
		out, err := b.swarm(sendDir, "send", "target", fmt.Sprintf("urgent trial %d: stop and look at this", i+1), "--urgent", "--json")
		if err != nil {
			return lat, err
		}
		took := time.Since(t0)
		var sent []struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(out), &sent); err != nil || len(sent) != 1 {
			return lat, fmt.Errorf("swarm send --json printed %q: %v", out, err)
		}
		next, err := running(seq)
		if err != nil {
			return lat, fmt.Errorf("trial %d: %w", i+1, err)
		}
		ts = append(ts, trial{id: sent[0].ID, execAt: t0, sendTook: took, backAt: time.Now()})
		seq = next
	}
	for _, t := range ts {
		m, err := st.Message(ctx, t.id)
		if err != nil {
			return lat, err
		}
		at, err := interruptedAt(ctx, st, t.id)
		if err != nil {
			return lat, err
		}
		lat.row = append(lat.row, at.Sub(m.CreatedAt))
		lat.exec = append(lat.exec, at.Sub(t.execAt))
		lat.send = append(lat.send, t.sendTook)
		lat.back = append(lat.back, t.backAt.Sub(at))
		lat.samples = append(lat.samples, ms(at.Sub(m.CreatedAt)))
	}
	return lat, nil
}

func statOK(p string) bool { _, err := os.Stat(p); return err == nil }
