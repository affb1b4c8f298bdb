package swarm

// A running session followed to its end: urgent mail that interrupts it
// or is injected at its next tool call, a dev-qa stage that runs past its
// timeout, a shutdown, and the kill of its process groups.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/protocol"
)

// killWait bounds the wait for an engine after its process groups were
// killed: an engine that ignores cancellation must not hang its runner.
const killWait = 5 * time.Second

// follow waits for the running session to end, interrupting it for urgent
// mail, and settles it.
func (r *runner) follow(ctx context.Context, s *session) error {
	defer func() {
		s.door.close()
		s.log.Close()
		r.sup.book.close(r.agent.Name, s.seq)
		// The last tool call belongs to the session that ended.
		bctx, cancel := bookkeeping(ctx)
		defer cancel()
		if err := r.sup.store.SetActivity(bctx, r.agent.Name, ""); err != nil {
			r.sup.log.Warn("clear activity", "agent", r.agent.Name, "err", err)
		}
	}()
	r.touch()
	r.active.Store(s.seq)
	defer r.active.Store(0)
	boundary := r.agent.Interrupt == config.InterruptBoundary && r.kind != config.EngineExec
	var stageC <-chan time.Time
	if st := r.stage; st != nil {
		t := r.sup.clock.NewTimer(max(st.Deadline.Sub(r.sup.clock.Now()), 0))
		defer t.Stop()
		stageC = t.C
	}
	// Urgent mail that came in while spawning interrupts at once.
	if !boundary {
		r.urgentHint.Store(false)
		if m, ok := r.urgentMail(ctx); ok {
			return r.interruptSession(ctx, s, m)
		}
	}
	for {
		select {
		case res := <-s.done:
			select {
			case trip := <-s.trips:
				return r.budgetEnded(ctx, s, trip, res)
			default:
			}
			return r.sessionEnded(ctx, s, res)
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
		case trip := <-s.trips:
			if done, err := r.budgetSession(ctx, s, trip); done || err != nil {
				return err
			}
		case <-r.escal:
			e, held, err := r.openHold(ctx)
			if err != nil {
				r.sup.log.Warn("read holds", "agent", r.agent.Name, "err", err)
				continue
			}
			if held {
				return r.holdSession(ctx, s, e)
			}
		case <-r.wake:
			// The engine takes urgent mail at its next tool boundary; and
			// only urgent mail interrupts, so other wakes need no query.
			if boundary || !r.urgentHint.Swap(false) {
				continue
			}
			if m, ok := r.urgentMail(ctx); ok {
				return r.interruptSession(ctx, s, m)
			}
		case c := <-r.ctl:
			r.pausePending = c == cmdPause
		case <-stageC:
			return r.stageTimedOut(ctx, s, *r.stage)
		case <-ctx.Done():
			return r.shutdownSession(ctx, s)
		}
	}
}

// stageTimedOut cancels a session whose dev-qa stage ran past its
// timeout: the stage is kept, a stage_timeout escalation is raised, and the
// session ends as timed out (the agent cools down, then works its stage
// again).
func (r *runner) stageTimedOut(ctx context.Context, s *session, st stageRun) error {
	cause := &StageTimeoutError{Stage: st}
	s.cancel(cause)
	res, _, stopped := r.awaitCancelled(ctx, s)
	if stopped {
		return r.shutdownSession(ctx, s)
	}
	r.logResult(s, res)
	r.checkCut(ctx, s)
	r.sup.raise(ctx, escalation.Draft{Kind: escalation.KindStageTimeout, Agent: r.agent.Name, Ref: escalation.ItemRef(st.Item),
		Summary: text.Truncate(fmt.Sprintf("item %s: %s's %s stage ran past its timeout of %s; session %d was cancelled and the item stays in %s",
			st.Item, r.agent.Name, st.State, st.Timeout, s.seq, st.State), 500),
		Details:   details(map[string]any{"item": st.Item, "workflow": st.Workflow, "stage": st.State, "timeout": st.Timeout.String(), "session_seq": s.seq}),
		DedupeKey: escalation.StageTimeoutKey(st.Item, string(st.State))})
	return r.endFailed(ctx, lifecycle.SessionExitedError, mailbox.SessionTimeout, cause, res.Usage)
}

