package swarm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/workflow"
	"github.com/swarmhq/swarm/worktree"
)

// This file is the workflows' primitives (DESIGN §9.3) that the verbs
// (package verbs: start, signal, abort, merge, status, history) and the
// runtime share. They write rows and transitions only; the supervisor's flow
// service (flow.go) sends the workflow's messages from the runtime's
// address, runs CI, and reacts to answers and decisions.

// WorkflowGit is what the workflows need of git (worktree.Manager).
type WorkflowGit interface {
	// Tip is the commit swarm/<agent> points at.
	Tip(ctx context.Context, agent string) (string, error)
	// ReviewDiff is git diff <base>...<commit>, whole files while they
	// fit in max bytes, naming those left out.
	ReviewDiff(ctx context.Context, commit string, max int) (worktree.ReviewPatch, error)
	// Land puts a commit of swarm/<agent> on the base branch, journaled
	// so that an interrupted run is finished or dropped by the next one
	// (worktree.Land); the agent's worktree and branch stay.
	Land(ctx context.Context, req worktree.LandRequest) (worktree.Landing, error)
	// ForgetLanding drops the journal entry of a landing whose outcome is
	// recorded.
	ForgetLanding(key string) error
	// Path is the agent's worktree.
	Path(agent string) string
}

// StartRequest is `swarm workflow start`.
type StartRequest struct {
	Workflow string
	Item     string
	Title    string
	Criteria []string
	Risk     string
	Complex  bool
	// Caller starts the item (verbs.StartItem checks can_dispatch); the history
	// records it as the trigger.
	Caller identity.Caller
}

