package swarm

import (
	"context"
	"fmt"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
)

// Holds are levels, like everything the runner recovers: an agent is held
// while an unresolved holding escalation about it exists in the store. The
// runner checks that level whenever a session could start (Initializing,
// BuildingPrompt) and whenever the desk says an escalation about it
// changed; so a hold raised by another process, one that survived a kill
// -9, and one raised by the runner itself all act the same way, and
// releasing needs nothing but the row being resolved.

// escalated tells the runner that an escalation about its agent changed.
func (r *runner) escalated() {
	select {
	case r.escal <- struct{}{}:
	default:
	}
}

// openHold returns the oldest unresolved holding escalation about the
// agent, if there is one.
func (r *runner) openHold(ctx context.Context) (escalation.Escalation, bool, error) {
	es, err := r.sup.store.Escalations(bg(ctx), mailbox.EscalationFilter{Agent: r.agent.Name})
	if err != nil {
		return escalation.Escalation{}, false, err
	}
	var hold escalation.Escalation
	found := false
	for _, e := range es {
		if e.Holds() && (!found || e.ID < hold.ID) {
			hold, found = e, true
		}
	}
	return hold, found, nil
}

// holdIfHeld moves the agent to Held when a hold is open, and reports
// whether it did.
func (r *runner) holdIfHeld(ctx context.Context) (bool, error) {
	e, ok, err := r.openHold(ctx)
	if err != nil || !ok {
		return false, err
	}
	if e.Kind == escalation.KindBudget {
		// A budget no longer spent (a higher limit since a restart) holds
		// nothing: swarm clears its escalation first.
		if err := r.clearBudgetHolds(ctx); err != nil {
			return false, err
		}
		if e, ok, err = r.openHold(ctx); err != nil || !ok {
			return false, err
		}
	}
	return true, r.move(ctx, lifecycle.Hold, lifecycle.Held, (&HeldError{Escalation: e.ID}).Error())
}

// held waits, starting no session, until every holding escalation about
// the agent is resolved; then the newest decision says whether it carries
// on (resume, approve) or goes Idle (abort, reject).
func (r *runner) held(ctx context.Context) error {
	for {
		// A reload (or a restart) may have raised the limit of a budget
		// that holds the agent: swarm clears what is no longer spent.
		r.applyReloaded()
		if err := r.clearBudgetHolds(ctx); err != nil {
			return err
		}
		_, ok, err := r.openHold(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return r.release(ctx)
		}
		if err := r.awaitEscalation(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return r.stop(ctx, stopCause(ctx))
		}
	}
}

// awaitEscalation blocks until an escalation about the agent changes or
// ctx ends. Mail waits in the mailbox; pause and resume are remembered.
func (r *runner) awaitEscalation(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.escal:
			return nil
		case c := <-r.ctl:
			r.control(c)
		case <-r.wake:
			r.urgentHint.Store(false)
		}
	}
}

// release ends a hold whose escalations are all resolved.
func (r *runner) release(ctx context.Context) error {
	es, err := r.sup.store.Escalations(bg(ctx), mailbox.EscalationFilter{All: true, Agent: r.agent.Name})
	if err != nil {
		return err
	}
	var last *escalation.Escalation
	for i, e := range es {
		if !e.Hold || e.State != escalation.Resolved || e.ResolvedAt == nil {
			continue
		}
		if last == nil || e.ResolvedAt.After(*last.ResolvedAt) || e.ResolvedAt.Equal(*last.ResolvedAt) && e.ID > last.ID {
			last = &es[i]
		}
	}
	if last == nil {
		return r.move(ctx, lifecycle.Release, lifecycle.BuildingPrompt, "released")
	}
	if last.Decision == nil {
		return r.move(ctx, lifecycle.Release, lifecycle.BuildingPrompt, fmt.Sprintf("released: escalation %d cleared by swarm", last.ID))
	}
	cause := fmt.Sprintf("%s: escalation %d", *last.Decision, last.ID)
	if !last.Decision.Releases() {
		return r.move(ctx, lifecycle.Abort, lifecycle.Idle, cause)
	}
	return r.move(ctx, lifecycle.Release, lifecycle.BuildingPrompt, cause)
}

// holdSession interrupts the running session because a holding
// escalation opened: like an urgent interrupt (cancelled with the cause,
// given interrupt_grace, then its process groups killed), its mail is
// queued again and the agent goes Held.
func (r *runner) holdSession(ctx context.Context, s *session, e escalation.Escalation) error {
	cause := &HeldError{Escalation: e.ID}
	now := r.sup.clock.Now()
	r.interrupt = &Interrupt{Seq: s.seq, Reason: cause.Error(), At: &now}
	s.cancel(cause)
	res, grace, stopped := r.awaitCancelled(ctx, s)
	if stopped {
		return r.shutdownSession(ctx, s)
	}
	why := cause.Error()
	if grace {
		why = fmt.Sprintf("%s; still running after %s: process groups killed", why, r.agent.InterruptGrace)
	}
	return r.settleInterrupted(ctx, s, res, lifecycle.Hold, lifecycle.Held, why)
}

// awaitCancelled waits for a cancelled session's engine, killing its
// process groups after interrupt_grace. stopped reports that ctx ended
// first (the caller shuts the session down).
func (r *runner) awaitCancelled(ctx context.Context, s *session) (res engine.Result, graceExceeded, stopped bool) {
	grace := r.sup.clock.NewTimer(r.agent.InterruptGrace)
	defer grace.Stop()
	for {
		select {
		case res := <-s.done:
			return res, false, false
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
		case <-grace.C:
			r.killGroups(s)
			return r.waitEngine(s), true, false
		case <-ctx.Done():
			return engine.Result{}, false, true
		}
	}
}

// decisions returns the operator's decisions on escalations about the
// agent that no prompt has carried yet.
func (r *runner) decisions(ctx context.Context) ([]escalation.Escalation, error) {
	return r.sup.store.Escalations(bg(ctx), mailbox.EscalationFilter{Agent: r.agent.Name, Unshown: true})
}

// waitingDecision returns a decision that lets the agent carry on (resume
// or approve) and that no prompt has carried yet: work waiting, so an
// agent that asked and went idle hears the answer. Abort and reject do
// not wake it; its next prompt carries them.
func (r *runner) waitingDecision(ctx context.Context) (escalation.Escalation, bool, error) {
	ds, err := r.decisions(ctx)
	if err != nil {
		return escalation.Escalation{}, false, err
	}
	for _, d := range ds {
		if d.Decision != nil && d.Decision.Releases() {
			return d, true, nil
		}
	}
	return escalation.Escalation{}, false, nil
}

// touch records activity of the running session, for the stalled check.
func (r *runner) touch() { r.lastActivity.Store(r.sup.clock.Now().UnixNano()) }

// activityLog is a session's log writer that counts every write as
// activity: an exec agent's output, an in-process engine's conversation.
type activityLog struct {
	w     interface{ Write([]byte) (int, error) }
	touch func()
}

func (a activityLog) Write(p []byte) (int, error) {
	a.touch()
	return a.w.Write(p)
}
