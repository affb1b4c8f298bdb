package swarm

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// afterSession decides between another session and Idle.
func (r *runner) afterSession(ctx context.Context) error {
	// Engines that report usage only at the end are held to their budget
	// here.
	if moved, err := r.enforceBudget(ctx); moved || err != nil {
		return err
	}
	// A pause and a resume that came while the session ended are both
	// taken before deciding.
	r.applyControl()
	if r.pausePending {
		r.pausePending = false
		return r.move(ctx, lifecycle.Pause, lifecycle.Paused, "paused by operator")
	}
	why, ok, err := r.workWaiting(ctx)
	if err != nil {
		return err
	}
	if ok {
		return r.move(ctx, lifecycle.WorkWaiting, lifecycle.BuildingPrompt, why)
	}
	return r.move(ctx, lifecycle.NoWork, lifecycle.Idle, "")
}

// workWaiting reports whether the agent has work: queued mail of a waking
// kind, a ready task its mode may claim that its last completed session
// did not list, or work its engine knows of (a script with blocks left).
func (r *runner) workWaiting(ctx context.Context) (string, bool, error) {
	// A dev-qa workflow's agent waits for its turn, whatever it has.
	if ok, _ := r.sup.flow.mayStart(ctx, r.agent.Name); !ok {
		return "", false, nil
	}
	// Nor does an agent whose spent budget the operator aborted: its work
	// waits until the window frees up or the limit is raised.
	r.budgetWait = false
	if blocked, err := r.budgetBlocked(ctx); err != nil || blocked {
		r.budgetWait = blocked
		return "", false, err
	}
	c, err := r.sup.store.Pending(bg(ctx), r.agent.Name)
	if err != nil {
		return "", false, err
	}
	if c.Waking > 0 {
		return fmt.Sprintf("%d message(s) waiting", c.Waking), true, nil
	}
	if d, ok, err := r.waitingDecision(ctx); err != nil {
		return "", false, err
	} else if ok {
		return fmt.Sprintf("operator decision on escalation %d: %s", d.ID, *d.Decision), true, nil
	}
	if ws, ok := r.eng.(engine.WorkSource); ok && ws.HasWork(r.agent.Name, r.seq+1) {
		return "scripted work waiting", true, nil
	}
	if id, ok := r.newTask(ctx); ok {
		return "ready task " + id, true, nil
	}
	if n, ok := r.queueMoved(ctx); ok {
		return fmt.Sprintf("queue: %d ready task(s)", n), true, nil
	}
	return "", false, nil
}

// queueMoved reports, for an agent with the queue strategy, whether its
// queue still has ready tasks and changed since its last completed session
// saw it: that session took a task off, so the next one takes the next
// task without waiting for mail. An unchanged queue (the agent took
// nothing) waits, so an agent that cannot finish a task does not loop.
func (r *runner) queueMoved(ctx context.Context) (int, bool) {
	v := r.agent.Spec().Vector()
	if r.sup.opts.Tasks == nil || r.agent.Spec().EffectiveStrategy() != mode.Queue || !v.Has(mode.CanUseQueue) {
		return 0, false
	}
	ids, ok := r.sup.opts.Tasks.ReadyIDs(ctx)
	if !ok || len(ids) == 0 {
		return 0, false
	}
	a, b := slices.Clone(ids), slices.Clone(r.lastTasks)
	slices.Sort(a)
	slices.Sort(b)
	if slices.Equal(a, b) {
		return 0, false
	}
	return len(ids), true
}

func (r *runner) newTask(ctx context.Context) (string, bool) {
	if r.sup.opts.Tasks == nil || !r.agent.Spec().Vector().Has(mode.CanClaimTasks) {
		return "", false
	}
	ids, ok := r.sup.opts.Tasks.ReadyIDs(ctx)
	if !ok {
		return "", false
	}
	for _, id := range ids {
		if !slices.Contains(r.lastTasks, id) {
			return id, true
		}
	}
	return "", false
}