// UsageError is invalid input to a workflow command (exit 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// StartItem stores a new item in its workflow's first state. The running
// supervisor (poke it) sends the first message; with none running, the
// next `swarm up` does.
func StartItem(ctx context.Context, st mailbox.Store, cfg *config.Config, req StartRequest) (workflow.Item, error) {
	w, ok := cfg.Workflow(req.Workflow)
	if !ok {
		if len(cfg.Workflows) == 0 {
			return workflow.Item{}, usage("no workflow %q: swarm.toml has no [[workflow]]; add one (see 'swarm workflow --help')", req.Workflow)
		}
		return workflow.Item{}, usage("no workflow %q (swarm.toml has %s)", req.Workflow, strings.Join(cfg.WorkflowNames(), ", "))
	}
	if err := workflow.ValidID(req.Item); err != nil {
		return workflow.Item{}, usage("%v", err)
	}
	title := strings.TrimSpace(req.Title)
	if title == "" {
		return workflow.Item{}, usage("the item needs a title: --title \"what to build\"")
	}
	risk, err := workflow.ParseRisk(req.Risk)
	if err != nil {
		return workflow.Item{}, usage("%v", err)
	}
	var criteria []string
	for _, c := range req.Criteria {
		if c = strings.TrimSpace(c); c != "" {
			criteria = append(criteria, c)
		}
	}
	it := workflow.Item{ID: req.Item, Workflow: w.Name, Kind: w.Kind, Title: title, Criteria: criteria, Risk: risk, Complex: req.Complex}
	switch w.Kind {
	case workflow.DevReview:
		if len(criteria) == 0 {
			return workflow.Item{}, usage("a dev-review item needs at least one --criterion: what the reviewer checks, such as --criterion \"the tests pass\"")
		}
		it.State, it.Agent = workflow.Dispatched, w.Dev
	case workflow.DevQA:
		it.State = workflow.Start
	}
	by := req.Caller.By()
	if by == "" {
		by = message.Operator
	}
	err = st.InTx(ctx, func(tx mailbox.Tx) error {
		if err := tx.InsertItem(it); err != nil {
			return err
		}
		_, err := fsm.ApplyBy(tx, w.Kind.Table(), fsm.SubjectItem, it.ID, "", workflow.Create, it.State, "started: "+text.Truncate(title, 200), by)
		return err
	})
	if errors.Is(err, mailbox.ErrItemExists) {
		old, rerr := st.Item(ctx, it.ID)
		if rerr == nil {
			return workflow.Item{}, usage("item %s exists already (workflow %s, %s); pick another id, or see 'swarm workflow history %s'", it.ID, old.Workflow, old.State, it.ID)
		}
		return workflow.Item{}, usage("item %s exists already; pick another id", it.ID)
	}
	if err != nil {
		return workflow.Item{}, fmt.Errorf("start item %s: %w", it.ID, err)
	}
	return st.Item(ctx, it.ID)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// activeQA is the dev-qa item being worked: the oldest live one that has
// left START. Items are worked first in, first out.
func activeQA(items []workflow.Item) (workflow.Item, bool) {
	for _, it := range items {
		if it.Live() && it.State != workflow.Start {
			return it, true
		}
	}
	return workflow.Item{}, false
}

// ActiveQA is activeQA for the verbs (verbs.SignalItem, WorkflowStatus).
func ActiveQA(items []workflow.Item) (workflow.Item, bool) { return activeQA(items) }

// AbortTx aborts item it in tx, as the operator's verbs.AbortItem and the
// flow do: the item moves to aborted with cause, by whom, and its
// dispatch's and request's ACKs are cancelled.
func AbortTx(tx mailbox.Tx, it workflow.Item, cause, by string) error {
	return abortTx(tx, it, cause, by)
}

func abortTx(tx mailbox.Tx, it workflow.Item, cause, by string) error {
	cur, err := tx.Item(it.ID)
	if err != nil {
		return err
	}
	if _, err := fsm.ApplyBy(tx, cur.Kind.Table(), fsm.SubjectItem, cur.ID, cur.State, workflow.Abort, workflow.Aborted, cause, by); err != nil {
		return err
	}
	for _, msg := range []string{cur.Dispatch, cur.Request} {
		if msg == "" {
			continue
		}
		if _, err := tx.CancelAck(msg); err != nil && !errors.Is(err, mailbox.ErrAckClosed) && !errors.Is(err, mailbox.ErrNoSuchMessage) {
			return err
		}
	}
	cur.Agent = ""
	return tx.UpdateItem(cur)
}

// ErrNeedsApproval refuses the merge of an item that waits for the
// operator's approval.
var ErrNeedsApproval = errors.New("needs the operator's approval")

// itemLanding is the journal key of an item's landing.
func itemLanding(id string) string { return "item-" + id }

// MergeItem merges an approved dev-review item: the commit the review was
// computed at goes into the base branch; dev's worktree and branch stay.
// An item that needs approval merges only once its approval escalation
// was approved. It returns the merge commit ("" when the reviewed commit
// was on the base branch already).
func MergeItem(ctx context.Context, st mailbox.Store, cfg *config.Config, q *MergeQueue, caller identity.Caller, id string) (workflow.Item, string, error) {
	it, l, err := MergeItemLanding(ctx, st, cfg, q, caller, id)
	return it, l.Commit, err
}

// MergeItemLanding is MergeItem returning the whole landing: what was
// recovered first and what became of the operator's checkout.
//
// The merge goes through the merge queue (DESIGN §14): the reviewed
// commit becomes a candidate that this process claims, tests ([merge]
// ci) and lands at once (MergeQueue.LandNow), whether or not a supervisor
// runs; the candidate is claimed as it is queued, so the supervisor's
// queue never lands it too. The landing is journaled (worktree.Land):
// built aside, the base branch moved by compare-and-set, the operator's
// clean checkout brought forward (a dirty one refuses: the operator is
// here to commit or stash), and the item recorded merged before the
// journal entry goes. So an interrupted merge (kill -9, Ctrl-C) never
// leaves a half-merge in the checkout, and running the command again
// finishes it (the base holds the commit: the item is recorded) or starts
// afresh (it does not): never twice. A conflict or a failing CI sends the
// candidate back to the dev (mail from swarm) and is the error.
//
// Only the operator merges an item this way (verbs.MergeItem's rule; a
// session's work lands through `swarm land`, which checks can_land);
// caller is who the events name.
func MergeItemLanding(ctx context.Context, st mailbox.Store, cfg *config.Config, q *MergeQueue, caller identity.Caller, id string) (workflow.Item, worktree.Landing, error) {
	var l worktree.Landing
	it, err := st.Item(ctx, id)
	if errors.Is(err, mailbox.ErrNoSuchItem) {
		return it, l, fmt.Errorf("no item %s: 'swarm workflow status' lists the items", id)
	}
	if err != nil {
		return it, l, err
	}
	w, ok := cfg.Workflow(it.Workflow)
	switch {
	case !ok:
		return it, l, fmt.Errorf("item %s belongs to workflow %s, which swarm.toml no longer has", id, it.Workflow)
	case it.Kind != workflow.DevReview:
		return it, l, fmt.Errorf("item %s is a %s item: only dev-review items are merged by the workflow; 'swarm land --item %s' queues a dev-qa item that passed QA, or merge the agents' branches with 'swarm down --merge'", id, it.Kind, id)
	case it.State == workflow.Merged:
		// A run killed after recording it may have left its journal entry.
		if err := q.Git.ForgetLanding(itemLanding(id)); err != nil {
			return it, l, err
		}
		return it, l, fmt.Errorf("item %s is merged already", id)
	case it.State != workflow.Approved:
		return it, l, fmt.Errorf("item %s is %s: only an approved item merges (the reviewer approves it with a review_verdict)", id, it.State)
	case it.ReviewCommit == "":
		return it, l, fmt.Errorf("item %s has no reviewed commit recorded; start it again", id)
	}
	if needsApproval(w, it) {
		e, found, err := itemEscalation(ctx, st, it, escalation.KindApproval)
		if err != nil {
			return it, l, err
		}
		switch {
		case !found:
			return it, l, fmt.Errorf("item %s (risk %s) %w, and its approval escalation is not raised yet: start the supervisor ('swarm up'), then 'swarm escalation approve <id>'", id, it.Risk, ErrNeedsApproval)
		case e.State != escalation.Resolved:
			return it, l, fmt.Errorf("item %s (risk %s) %w: 'swarm escalation approve %d' merges it", id, it.Risk, ErrNeedsApproval, e.ID)
		case e.Decision == nil || *e.Decision != escalation.Approve:
			return it, l, fmt.Errorf("item %s: the operator decided %s on its approval (escalation %d); it is not merged", id, decisionText(e), e.ID)
		}
	}
	c, landing, err := q.LandNow(ctx, merge.Candidate{Agent: w.Dev, Commit: it.ReviewCommit, Source: merge.FromItem, Item: id, By: message.Operator})
	if landing != nil {
		l = *landing
	}
	if err != nil {
		return it, l, fmt.Errorf("merge item %s: %w", id, err)
	}
	switch c.State {
	case merge.Landed:
		if l.Commit == "" {
			l.Commit = c.LandedAs // an interrupted run had moved the base, or the supervisor landed it
		}
	case merge.Conflict:
		return it, l, fmt.Errorf("merge item %s: merging %s into the base branch conflicts in %s; nothing landed, and %s was sent the files and how to resolve them (merge queue #%d)",
			id, worktree.Branch(w.Dev), strings.Join(c.Files, ", "), w.Dev, c.ID)
	case merge.Failed:
		return it, l, fmt.Errorf("merge item %s: %s; nothing landed, and %s was sent the output (merge queue #%d)", id, c.Reason, w.Dev, c.ID)
	default:
		return it, l, fmt.Errorf("merge item %s: merge queue #%d is %s: %s", id, c.ID, c.State, orNone(c.Reason))
	}
	// Landed and recorded: a Ctrl-C meanwhile does not make it a failure.
	it, err = st.Item(context.WithoutCancel(ctx), id)
	return it, l, err
}

// recordMerged moves the item to merged, once: the landing calls it again
// when an interrupted run had recorded it already.
func recordMerged(ctx context.Context, st mailbox.Store, id, reviewed, commit string) error {
	cause := fmt.Sprintf("merged %s", text.Short(reviewed, 12))
	if commit == "" {
		cause += " (on the base branch already)"
	} else {
		cause += " as " + text.Short(commit, 12)
	}
	return st.InTx(ctx, func(tx mailbox.Tx) error {
		cur, err := tx.Item(id)
		if err != nil {
			return err
		}
		if cur.State == workflow.Merged {
			return nil
		}
		_, err = fsm.ApplyBy(tx, workflow.ReviewTable, fsm.SubjectItem, id, workflow.Approved, workflow.Merge, workflow.Merged, cause, message.Operator)
		return err
	})
}

func decisionText(e escalation.Escalation) string {
	if e.Decision == nil {
		return "nothing"
	}
	return string(*e.Decision)
}

// needsApproval: risk high, or merge = "approval".
func needsApproval(w config.Workflow, it workflow.Item) bool {
	return it.Risk == workflow.RiskHigh || w.Merge == config.MergeApproval
}

// itemEscalation returns the newest escalation of kind about the item
// raised since the row it was read from last changed (the current round's).
// The time comes from that same row, never from a later read: a look that
// read the item just before another process moved it must not take the
// round's escalation for a missing one.
func itemEscalation(ctx context.Context, st mailbox.Store, it workflow.Item, kind escalation.Kind) (escalation.Escalation, bool, error) {
	es, err := st.EscalationsByRef(ctx, escalation.ItemRef(it.ID), false)
	if err != nil {
		return escalation.Escalation{}, false, err
	}
	for _, e := range es { // newest first
		if e.Kind == kind && !e.CreatedAt.Before(it.UpdatedAt) {
			return e, true, nil
		}
	}
	return escalation.Escalation{}, false, nil
}

// WorkflowContextFor is section 4 for the agent's next session: its live
// item, if it has one in a workflow, else nil. The store and config are
// all it reads, so the preview and the session agree.
func WorkflowContextFor(ctx context.Context, st mailbox.Store, cfg *config.Config, agent string) (*promptpipe.WorkflowContext, error) {
	for _, w := range cfg.Workflows {
		role := w.RoleOf(agent)
		if role == "" {
			continue
		}
		items, err := st.Items(ctx, w.Name)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if !it.Live() || it.State == workflow.Start {
				continue
			}
			if c := contextOf(w, it, role, agent); c != nil {
				return c, nil
			}
			if w.Kind == workflow.DevQA {
				break // one item at a time
			}
		}
	}
	return nil, nil
}