// drain empties a signal channel.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// urgentMail returns the oldest queued urgent mail for the agent.
func (r *runner) urgentMail(ctx context.Context) (message.Message, bool) {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	q, err := r.sup.store.Queued(bctx, r.agent.Name)
	if err != nil {
		r.sup.log.Warn("read queued mail", "agent", r.agent.Name, "err", err)
		return message.Message{}, false
	}
	if len(q) > 0 && q[0].IsUrgent() {
		return q[0], true
	}
	return message.Message{}, false
}

func (r *runner) interruptSession(ctx context.Context, s *session, m message.Message) error {
	r.interrupt = InterruptFor(m, s.seq)
	cause := &UrgentError{Message: m}
	s.cancel(cause)
	if err := r.move(ctx, lifecycle.UrgentMail, lifecycle.Interrupting, cause.Error()); err != nil {
		r.waitEngine(s)
		return err
	}
	res, grace, stopped := r.awaitCancelled(ctx, s)
	switch {
	case stopped:
		return r.shutdownSession(ctx, s)
	case grace:
		return r.settleInterrupted(ctx, s, res, lifecycle.GraceExceeded, lifecycle.BuildingPrompt, fmt.Sprintf("still running after %s: process groups killed", r.agent.InterruptGrace))
	}
	return r.settleInterrupted(ctx, s, res, lifecycle.SessionExited, lifecycle.BuildingPrompt, "session ended after interrupt")
}

// waitEngine waits for a cancelled session's engine, at most killWait:
// an engine that ignores cancellation is logged and left behind rather
// than hanging the agent.
func (r *runner) waitEngine(s *session) engine.Result {
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case res := <-s.done:
		return res
	case <-t.C:
		r.sup.log.Error("engine did not return after its session was cancelled and its processes killed", "agent", r.agent.Name, "session_seq", s.seq, "waited", killWait)
		return engine.Result{Outcome: engine.Cancelled, Err: fmt.Errorf("the engine did not return within %s of being cancelled", killWait)}
	}
}

func (r *runner) killGroups(s *session) {
	for drained := false; !drained; {
		select {
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
		default:
			drained = true
		}
	}
	var killed []int
	for _, pg := range s.groups {
		sent, err := proc.KillSessionGroup(pg, sessionMarker(r.agent.Name, s.seq))
		if err != nil {
			r.sup.log.Warn("kill process group", "agent", r.agent.Name, "pgid", pg, "err", err)
		}
		if sent {
			killed = append(killed, pg)
		}
	}
	r.sup.afterKill(r.agent.Name, killed)
}

// afterKill cleans up after the process groups of agent's session were
// killed with SIGKILL: once they are gone, the index.lock a git commit
// killed half way left in the agent's worktree is removed (with it there,
// every later commit fails). Nothing else of the agent runs there.
func (s *Supervisor) afterKill(agent string, killed []int) {
	if len(killed) == 0 {
		return
	}
	// Real time: this waits for the operating system, not for the swarm.
	if !proc.AwaitGroupsGone(killed, 10*time.Millisecond, 2*time.Second, time.Sleep) {
		s.log.Warn("killed session processes still exist after 2s; leaving the worktree's git lock alone", "agent", agent, "pgids", killed)
		return
	}
	if removed, err := s.opts.Worktrees.RemoveStaleLock(agent); err != nil {
		s.log.Warn("remove stale git lock", "agent", agent, "err", err)
	} else if removed {
		s.log.Info("removed the index.lock a killed session left", "agent", agent)
	}
}

// settleInterrupted ends an interrupted session (its mail queued again)
// and moves the agent by ev to to, in one transaction.
func (r *runner) settleInterrupted(ctx context.Context, s *session, res engine.Result, ev lifecycle.Event, to lifecycle.State, cause string) error {
	r.logResult(s, res)
	r.checkCut(ctx, s)
	return r.inTx(ctx, func(tx mailbox.Tx) error {
		if err := tx.EndSession(r.sessionEnd(s.seq, mailbox.SessionInterrupted, res.Usage, r.interrupt.Reason)); err != nil {
			return err
		}
		return r.moveTx(tx, ev, to, cause)
	})
}

