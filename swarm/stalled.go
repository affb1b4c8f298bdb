package swarm

import (
	"context"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/escalation"
)

// watchStalls is the stalled check: a Running session that shows no
// activity (no model turn, no tool call, no output in its log) for
// liveness.stall_after raises a critical stalled escalation, once per
// session. It does not hold the agent: the operator decides whether to
// interrupt it.
func (s *Supervisor) watchStalls(ctx context.Context) error {
	after := s.cfg.Liveness.StallAfter
	if after <= 0 {
		return nil
	}
	// Look four times per stall_after, so a stall is reported at most a
	// quarter late.
	t := time.NewTicker(min(max(after/4, 10*time.Millisecond), 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.checkStalls(ctx, after)
		}
	}
}

func (s *Supervisor) checkStalls(ctx context.Context, after time.Duration) {
	now := s.clock.Now()
	for _, r := range s.allRunners() {
		name := r.agent.Name
		seq := r.active.Load()
		if seq == 0 || r.stallSeq.Load() == seq {
			continue
		}
		last := time.Unix(0, r.lastActivity.Load())
		idle := now.Sub(last)
		if idle < after || r.active.Load() != seq {
			continue
		}
		r.stallSeq.Store(seq)
		s.raise(ctx, escalation.Draft{Kind: escalation.KindStalled, Agent: name,
			Ref:     escalation.SessionRef(SessionID(name, seq)),
			Summary: fmt.Sprintf("session %d of %s shows no activity (no model turn, tool call or output) for %s", seq, name, roundDuration(idle)),
			Details: details(map[string]any{"session_seq": seq, "last_activity": last.UTC(), "stall_after": after.String()}),
			// One per session, however long it stays stalled.
			DedupeKey: escalation.DefaultDedupeKey(escalation.KindStalled, name, escalation.SessionRef(SessionID(name, seq)), "stalled"),
		})
	}
}

// roundDuration keeps a duration readable: whole seconds from a minute up.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}
