package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
)

type p1Details struct {
	Rounds        int     `json:"rounds"`
	PhaseMs       int     `json:"phase_ms"`
	Sends         int     `json:"sends"`
	SendSec       float64 `json:"send_s"`
	Raw           int     `json:"raw_inserts"`
	RawSec        float64 `json:"raw_s"`
	SendPerSec    float64 `json:"send_per_s"`
	RawPerSec     float64 `json:"raw_per_s"`
	Ratio         float64 `json:"ratio"`
	Broadcasts    int     `json:"broadcasts"`
	BroadcastPerS float64 `json:"broadcast_per_s"`
	BroadcastMsgS float64 `json:"broadcast_messages_per_s"`
	Body          string  `json:"body"`
}

// p1 compares Store.Send with the floor under it: the same row inserted by
// a prepared statement, autocommit, on a database opened with the same DSN
// (WAL, busy_timeout, synchronous NORMAL, foreign keys, _txlock=immediate)
// and the same schema (the real migrations). The two alternate in short
// phases, so both see the same machine.
func (b *bench) p1(ctx context.Context) error {
	body := "the /users endpoint returns 500 since the last deploy; can you look?"
	st, err := sqlite.Open(ctx, filepath.Join(b.tmp, "p1", "swarm.db"), sqlite.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	raw, err := sqlite.OpenRaw(ctx, filepath.Join(b.tmp, "p1", "raw.db"))
	if err != nil {
		return fmt.Errorf("raw database: %w", err)
	}
	defer raw.Close()

	// The real path: the one Poster every sender uses (validate, store,
	// wake), with no supervisor to wake.
	poster := mailbox.NewPoster(st, []string{"backend"}, nil)
	d := message.Draft{From: message.Operator, To: "backend", Body: body}
	send := func() error { _, err := poster.Post(ctx, d); return err }
	insert := func() error { return raw.Insert(ctx, "operator", "backend", body) }
	// Warm both up: page cache, prepared statements, the WAL.
	for range 200 {
		if err := send(); err != nil {
			return err
		}
		if err := insert(); err != nil {
			return err
		}
	}
	rounds, phase := 30, 100*time.Millisecond
	if b.quick {
		rounds, phase = 6, 50*time.Millisecond
	}
	det := p1Details{Rounds: rounds, PhaseMs: int(phase / time.Millisecond), Body: body}
	var sendT, rawT time.Duration
	if det.Sends, sendT, det.Raw, rawT, err = alternate(rounds, phase, send, insert); err != nil {
		return err
	}
	det.SendSec, det.RawSec = round(sendT.Seconds(), 3), round(rawT.Seconds(), 3)
	det.SendPerSec = round(float64(det.Sends)/sendT.Seconds(), 0)
	det.RawPerSec = round(float64(det.Raw)/rawT.Seconds(), 0)
	det.Ratio = round(det.SendPerSec/det.RawPerSec, 2)

	// Broadcast to 10 agents: one transaction of ten rows.
	agents := make([]string, 10)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%d", i)
	}
	bdb, err := sqlite.Open(ctx, filepath.Join(b.tmp, "p1", "broadcast.db"), sqlite.Options{})
	if err != nil {
		return err
	}
	defer bdb.Close()
	bst := mailbox.NewPoster(bdb, agents, nil)
	bd := message.Draft{From: message.Operator, Body: "standup in 5 minutes: post your status to operator"}
	for range 50 {
		if _, err := bst.Broadcast(ctx, bd); err != nil {
			return err
		}
	}
	bphase := time.Duration(rounds) * phase / 2
	n, t, err := loop2(bphase, func() error { _, err := bst.Broadcast(ctx, bd); return err })
	if err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	det.Broadcasts = n
	det.BroadcastPerS = round(float64(n)/t.Seconds(), 0)
	det.BroadcastMsgS = round(10*float64(n)/t.Seconds(), 0)
	b.details["P1"] = det

	b.add(row{ID: "P1", Figure: "mailbox Send (validated, RETURNING the row)", Value: det.SendPerSec, Unit: "msg/s", Text: thousands(det.SendPerSec) + " msg/s"})
	b.add(row{ID: "P1", Figure: "raw modernc INSERT, same row, same DSN", Value: det.RawPerSec, Unit: "rows/s", Text: thousands(det.RawPerSec) + " rows/s"})
	b.check(row{ID: "P1", Figure: "Send / raw insert", Value: det.Ratio, Unit: "ratio", Text: fmt.Sprintf("%.2f", det.Ratio)}, "≥ 0.5", det.Ratio >= 0.5)
	b.add(row{ID: "P1", Figure: "Broadcast to 10 (one transaction)", Value: det.BroadcastPerS, Unit: "calls/s",
		Text: fmt.Sprintf("%s calls/s = %s msg/s", thousands(det.BroadcastPerS), thousands(det.BroadcastMsgS))})
	return nil
}

// alternate runs send and insert in many short alternating phases, so
// that load from elsewhere on the machine falls on both sides alike, and
// returns how many of each ran in how long.
func alternate(rounds int, phase time.Duration, send, insert func() error) (sends int, sendT time.Duration, raws int, rawT time.Duration, err error) {
	loop := func(fn func() error) (int, time.Duration, error) {
		n, t0 := 0, time.Now()
		for time.Since(t0) < phase {
			for range 16 {
				if err := fn(); err != nil {
					return n, 0, err
				}
				n++
			}
		}
		return n, time.Since(t0), nil
	}
	for i := range rounds {
		// Alternate which goes first, so neither always follows the other.
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isSend := range order {
			if isSend {
				n, t, err := loop(send)
				if err != nil {
					return 0, 0, 0, 0, fmt.Errorf("send: %w", err)
				}
				sends += n
				sendT += t
			} else {
				n, t, err := loop(insert)
				if err != nil {
					return 0, 0, 0, 0, fmt.Errorf("raw insert: %w", err)
				}
				raws += n
				rawT += t
			}
		}
	}
	return sends, sendT, raws, rawT, nil
}

func loop2(d time.Duration, fn func() error) (int, time.Duration, error) {
	n, t0 := 0, time.Now()
	for time.Since(t0) < d {
		if err := fn(); err != nil {
			return n, 0, err
		}
		n++
	}
	return n, time.Since(t0), nil
}