// shutdownSession stops a session because the supervisor is stopping: the
// session's context is already cancelled with the shutdown cause.
func (r *runner) shutdownSession(ctx context.Context, s *session) error {
	grace := r.sup.clock.NewTimer(r.agent.InterruptGrace)
	defer grace.Stop()
	var res engine.Result
	select {
	case res = <-s.done:
	case <-grace.C:
		r.killGroups(s)
		res = r.waitEngine(s)
	}
	r.logResult(s, res)
	r.checkCut(ctx, s)
	return r.inTx(ctx, func(tx mailbox.Tx) error {
		if err := tx.EndSession(r.sessionEnd(s.seq, mailbox.SessionInterrupted, res.Usage, "stopped: "+causeText(ctx))); err != nil {
			return err
		}
		return r.moveTx(tx, lifecycle.OperatorStop, lifecycle.Stopped, stopCause(ctx))
	})
}

func causeText(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "stopped"
}

// interject hands queued mail to an in-process session at a tool
// boundary: urgent mail with interrupt = "boundary", and protocol mail
// that asks for an ACK in any mode, so its clock starts while the agent
// can still act. The mail is delivered into the running session and each
// message is recorded as an UrgentInjected self-transition.
func (r *runner) interject(ctx context.Context, seq int64, boundary bool) []string {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	q, err := r.sup.store.Queued(bctx, r.agent.Name)
	if err != nil {
		r.sup.log.Warn("read queued mail", "agent", r.agent.Name, "err", err)
		return nil
	}
	var ids []int64
	for _, m := range q {
		if (boundary && m.IsUrgent()) || m.NeedsAck() {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// This runs on the engine's goroutine: it must not touch the runner's
	// fields, so it uses the store directly and announces after commit.
	var texts []string
	var notices []lifecycle.Notice
	var delivered []message.Message
	wctx, wcancel := bookkeeping(ctx)
	defer wcancel()
	err = r.sup.store.InTx(wctx, func(tx mailbox.Tx) error {
		ms, err := tx.Deliver(r.agent.Name, seq, ids)
		if err != nil {
			return err
		}
		delivered = ms
		for _, m := range ms {
			text, what := interjection(m, r.sup.clock.Now())
			texts = append(texts, text)
			cause := fmt.Sprintf("%s #%d from %s injected", what, m.ID, m.From)
			// A self-transition: recorded, but the runner's state is unchanged.
			e, err := fsm.Apply(tx, lifecycle.Table, fsm.SubjectAgent, r.agent.Name, lifecycle.Running, lifecycle.UrgentInjected, lifecycle.Running, cause, seq)
			if err != nil {
				return err
			}
			notices = append(notices, lifecycle.Notice{At: e.At, Agent: r.agent.Name, Kind: lifecycle.NoticeTransition, From: lifecycle.Running, To: lifecycle.Running, Cause: cause, Seq: seq})
		}
		return nil
	})
	if err != nil {
		r.sup.log.Warn("inject mail", "agent", r.agent.Name, "err", err)
		return nil
	}
	r.sup.acks.stored(delivered)
	for _, n := range notices {
		r.sup.bus.emit(n)
	}
	return texts
}

// interjection is how mail joining a running session reads, and what it
// is called in the event's cause.
func interjection(m message.Message, now time.Time) (text, what string) {
	if m.Kind == message.KindProtocol {
		if env, err := mailbox.Envelope(m); err == nil {
			return fmt.Sprintf("[PROTOCOL] From %s (#%d):\n%s", m.From, m.ID, strings.TrimRight(protocol.RenderPrompt(env, ackState(m), now), "\n")), "protocol mail"
		}
	}
	return fmt.Sprintf("[URGENT] From %s: %s", m.From, m.Body), "urgent mail"
}

// ackState is what the prompt shows of a message's ACK record.
func ackState(m message.Message) protocol.AckState {
	var a protocol.AckState
	if m.Ack != nil {
		if m.Ack.DueAt != nil {
			a.Deadline = *m.Ack.DueAt
		}
		a.Acked = m.Ack.State == message.AckAcked
	}
	return a
}

// messenger is the engine's way to send mail as the agent, through the
// supervisor's poster: validated, stored, and the recipient woken.
type messenger struct {
	poster *mailbox.Poster
	agent  string
	caller identity.Caller // the running session
	verbs  Verbs
}

func (m messenger) Send(ctx context.Context, to, body string, urgent bool, replyTo int64) (int64, error) {
	d := message.Draft{From: m.agent, To: to, Body: body, ReplyTo: replyTo}
	if urgent {
		d.Urgency = message.Urgent
	}
	msg, err := m.verbs.Send(ctx, m.caller, m.poster, d)
	if err != nil {
		return 0, err
	}
	return msg.ID, nil
}