// contextOf is the item's context for an agent in role, nil when the item
// is not the agent's to work now.
func contextOf(w config.Workflow, it workflow.Item, role, agent string) *promptpipe.WorkflowContext {
	c := &promptpipe.WorkflowContext{Workflow: w.Name, Kind: string(w.Kind), Item: it.ID, Title: it.Title, Criteria: it.Criteria,
		Inputs: it.Inputs, Risk: string(it.Risk)}
	switch w.Kind {
	case workflow.DevReview:
		switch {
		case role == "dev" && (it.State == workflow.Dispatched || it.State == workflow.InProgress):
			c.Stage = fmt.Sprintf("%s (dev: build it; rejections so far %d of %d)", it.State, it.RejectCount, w.MaxRejects)
			c.Constraints = []string{"Work on your branch " + worktree.Branch(agent) + "; commit your work before you report.",
				"The supervisor routes your result to the reviewer; do not message the reviewer yourself."}
			if it.Dispatch != "" {
				c.Commands = []string{fmt.Sprintf(`swarm send swarm --type task_result --reply-to %s --payload '{"status":"completed","summary":"<what you did>"}'`, it.Dispatch)}
				if it.State == workflow.Dispatched {
					c.Commands = append([]string{"swarm ack " + it.Dispatch}, c.Commands...)
				}
			}
		case role == "reviewer" && it.State == workflow.InReview:
			c.Stage = fmt.Sprintf("in_review (reviewer: judge it; rejections so far %d of %d)", it.RejectCount, w.MaxRejects)
			c.Inputs = nil
			read := "Judge the result against every acceptance criterion; the review_request carries the diff."
			if it.ReviewCommit != "" {
				read += fmt.Sprintf(" When it is cut, read every file it leaves out before you judge: the git_diff and git_show tools, or swarm diff %s --commit %s -- <path>.", w.Dev, text.Short(it.ReviewCommit, 12))
			}
			c.Constraints = []string{read,
				"Each issue you list is forwarded to dev verbatim: make each one specific and actionable.",
				fmt.Sprintf("At %d rejections the item is locked and the operator decides.", w.MaxRejects)}
			if it.Request != "" {
				c.Commands = []string{
					fmt.Sprintf(`swarm send swarm --type review_verdict --reply-to %s --payload '{"verdict":"approved","summary":"<why>"}'`, it.Request),
					fmt.Sprintf(`swarm send swarm --type review_verdict --reply-to %s --payload '{"verdict":"rejected","issues":["<issue>"]}'`, it.Request),
				}
			}
		default:
			return nil
		}
	case workflow.DevQA:
		stage, _ := workflow.Stage(it.State)
		if stage != role {
			return nil
		}
		state := stageState(it.State) // the state while this session runs
		c.Stage = string(state)
		c.Risk = ""
		c.Constraints = []string{fmt.Sprintf("One agent works at a time: the workflow's other agents wait until you signal. The stage times out after %s.", w.StageTimeout(it.Complex))}
		for _, next := range workflow.QATable.Next(state, workflow.Signal) {
			c.Commands = append(c.Commands, fmt.Sprintf(`swarm workflow signal --item %s --status COMPLETE --next %s --message "<what you did or found>"`, it.ID, next))
		}
	}
	return c
}

// decideHooks: MergeApproved is what `swarm escalation approve` does after
// the decision when the escalation is an item's approval.
//
// MergeApproved merges the item an approved approval escalation is about,
// if it is one; it reports whether it was.
func MergeApproved(ctx context.Context, st mailbox.Store, cfg *config.Config, q *MergeQueue, caller identity.Caller, e escalation.Escalation) (workflow.Item, string, bool, error) {
	if e.Kind != escalation.KindApproval || e.Ref == nil || e.Decision == nil || *e.Decision != escalation.Approve {
		return workflow.Item{}, "", false, nil
	}
	id, ok := escalation.ItemOf(*e.Ref)
	if !ok {
		return workflow.Item{}, "", false, nil
	}
	it, commit, err := MergeItem(ctx, st, cfg, q, caller, id)
	return it, commit, true, err
}
