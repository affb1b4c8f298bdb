package main

import (
	"context"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"path/filepath"
	"strings"
	"time"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/swarm"
)

type p7Details struct {
	Rounds         int     `json:"rounds"`
	PhaseMs        int     `json:"phase_ms"`
	Sends          int     `json:"sends"`
	Dispatches     int     `json:"dispatches"`
	SendPerSec     float64 `json:"send_per_s"`
	DispatchPerSec float64 `json:"dispatch_per_s"`
	Ratio          float64 `json:"ratio"`
	// DeadlineToEscalation is from a message's stored ACK deadline to the
	// created_at of its ack_timeout escalation, in a running `swarm up`.
	DeadlineToEscalation dist      `json:"deadline_to_escalation"`
	LagSamplesMs         []float64 `json:"lag_samples_ms"`
}

const p7Dispatch = `{"description": "Add pagination to GET /users", "branch": "swarm/backend",
  "acceptance_criteria": ["GET /users?page=2 returns the second page", "a page holds 50 users"], "risk_level": "low"}`

// p7 measures the protocol layer (DESIGN §9.2). First, validated
// task_dispatches (built, checked against the schema and the rules, and
// stored through the same Poster) against plain sends of the same size, in
// alternating phases on one store as in P1. Then the lag from an ACK
// deadline to its ack_timeout escalation: real `swarm send --type
// task_dispatch --ack-timeout 1s` processes to the agents of a running
// `swarm up --engine script` whose built-in scripts never acknowledge,
// read from the database.
func (b *bench) p7(ctx context.Context) error {
	det := p7Details{}
	if err := b.p7rate(ctx, &det); err != nil {
		return err
	}
	if err := b.p7lag(ctx, &det); err != nil {
		return err
	}
	b.details["P7"] = det
	b.add(row{ID: "P7", Figure: "task_dispatch built, validated and stored", Value: det.DispatchPerSec, Unit: "msg/s", Text: thousands(det.DispatchPerSec) + " msg/s"})
	b.add(row{ID: "P7", Figure: "validated dispatch / plain send", Value: det.Ratio, Unit: "ratio",
		Text: fmt.Sprintf("%.2f (send %s msg/s)", det.Ratio, thousands(det.SendPerSec))})
	d := det.DeadlineToEscalation
	b.check(row{ID: "P7", Figure: fmt.Sprintf("ACK deadline → ack_timeout escalation (%d)", d.N), Value: d.P99, Unit: "ms",
		Text: fmt.Sprintf("p50 %.1f ms, p99 %.1f ms", d.P50, d.P99)}, "p99 ≤ 1 s", d.N > 0 && d.P99 <= 1000)
	return nil
}

func (b *bench) p7rate(ctx context.Context, det *p7Details) error {
	st, err := sqlite.Open(ctx, filepath.Join(b.tmp, "p7", "swarm.db"), sqlite.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	poster := mailbox.NewPoster(st, []string{"lead", "backend"}, nil)
	p := &swarm.Protocol{Store: st, Poster: poster}
	plain := message.Draft{From: "lead", To: "backend", Body: p7Dispatch}
	send := func() error { _, err := poster.Post(ctx, plain); return err }
	task := 0
	dispatch := func() error {
		task++ // one task per dispatch, as a coordinator sends them
		_, _, err := p.Send(ctx, swarm.SendRequest{Caller: identity.Operator(), Draft: protocol.Draft{Type: protocol.TypeTaskDispatch, From: "lead", To: "backend",
			TaskID: fmt.Sprintf("T-%d", task), Payload: []byte(p7Dispatch)}})
		return err
	}
	for range 100 { // warm up both
		if err := send(); err != nil {
			return err
		}
		if err := dispatch(); err != nil {
			return err
		}
	}
	rounds, phase := 10, 100*time.Millisecond
	if b.quick {
		rounds, phase = 4, 50*time.Millisecond
	}
	det.Rounds, det.PhaseMs = rounds, int(phase/time.Millisecond)
	var sendT, dispT time.Duration
	for i := range rounds {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isSend := range order {
			fn := dispatch
			if isSend {
				fn = send
			}
			n, t, err := loop2(phase, fn)
			if err != nil {
				return err
			}
			if isSend {
				det.Sends += n
				sendT += t
			} else {
				det.Dispatches += n
				dispT += t
			}
		}
	}
	det.SendPerSec = round(float64(det.Sends)/sendT.Seconds(), 0)
	det.DispatchPerSec = round(float64(det.Dispatches)/dispT.Seconds(), 0)
	det.Ratio = round(det.DispatchPerSec/det.SendPerSec, 2)
	return nil
}

func (b *bench) p7lag(ctx context.Context, det *p7Details) error {
	n := 8
	if b.quick {
		n = 4
	}
	agents := make([]string, n)
	for i := range agents {
		agents[i] = fmt.Sprintf("dev-%d", i+1)
	}
	// A script that ends every session at once, acknowledging nothing.
	dir, err := b.newSwarm("p7", agents, "[[session]]\n[[session.turn]]\ntext = \"Read it; not acknowledging.\"\n", 0)
	if err != nil {
		return err
	}
	up, err := b.start(dir, "p7-up.log", "up", "--engine", "script", "--no-tui")
	if err != nil {
		return err
	}
	st, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := b.waitIdle(ctx, up, "p7-up.log", st, n); err != nil {
		return err
	}
	var msgIDs []string
	for i, a := range agents {
		out, err := b.swarm(dir, "send", a, "--type", "task_dispatch", "--task", fmt.Sprintf("T-%d", i+1),
			"--ack-timeout", "1s", "--payload", strings.ReplaceAll(p7Dispatch, "swarm/backend", "swarm/"+a))
		if err != nil {
			return err
		}
		msgIDs = append(msgIDs, strings.TrimSpace(out))
	}
	var lags []time.Duration
	if err := waitFor(ctx, 60*time.Second, 20*time.Millisecond, "every ack_timeout", func() (bool, error) {
		if up.exited() {
			return false, b.upExited(up, "p7-up.log")
		}
		es, err := st.Escalations(ctx, mailbox.EscalationFilter{All: true})
		if err != nil {
			return false, err
		}
		raised := map[string]escalation.Escalation{}
		for _, e := range es {
			if e.Kind == escalation.KindAckTimeout {
				id, _ := escalation.MsgOf(e.RefText())
				raised[id] = e
			}
		}
		if len(raised) < len(msgIDs) {
			return false, nil
		}
		lags = lags[:0]
		for _, id := range msgIDs {
			m, err := st.ProtocolMessage(ctx, id)
			if err != nil {
				return false, err
			}
			e, ok := raised[id]
			if !ok || m.Ack == nil || m.Ack.DueAt == nil {
				return false, fmt.Errorf("%s: no deadline or escalation", id)
			}
			lags = append(lags, e.CreatedAt.Sub(*m.Ack.DueAt))
		}
		return true, nil
	}); err != nil {
		return err
	}
	if _, err := stopUp(up); err != nil {
		return err
	}
	det.DeadlineToEscalation = summarize(lags)
	for _, l := range lags {
		det.LagSamplesMs = append(det.LagSamplesMs, ms(l))
	}
	return nil
}
