package verbs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mode"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/beads"
)

// Queue is execute/queue's task queue over beads: `bd ready` is the queue,
// start claims, complete closes, fail gives a task back as blocked.
type Queue struct {
	Client *beads.Client // runs as the agent (Actor), in its worktree
	// Caller uses the queue: a session needs can_use_queue.
	Caller identity.Caller
}

func (q Queue) allowed(op string) error {
	return q.Caller.Require(mode.CanUseQueue, "swarm queue "+op)
}

// ErrQueueEmpty means no ready task is left.
var ErrQueueEmpty = errors.New("the queue is empty: no ready task")

// Top is the next task: the ready task of highest priority (then lowest
// id), epics left out (an epic is a container, not work).
func (q Queue) Top(ctx context.Context) (beads.Issue, error) {
	if err := q.allowed("top"); err != nil {
		return beads.Issue{}, err
	}
	ready, err := q.Client.Ready(ctx)
	if err != nil {
		return beads.Issue{}, queueError(err)
	}
	ready = slices.DeleteFunc(ready, beads.Issue.IsEpic)
	if len(ready) == 0 {
		return beads.Issue{}, ErrQueueEmpty
	}
	slices.SortStableFunc(ready, func(a, b beads.Issue) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.ID, b.ID))
	})
	return ready[0], nil
}

// Start claims task id for the agent.
func (q Queue) Start(ctx context.Context, id string) error {
	if err := q.allowed("start"); err != nil {
		return err
	}
	_, err := q.Client.Claim(ctx, id)
	return queueError(err)
}

// Complete closes task id.
func (q Queue) Complete(ctx context.Context, id, reason string) error {
	if err := q.allowed("complete"); err != nil {
		return err
	}
	if reason == "" {
		reason = "done"
	}
	_, err := q.Client.Close(ctx, id, reason)
	return queueError(err)
}

// Fail gives task id back as blocked, so the queue moves on.
func (q Queue) Fail(ctx context.Context, id string) error {
	if err := q.allowed("fail"); err != nil {
		return err
	}
	_, err := q.Client.SetStatus(ctx, id, "blocked")
	return queueError(err)
}

func queueError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, beads.ErrNotInstalled):
		return fmt.Errorf("the queue needs bd (beads), which is not installed: install it, or use strategy = \"simple\"")
	case errors.Is(err, beads.ErrNoDatabase):
		return fmt.Errorf("the queue needs a beads database: run 'bd init' in the repository")
	}
	return err
}
