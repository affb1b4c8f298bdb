package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/internal/pgtest"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/postgres"
	"github.com/swarmhq/swarm/message"
)

type p8Details struct {
	Server string `json:"server"`
	// Send is P1 on PostgreSQL: Poster.Post against Raw.Insert.
	Rounds     int     `json:"rounds"`
	Sends      int     `json:"sends"`
	Raw        int     `json:"raw_inserts"`
	SendPerSec float64 `json:"send_per_s"`
	RawPerSec  float64 `json:"raw_per_s"`
	Ratio      float64 `json:"ratio"`
	// Across hosts: `swarm send --urgent` in clone 1 to the agent the
	// supervisor of clone 2 runs; message row → session cancelled.
	Trials      int       `json:"trials"`
	RowToCancel dist      `json:"row_to_cancel"`
	SamplesMs   []float64 `json:"row_to_cancel_samples_ms"`
}

// p8 measures the PostgreSQL store on a throwaway cluster (initdb and
// pg_ctl on a Unix socket, as internal/pgtest runs them for the tests).
func (b *bench) p8(ctx context.Context) error {
	c, err := pgtest.Start()
	if err != nil {
		b.add(row{ID: "P8", Figure: "PostgreSQL not measured: " + firstLine(err.Error()), Status: "skip"})
		return nil
	}
	defer c.Stop()
	det := p8Details{}

	// P1 on PostgreSQL.
	sendURL, err := c.CreateDB()
	if err != nil {
		return err
	}
	rawURL, err := c.CreateDB()
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, sendURL, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	if det.Server, err = st.ServerVersion(ctx); err != nil {
		return err
	}
	raw, err := postgres.OpenRaw(ctx, rawURL)
	if err != nil {
		return err
	}
	defer raw.Close()
	body := "the /users endpoint returns 500 since the last deploy; can you look?"
	poster := mailbox.NewPoster(st, []string{"backend"}, nil)
	d := message.Draft{From: message.Operator, To: "backend", Body: body}
	send := func() error { _, err := poster.Post(ctx, d); return err }
	insert := func() error { return raw.Insert(ctx, "operator", "backend", body) }
	for range 200 {
		if err := send(); err != nil {
			return err
		}
		if err := insert(); err != nil {
			return err
		}
	}
	rounds, phase := 20, 100*time.Millisecond
	if b.quick {
		rounds, phase = 6, 50*time.Millisecond
	}
	var sendT, rawT time.Duration
	if det.Sends, sendT, det.Raw, rawT, err = alternate(rounds, phase, send, insert); err != nil {
		return err
	}
	det.Rounds = rounds
	det.SendPerSec = round(float64(det.Sends)/sendT.Seconds(), 0)
	det.RawPerSec = round(float64(det.Raw)/rawT.Seconds(), 0)
	det.Ratio = round(det.SendPerSec/det.RawPerSec, 2)

	// P2 across two supervisors: clone 2 runs target; clone 1 sends.
	if b.dbURL, err = c.CreateDB(); err != nil {
		return err
	}
	defer func() { b.dbURL = "" }()
	// Two supervisors, as on two hosts: clone 2 runs target, clone 1 runs
	// sender, and the operator's `swarm send` on clone 1 goes through its
	// supervisor (its warm connections) to the database, which wakes
	// clone 2's.
	host2, err := b.newSwarm("p8", []string{"target", "sender"}, longToolScript, 0)
	if err != nil {
		return err
	}
	host1 := filepath.Join(b.tmp, "p8-host1")
	if out, err := exec.Command("git", "clone", "-q", host2, host1).CombinedOutput(); err != nil {
		return fmt.Errorf("git clone: %v: %s", err, out)
	}
	for _, f := range []string{"swarm.toml", filepath.Join(".swarm", "scripts", "sender.toml")} {
		data, err := os.ReadFile(filepath.Join(host2, f))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host1, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(host1, f), data, 0o644); err != nil {
			return err
		}
	}
	up, err := b.start(host2, "p8-up.log", "up", "--engine", "script", "--no-tui", "--agents", "target")
	if err != nil {
		return err
	}
	defer stopUp(up)
	up1, err := b.start(host1, "p8-up1.log", "up", "--engine", "script", "--no-tui", "--agents", "sender")
	if err != nil {
		return err
	}
	defer stopUp(up1)
	trials := 50
	if b.quick {
		trials = 10
	}
	shared, err := postgres.Open(ctx, b.dbURL, postgres.Options{})
	if err != nil {
		return err
	}
	defer shared.Close()
	if err := waitFor(ctx, 30*time.Second, 5*time.Millisecond, "sender Running on clone 1", func() (bool, error) {
		if up1.exited() {
			return false, b.upExited(up1, "p8-up1.log")
		}
		a, err := shared.Agent(ctx, "sender")
		return err == nil && a.State == lifecycle.Running, nil
	}); err != nil {
		return err
	}
	lat, err := b.urgentTrials(ctx, host1, shared, up, "p8-up.log", trials)
	if err != nil {
		return err
	}
	if _, err := stopUp(up1); err != nil {
		return err
	}
	if _, err := stopUp(up); err != nil {
		return err
	}
	det.Trials, det.RowToCancel, det.SamplesMs = trials, summarize(lat.row), lat.samples
	b.details["P8"] = det

	b.add(row{ID: "P8", Figure: "PostgreSQL " + firstLine(det.Server) + ": mailbox Send", Value: det.SendPerSec, Unit: "msg/s", Text: thousands(det.SendPerSec) + " msg/s"})
	b.add(row{ID: "P8", Figure: "raw pgx INSERT, same row", Value: det.RawPerSec, Unit: "rows/s", Text: thousands(det.RawPerSec) + " rows/s"})
	b.check(row{ID: "P8", Figure: "Send / raw insert on PostgreSQL", Value: det.Ratio, Unit: "ratio", Text: fmt.Sprintf("%.2f", det.Ratio)}, "≥ 0.8", det.Ratio >= 0.8)
	r := det.RowToCancel
	b.add(row{ID: "P8", Figure: fmt.Sprintf("urgent interrupt across two supervisors (LISTEN/NOTIFY), p50 (%d trials)", trials), Value: r.P50, Unit: "ms", Text: fmt.Sprintf("%.2f ms", r.P50)})
	b.check(row{ID: "P8", Figure: "urgent interrupt across supervisors p99", Value: r.P99, Unit: "ms", Text: fmt.Sprintf("%.2f ms", r.P99)}, "≤ 10 ms", r.P99 <= 10)
	return nil
}