// idle waits for work without spending anything: mail, a new ready task
// (checked every task_poll), or a nudge when it has been idle long.
func (r *runner) idle(ctx context.Context) error {
	r.applyReloaded()
	live := r.sup.liveness()
	why, ok, err := r.workWaiting(ctx)
	if err != nil {
		return err
	}
	if ok {
		return r.move(ctx, lifecycle.Wake, lifecycle.BuildingPrompt, why)
	}
	// An ephemeral spawned agent with no work left retires.
	if sp := r.agent.Spawned; sp != nil && sp.Ephemeral {
		return r.retire(ctx)
	}
	poll := r.sup.clock.NewTimer(live.TaskPoll)
	defer poll.Stop()
	var nudgeC <-chan time.Time
	a, err := r.sup.store.Agent(bg(ctx), r.agent.Name)
	if err != nil {
		return err
	}
	nudges := a.Nudges
	if live.NudgeAfter > 0 && nudges < live.MaxNudges {
		d := live.NudgeAfter
		if nudges > 0 {
			d = live.NudgeEvery
		}
		t := r.sup.clock.NewTimer(d)
		defer t.Stop()
		nudgeC = t.C
	}
	if h := r.sup.idleHook; h != nil {
		h(r.agent.Name) // tests: the runner found no work and now waits
	}
	for {
		select {
		case <-ctx.Done():
			return r.stop(ctx, stopCause(ctx))
		case <-r.wake:
			r.urgentHint.Store(false)
			c, err := r.sup.store.Pending(bg(ctx), r.agent.Name)
			if err != nil {
				r.sup.log.Warn("count waiting mail", "agent", r.agent.Name, "err", err)
				continue
			}
			if c.Waking > 0 {
				if ok, _ := r.sup.flow.mayStart(ctx, r.agent.Name); !ok {
					continue
				}
				if blocked, err := r.budgetBlocked(ctx); err != nil || blocked {
					r.budgetWait = blocked
					if err != nil {
						return err
					}
					continue
				}
				return r.move(ctx, lifecycle.Wake, lifecycle.BuildingPrompt, fmt.Sprintf("%d message(s) waiting", c.Waking))
			}
		case <-r.escal:
			if held, err := r.holdIfHeld(ctx); held || err != nil {
				return err
			}
			// A reload may have raised the limit that held the work back.
			r.applyReloaded()
			if r.budgetWait {
				if why, ok, err := r.workWaiting(ctx); err != nil || ok {
					if err != nil {
						return err
					}
					return r.move(ctx, lifecycle.Wake, lifecycle.BuildingPrompt, why)
				}
			}
			if d, ok, err := r.waitingDecision(ctx); err != nil {
				return err
			} else if ok {
				return r.move(ctx, lifecycle.Wake, lifecycle.BuildingPrompt, fmt.Sprintf("operator decision on escalation %d: %s", d.ID, *d.Decision))
			}
		case <-poll.C:
			// The budget window moves on: work held back may start now.
			if r.budgetWait {
				if why, ok, err := r.workWaiting(ctx); err != nil || ok {
					if err != nil {
						return err
					}
					return r.move(ctx, lifecycle.Wake, lifecycle.BuildingPrompt, why)
				}
			}
			if id, ok := r.newTask(ctx); ok {
				return r.move(ctx, lifecycle.Wake, lifecycle.BuildingPrompt, "ready task "+id)
			}
			poll.Reset(live.TaskPoll)
		case <-nudgeC:
			if r.budgetWait {
				continue // a nudge would only queue mail that cannot start
			}
			if err := bounded(ctx, func(c context.Context) error { return r.sup.store.SetNudges(c, r.agent.Name, nudges+1) }); err != nil {
				return err
			}
			body := fmt.Sprintf("You have been idle for a while (nudge %d of %d). Check your mail and the ready tasks; if there is nothing to do, say so to operator and end the session.", nudges+1, live.MaxNudges)
			if err := bounded(ctx, func(c context.Context) error {
				_, err := r.sup.poster.Post(c, message.Draft{From: message.Operator, To: r.agent.Name, Kind: message.KindNudge, Body: body})
				return err
			}); err != nil {
				return err
			}
			return r.move(ctx, lifecycle.Wake, lifecycle.BuildingPrompt, fmt.Sprintf("nudge %d", nudges+1))
		case c := <-r.ctl:
			if c == cmdPause {
				return r.move(ctx, lifecycle.Pause, lifecycle.Paused, "paused by operator")
			}
		}
	}
}

// realWork reports whether a session has more than nudges to do: mail of
// another kind, or a ready task its last completed session did not list.
// Such a session starts the nudge count over, however the agent got to it.
func (r *runner) realWork(mail []message.Message, tasks []string) bool {
	for _, m := range mail {
		if m.Kind != message.KindNudge {
			return true
		}
	}
	for _, id := range tasks {
		if !slices.Contains(r.lastTasks, id) {
			return true
		}
	}
	return false
}

// Backoff is the wait after the nth consecutive error: doubling from min,
// capped at max, with ±20% jitter from rnd in [0, 1).
func Backoff(n int, lo, hi time.Duration, rnd float64) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return time.Duration(float64(d) * (0.8 + 0.4*rnd))
}

func (r *runner) coolDown(ctx context.Context) error {
	a, err := r.sup.store.Agent(bg(ctx), r.agent.Name)
	if err != nil {
		return err
	}
	r.applyControl()
	if r.pausePending {
		r.pausePending = false
		return r.move(ctx, lifecycle.Pause, lifecycle.Paused, "paused by operator")
	}
	lim := r.sup.cfg.Errors
	d := Backoff(a.ConsecutiveErrors, lim.BackoffMin, lim.BackoffMax, r.sup.opts.Rand())
	t := r.sup.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return r.stop(ctx, stopCause(ctx))
		case <-t.C:
			return r.move(ctx, lifecycle.BackoffElapsed, lifecycle.BuildingPrompt, fmt.Sprintf("waited %s", d.Round(time.Millisecond)))
		case <-r.wake:
			if !r.urgentHint.Swap(false) {
				continue
			}
			if m, ok := r.urgentMail(ctx); ok {
				return r.move(ctx, lifecycle.UrgentMail, lifecycle.BuildingPrompt, (&UrgentError{Message: m}).Error())
			}
		case <-r.escal:
			if held, err := r.holdIfHeld(ctx); held || err != nil {
				return err
			}
		case c := <-r.ctl:
			if c == cmdPause {
				return r.move(ctx, lifecycle.Pause, lifecycle.Paused, "paused by operator")
			}
		}
	}
}

func (r *runner) paused(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return r.stop(ctx, stopCause(ctx))
		case c := <-r.ctl:
			if c != cmdResume {
				continue
			}
			why, ok, err := r.workWaiting(ctx)
			if err != nil {
				return err
			}
			if ok {
				return r.move(ctx, lifecycle.Resume, lifecycle.BuildingPrompt, "resumed: "+why)
			}
			return r.move(ctx, lifecycle.Resume, lifecycle.Idle, "resumed")
		case <-r.escal:
			if held, err := r.holdIfHeld(ctx); held || err != nil {
				return err
			}
		case <-r.wake:
		}
	}
}
