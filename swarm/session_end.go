package swarm

// A session's end: its result logged and settled, a failure counted, the
// agent's branch published, and a guard finding charged to the agent.

import (
	"context"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

func (r *runner) logResult(s *session, res engine.Result) {
	msg := string(res.Outcome)
	switch {
	case res.Err != nil:
		msg += ": " + res.Err.Error()
	case res.Cause != nil:
		msg += ": " + res.Cause.Error()
	}
	// An exec CLI that reports no turns (gemini) gets no "turns 0".
	turns := ""
	if res.Turns > 0 {
		turns = fmt.Sprintf("turns %d, ", res.Turns)
	}
	fmt.Fprintf(s.log, "# session %d ended: %s (%stokens %d)\n", s.seq, msg, turns, res.Usage.Total())
}

// sessionEnded settles a session that ended on its own.
func (r *runner) sessionEnded(ctx context.Context, s *session, res engine.Result) error {
	r.logResult(s, res)
	if ferr := r.checkGuard(ctx, s); ferr != nil {
		res = engine.Result{Outcome: engine.Failed, Err: fmt.Errorf("base-branch guard: %w", ferr), Usage: res.Usage, Turns: res.Turns}
	}
	r.checkReservations(ctx, s)
	r.publish(ctx, s)
	r.warnOverlaps(ctx)
	if res.Outcome == engine.Success {
		if r.sup.opts.Tasks != nil {
			r.lastTasks = r.sessionTasks
		}
		return r.inTx(ctx, func(tx mailbox.Tx) error {
			if err := tx.EndSession(r.sessionEnd(s.seq, mailbox.SessionCompleted, res.Usage, "")); err != nil {
				return err
			}
			return r.moveTx(tx, lifecycle.SessionExitedOK, lifecycle.SessionComplete, fmt.Sprintf("session %d completed", s.seq))
		})
	}
	state := mailbox.SessionFailed
	if res.Outcome == engine.Timeout {
		state = mailbox.SessionTimeout
	}
	err := res.Err
	if err == nil {
		err = res.Cause
	}
	if err == nil {
		err = fmt.Errorf("session ended: %s", res.Outcome)
	}
	return r.endFailed(ctx, lifecycle.SessionExitedError, state, err, res.Usage)
}

// endFailed records a failed session and moves to CoolingDown, or to
// Stopped once the error thresholds are reached.
func (r *runner) endFailed(ctx context.Context, ev lifecycle.Event, state mailbox.SessionState, cause error, u engine.Usage) error {
	var stopped *mailbox.Agent
	err := r.inTx(ctx, func(tx mailbox.Tx) error {
		if err := tx.EndSession(r.sessionEnd(r.seq, state, u, cause.Error())); err != nil {
			return err
		}
		a, err := tx.Agent(r.agent.Name)
		if err != nil {
			return err
		}
		lim := r.sup.cfg.Errors
		to := lifecycle.CoolingDown
		line := fmt.Sprintf("session %d %s: %v", r.seq, state, cause)
		if a.ConsecutiveErrors >= lim.MaxConsecutive || a.TotalErrors >= lim.MaxTotal {
			to = lifecycle.Stopped
			line = fmt.Sprintf("%s; stopping after %d consecutive / %d total errors", line, a.ConsecutiveErrors, a.TotalErrors)
			r.stopReason = line
			stopped = &a
		}
		return r.moveTx(tx, ev, to, text.Truncate(line, 500))
	})
	if err == nil && stopped != nil {
		// Nobody restarts it but the operator: tell them.
		a := stopped
		r.sup.raise(ctx, escalation.Draft{Kind: escalation.KindErrors, Agent: r.agent.Name,
			Summary: fmt.Sprintf("%s stopped after %d consecutive / %d total failed sessions; the last: %s",
				r.agent.Name, a.ConsecutiveErrors, a.TotalErrors, text.Truncate(cause.Error(), 300)),
			Details: details(map[string]any{"session_seq": r.seq, "consecutive_errors": a.ConsecutiveErrors,
				"total_errors": a.TotalErrors, "last_error": text.Truncate(cause.Error(), 2000)}),
			DedupeKey: escalation.DefaultDedupeKey(escalation.KindErrors, r.agent.Name, "", "stopped at the error thresholds")})
	}
	return err
}

// checkCut checks the guard of a session that was interrupted or stopped:
// what it found is reported, and the session keeps its state.
func (r *runner) checkCut(ctx context.Context, s *session) {
	if err := r.checkGuard(ctx, s); err != nil {
		fmt.Fprintf(s.log, "# base-branch guard: %v\n", err)
	}
	r.checkReservations(ctx, s)
	r.publish(ctx, s)
	r.warnOverlaps(ctx)
}

// publish pushes the agent's branch to [worktree] push after a session,
// however it ended, so its commits can be merged from another host. A
// failed push is logged and retried after the next session: the work is
// safe on the local branch meanwhile.
func (r *runner) publish(ctx context.Context, s *session) {
	remote := r.sup.cfg.Worktree.Push
	if remote == "" {
		return
	}
	pctx, cancel := context.WithTimeout(bg(ctx), pushTimeout)
	defer cancel()
	if err := r.sup.opts.Worktrees.Push(pctx, remote, r.agent.Name); err != nil {
		fmt.Fprintf(s.log, "# push: %v\n", err)
		r.sup.log.Warn("push the agent's branch", "agent", r.agent.Name, "remote", remote, "session_seq", s.seq, "err", err)
	}
}

// reportFinding tells the operator what the base-branch guard found,
// charged to agent: a status message from the agent whose body is the
// finding's sentence (what happened and how to undo it), and an
// escalation of the finding's kind (branch_violation or repo_tamper) that
// holds the agent until the operator has looked: resume once the base
// branch is put right, abort to drop the work. f.Dedupe() names the event,
// so the same event charged again only counts. It is called once per
// event and agent. seq is the agent's session that the finding was made
// after, 0 when it is charged to an agent whose guard did not find it.
func (s *Supervisor) reportFinding(ctx context.Context, agent string, seq int64, f Finding) {
	body := fmt.Sprintf("The base-branch guard found (%s, charged to %s): %s", f.Escalation(), agent, f.String())
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	if _, err := s.poster.Post(bctx, message.Draft{From: agent, To: message.Operator, Kind: message.KindStatus, Body: body}); err != nil {
		s.log.Error("report guard finding", "agent", agent, "err", err)
	}
	kind := escalation.KindBranchViolation
	if f.Escalation() == string(escalation.KindRepoTamper) {
		kind = escalation.KindRepoTamper
	}
	summary, ref := f.String(), ""
	if seq > 0 {
		summary = fmt.Sprintf("session %d of %s broke the base-branch guard: %s", seq, agent, f.String())
		ref = escalation.SessionRef(SessionID(agent, seq))
	}
	s.raise(ctx, escalation.Draft{Kind: kind, Agent: agent, Hold: true, Ref: ref,
		Summary:   text.Truncate(summary, 500),
		Details:   details(map[string]any{"finding": f.String(), "charged_to": agent}),
		DedupeKey: escalation.DefaultDedupeKey(kind, agent, "", f.Dedupe())})
}

// pushTimeout bounds one push to [worktree] push.
const pushTimeout = 2 * time.Minute
