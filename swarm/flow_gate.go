package swarm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/workflow"
)

// dev-qa's session gate: one agent of a dev-qa workflow runs at a time
// (the slots), an agent whose stage it is not waits, and a session that
// opens a stage starts the stage's clock.

// gated lists the dev-qa workflows agent belongs to.
func (f *flow) gated(agent string) []config.Workflow {
	var out []config.Workflow
	for _, w := range f.d.Workflows {
		if w.Kind == workflow.DevQA && w.RoleOf(agent) != "" {
			out = append(out, w)
		}
	}
	return out
}

// blocked says why agent may not start a session now, "" when it may.
// The caller holds f.mu.
func (f *flow) blocked(ctx context.Context, agent string, ws []config.Workflow) string {
	for _, w := range ws {
		if holder := f.slots[w.Name]; holder != "" && holder != agent {
			return fmt.Sprintf("workflow %s runs one agent at a time, and %s is in a session", w.Name, holder)
		}
		// A member another supervisor runs (a swarm on several hosts)
		// holds no slot here: its running session is read from the store.
		for _, m := range w.Members() {
			if f.d.Local(m) || m == agent {
				continue
			}
			bctx, cancel := bookkeeping(ctx)
			_, err := f.d.Store.LastSession(bctx, m, mailbox.SessionRunning)
			cancel()
			if err == nil {
				return fmt.Sprintf("workflow %s runs one agent at a time, and %s is in a session (run by another supervisor)", w.Name, m)
			} else if !errors.Is(err, mailbox.ErrNoSuchSession) {
				return fmt.Sprintf("workflow %s: %v", w.Name, err)
			}
		}
		bctx, cancel := bookkeeping(ctx)
		items, err := f.d.Store.Items(bctx, w.Name)
		cancel()
		if err != nil {
			return fmt.Sprintf("workflow %s: %v", w.Name, err)
		}
		if it, ok := activeQA(items); ok {
			if role, working := workflow.Stage(it.State); working && w.Role(role) != agent {
				return fmt.Sprintf("workflow %s: item %s is in %s, %s's stage", w.Name, it.ID, it.State, w.Role(role))
			}
		}
	}
	return ""
}

// mayStart reports whether agent may start a session now.
func (f *flow) mayStart(ctx context.Context, agent string) (bool, string) {
	ws := f.gated(agent)
	if len(ws) == 0 {
		return true, ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	why := f.blocked(ctx, agent, ws)
	return why == "", why
}

// acquire takes the session slots of agent's dev-qa workflows, all or
// none.
func (f *flow) acquire(ctx context.Context, agent string) (bool, string) {
	ws := f.gated(agent)
	if len(ws) == 0 {
		return true, ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if why := f.blocked(ctx, agent, ws); why != "" {
		return false, why
	}
	for _, w := range ws {
		f.slots[w.Name] = agent
	}
	return true, ""
}

// release gives up agent's slots, and wakes the others it kept waiting.
func (f *flow) release(agent string) {
	var freed []config.Workflow
	f.mu.Lock()
	for _, w := range f.gated(agent) {
		if f.slots[w.Name] == agent {
			delete(f.slots, w.Name)
			freed = append(freed, w)
		}
	}
	f.mu.Unlock()
	for _, w := range freed {
		f.wakeMembers(w)
	}
}

// stageRun is the dev-qa stage a session works in, and when it times out.
type stageRun struct {
	Workflow string
	Item     string
	State    workflow.State
	Deadline time.Time
	Timeout  time.Duration
}

// opening is called when agent's session is about to start: a READY item
// whose stage is the agent's moves into its working state (DEV_READY →
// DEV), and the stage's clock starts (decideOpening). nil when the session
// works in no stage.
func (f *flow) opening(ctx context.Context, agent string) *stageRun {
	for _, w := range f.gated(agent) {
		bctx, cancel := bookkeeping(ctx)
		items, err := f.d.Store.Items(bctx, w.Name)
		cancel()
		if err != nil {
			f.d.Log.Warn("read work items", "workflow", w.Name, "err", err)
			continue
		}
		now := f.d.Clock.Now()
		it, a, ok := decideOpening(w, items, agent, now)
		if !ok {
			continue
		}
		if err := f.apply(ctx, w, it, []action{a}); err != nil {
			f.d.Log.Warn("open the stage", "item", it.ID, "err", err)
			continue
		}
		d := w.StageTimeout(it.Complex)
		return &stageRun{Workflow: w.Name, Item: it.ID, State: a.To, Deadline: now.Add(d), Timeout: d}
	}
	return nil
}

// StageTimeoutError is the cancellation cause of a session whose dev-qa
// stage ran past its timeout.
type StageTimeoutError struct{ Stage stageRun }

func (e *StageTimeoutError) Error() string {
	return fmt.Sprintf("stage %s of item %s (workflow %s) ran past its timeout of %s", e.Stage.State, e.Stage.Item, e.Stage.Workflow, e.Stage.Timeout)
}
