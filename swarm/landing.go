package swarm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
)

// The merge queue's primitives (DESIGN §14): Enqueue stores a candidate,
// as the verbs (verbs.Land) and the runtime (a dev-qa item queued at
// QA_PASSED) do; WaitLanded follows one until it leaves the queue. Who may
// land what is the verbs' rule, not theirs.

// Enqueue stores a queued candidate with its first event; a live twin
// (the same agent and commit, queued or testing) is returned instead,
// with already set.
func Enqueue(ctx context.Context, st mailbox.Store, c merge.Candidate) (merge.Candidate, bool, error) {
	var out merge.Candidate
	err := st.InTx(ctx, func(tx mailbox.Tx) error {
		var err error
		out, err = tx.EnqueueCandidate(c)
		if err != nil {
			return err
		}
		cause := fmt.Sprintf("%s by %s", c.Source, c.By)
		if c.Item != "" {
			cause += " (item " + c.Item + ")"
		}
		_, err = fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(out.ID), "", merge.Enqueue, merge.Queued, cause, 0)
		return err
	})
	var qe *mailbox.QueuedError
	if errors.As(err, &qe) {
		return qe.Candidate, true, nil
	}
	if err != nil {
		return out, false, fmt.Errorf("queue %s's commit %s: %w", c.Agent, merge.Short(c.Commit), err)
	}
	return out, false, nil
}

// WaitLanded polls candidate id until it leaves the queue (or ctx ends),
// every poll: what `swarm land --wait` and a merge the supervisor tests
// wait on.
func WaitLanded(ctx context.Context, st mailbox.Store, id int64, poll time.Duration) (merge.Candidate, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		c, err := st.Candidate(ctx, id)
		if err != nil || !c.State.Live() {
			return c, err
		}
		select {
		case <-ctx.Done():
			return c, context.Cause(ctx)
		case <-t.C:
		}
	}
}
