package swarm

import (
	"context"
	"errors"
	"fmt"

	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/proc"
)

// recover moves every agent found in a non-terminal state back to
// Initializing, records its running sessions as crashed, requeues its
// delivered mail and kills the process groups the crash left behind.
func (s *Supervisor) recover(ctx context.Context) error {
	for _, name := range s.order {
		if err := s.recoverAgent(ctx, s.runners[name]); err != nil {
			return fmt.Errorf("recover %s: %w", name, err)
		}
	}
	return nil
}

func (s *Supervisor) recoverAgent(ctx context.Context, r *runner) error {
	name := r.agent.Name
	if err := s.store.RegisterAgent(ctx, r.info()); err != nil {
		return err
	}
	a, err := s.store.Agent(ctx, name)
	if err != nil {
		return err
	}
	r.state, r.seq = a.State, a.SessionSeq
	// Session numbers only grow: never below a session already stored.
	switch last, err := s.store.LastSession(ctx, name, ""); {
	case err == nil && last.Seq > r.seq:
		r.seq = last.Seq
	case err != nil && !errors.Is(err, mailbox.ErrNoSuchSession):
		return err
	}
	// Level-based: whatever the agent's state, no session of it runs now,
	// so sessions left running are crashed and delivered mail is queued
	// again. Only a non-terminal state is also moved.
	var rec mailbox.Recovered
	err = r.inTx(ctx, func(tx mailbox.Tx) error {
		var err error
		if rec, err = tx.RecoverAgent(name); err != nil {
			return err
		}
		if r.state.Terminal() {
			return nil
		}
		if err := tx.ResetErrors(name); err != nil {
			return err
		}
		return r.moveTx(tx, lifecycle.Recover, lifecycle.Initializing, "recovered")
	})
	if err != nil {
		return err
	}
	for _, sess := range rec.Sessions {
		for _, pg := range sess.Pgids {
			if _, err := proc.KillSessionGroup(pg, sessionMarker(name, sess.Seq)); err != nil {
				s.log.Warn("kill leftover process group", "agent", name, "session_seq", sess.Seq, "pgid", pg, "err", err)
			}
		}
	}
	if len(rec.Sessions) > 0 {
		// The killed sessions may have been inside a git commit.
		if removed, err := s.opts.Worktrees.RemoveStaleLock(name); err != nil {
			s.log.Warn("remove stale git lock", "agent", name, "err", err)
		} else if removed {
			s.log.Info("removed a stale index.lock left by a crashed session", "agent", name)
		}
	}
	if len(rec.Sessions) > 0 || rec.Requeued > 0 {
		s.bus.emit(lifecycle.Notice{Agent: name, Kind: lifecycle.NoticeInfo,
			Text: fmt.Sprintf("recovered after a crash: %d session(s) marked crashed, %d message(s) queued again", len(rec.Sessions), rec.Requeued)})
	}
	return nil
}
