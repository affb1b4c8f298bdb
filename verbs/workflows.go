package verbs

import (
	"context"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/workflow"
	"github.com/swarmhq/swarm/worktree"
)

// The workflow verbs (DESIGN §9.3): start, signal, abort, merge, status,
// history. The supervisor's flow moves items as the runtime through the
// same store transitions; these are the doors' way in.

// StartRequest is `swarm workflow start`.
type StartRequest = swarm.StartRequest

// SignalRequest is `swarm workflow signal`.
type SignalRequest = swarm.SignalRequest

// Status is one workflow's state as `swarm workflow status` prints it.
type Status = swarm.Status

// StartItem is the start verb: caller (the operator, or a session with
// can_dispatch) starts a work item; the history records it as the trigger.
func StartItem(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, req StartRequest) (workflow.Item, error) {
	req.Caller = c
	return swarm.StartItem(ctx, st, cfg, req)
}

// SignalItem is the signal verb: only the stage's agent's session signals
// an item (the operator never does: it aborts or decides).
func SignalItem(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, req SignalRequest) (workflow.Item, error) {
	req.Caller = c
	return swarm.SignalItem(ctx, st, cfg, req)
}

// AbortItem is the abort verb, the operator's: it ends a live item.
func AbortItem(ctx context.Context, c identity.Caller, st mailbox.Store, id, note string) (workflow.Item, error) {
	if err := operatorOnly(c, "swarm workflow abort"); err != nil {
		return workflow.Item{}, err
	}
	return swarm.AbortItem(ctx, st, id, note)
}

// MergeItem is the workflow merge verb, the operator's: the reviewed
// commit lands at once through the merge queue (q).
func MergeItem(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, q *swarm.MergeQueue, id string) (workflow.Item, worktree.Landing, error) {
	if err := operatorOnly(c, "swarm workflow merge"); err != nil {
		return workflow.Item{}, worktree.Landing{}, err
	}
	return swarm.MergeItemLanding(ctx, st, cfg, q, c, id)
}

// MergeApproved merges the item an approved approval escalation is about
// (after `swarm escalation approve`), if it is one; it reports whether it
// was. The operator's, as the merge is.
func MergeApproved(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, q *swarm.MergeQueue, e escalation.Escalation) (workflow.Item, string, bool, error) {
	if err := operatorOnly(c, "swarm workflow merge"); err != nil {
		return workflow.Item{}, "", false, err
	}
	return swarm.MergeApproved(ctx, st, cfg, q, c, e)
}

// WorkflowStatus is the status verb: each workflow's items (name "" for
// all). A read any caller the door knows may make.
func WorkflowStatus(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, name string) ([]Status, error) {
	if !c.Known() {
		return nil, operatorOnly(c, "swarm workflow status")
	}
	return swarm.WorkflowStatus(ctx, st, cfg, name)
}

// History is the history verb: the items' events, oldest first. A read.
func History(ctx context.Context, c identity.Caller, st mailbox.Store, ids ...string) ([]workflow.Entry, error) {
	if !c.Known() {
		return nil, operatorOnly(c, "swarm workflow history")
	}
	return swarm.History(ctx, st, ids...)
}
