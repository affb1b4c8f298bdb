package swarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/workflow"
	"github.com/swarmhq/swarm/worktree"
)

// The workflow engine's reads (the levels a decision needs) and writes (the
// actions it decided), through flow.move and the poster, so every state
// change still goes through fsm.

// readReview reads the levels a dev-review item's state needs: its
// round's messages, the escalation it waits on, its result timeout.
func (f *flow) readReview(ctx context.Context, w config.Workflow, it workflow.Item) (reviewLevels, error) {
	lv := reviewLevels{Now: f.d.Clock.Now()}
	if kind, ok := stopKind(w, it); ok {
		e, found, err := itemEscalation(ctx, f.d.Store, it, kind)
		if err != nil || !found {
			return lv, err
		}
		lv.Stop = &e
		return lv, nil
	}
	msgsFor := it.Dispatch
	if it.State == workflow.InReview {
		msgsFor = it.Request
	} else if it.State != workflow.Dispatched && it.State != workflow.InProgress {
		return lv, nil
	}
	if msgsFor == "" {
		return lv, nil
	}
	msgs, err := f.d.Store.TaskMessages(ctx, it.ID)
	if err != nil {
		return lv, err
	}
	lv.Msgs = msgs
	if it.State == workflow.InReview {
		return lv, nil
	}
	// The round's result timeout, once its result is past due.
	d, stored, _, answered := round(w, it, msgs)
	if !stored || answered {
		return lv, nil
	}
	if due, _, ok := resultDue(w, d); !ok || lv.Now.Before(due) {
		return lv, nil
	}
	e, found, err := escalationByKey(ctx, f.d.Store, escalation.ResultTimeoutKey(it.ID, d.MsgID))
	if err != nil || !found {
		return lv, err
	}
	lv.Timeout = &e
	return lv, nil
}

// apply does acts on it in order, each on the item the one before left,
// and stops at the first that fails.
func (f *flow) apply(ctx context.Context, w config.Workflow, it workflow.Item, acts []action) error {
	for _, a := range acts {
		var err error
		switch a.Act {
		case actMove:
			it, err = f.move(ctx, it, a.Event, a.To, a.Cause, a.By, a.Edit)
		case actEdit:
			err = f.edit(ctx, it.ID, it.State, a.Edit)
		case actAbort:
			bctx, cancel := bookkeeping(ctx)
			err = f.d.Store.InTx(bctx, func(tx mailbox.Tx) error { return abortTx(tx, it, a.Cause, message.Operator) })
			cancel()
		case actDispatch:
			var env protocol.Envelope
			if _, env, err = f.send(ctx, protocol.TypeTaskDispatch, a.Agent, it.ID, a.Dispatch, nil); err != nil {
				return fmt.Errorf("dispatch %s to %s: %w", it.ID, a.Agent, err)
			}
			err = f.edit(ctx, it.ID, it.State, func(cur *workflow.Item) { cur.Dispatch, cur.Agent = env.MsgID, a.Agent })
		case actRequest:
			err = f.request(ctx, w, it)
		case actReview:
			it, err = f.toReview(ctx, w, it, a)
		case actCI:
			f.startCI(ctx, w, it, a.Result)
		case actRaise:
			if a.Warn != nil {
				f.d.Log.Warn("workflow result past due", a.Warn...)
			}
			f.d.Raise(ctx, a.Draft)
		case actPoke:
			f.poke()
		case actQueue:
			err = f.queueQA(ctx, w, it)
		case actWake:
			f.mu.Lock()
			f.seen[w.Name] = a.Seen
			f.mu.Unlock()
			f.wakeMembers(w)
		case actTell:
			bctx, cancel := bookkeeping(ctx)
			_, perr := f.d.Poster.Post(bctx, message.Draft{From: message.Swarm, To: a.Agent, Kind: message.KindTask, Body: a.Body})
			cancel()
			if perr != nil {
				return fmt.Errorf("tell %s of item %s: %w", a.Agent, it.ID, perr)
			}
			err = f.edit(ctx, it.ID, it.State, func(cur *workflow.Item) { cur.Notified = it.State })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// toReview records dev's result (CI passed or is not configured) at dev's
// tip, and sends the reviewer the request.
func (f *flow) toReview(ctx context.Context, w config.Workflow, it workflow.Item, a action) (workflow.Item, error) {
	if f.d.Git == nil {
		return it, errors.New("the workflow needs git worktrees to compute the review's diff")
	}
	commit, err := f.d.Git.Tip(ctx, w.Dev)
	if err != nil {
		return it, err
	}
	res := a.Result
	status := ""
	if env, err := mailbox.Envelope(res); err == nil {
		var r protocol.TaskResult
		if json.Unmarshal(env.Payload, &r) == nil {
			status = r.Status
		}
	}
	cause := fmt.Sprintf("task_result %s (%s); CI %s; review at %s", res.MsgID, status, a.CI, text.Short(commit, 12))
	it, err = f.move(ctx, it, a.Event, a.To, cause, a.By, func(cur *workflow.Item) {
		cur.ResultMsg, cur.ReviewCommit, cur.Request, cur.Agent, cur.CIFailures = res.MsgID, commit, "", w.Reviewer, 0
	})
	if err != nil {
		return it, err
	}
	return it, f.request(ctx, w, it)
}

// maxReviewDiff caps the diff a review request carries.
const maxReviewDiff = 64 << 10

// request sends the reviewer the review_request of an item in review.
func (f *flow) request(ctx context.Context, w config.Workflow, it workflow.Item) error {
	if f.d.Git == nil {
		return errors.New("the workflow needs git worktrees to compute the review's diff")
	}
	patch, err := f.d.Git.ReviewDiff(ctx, it.ReviewCommit, maxReviewDiff)
	if err != nil {
		return err
	}
	ci := "not configured"
	if len(w.CI) > 0 {
		ci = "passed: " + strings.Join(w.CI, " ")
	}
	notes := fmt.Sprintf("Reviewed commit %s of %s.", it.ReviewCommit, worktree.Branch(w.Dev))
	if patch.Cut() {
		// The reviewer must know what it was not shown, and how to read it.
		notes += fmt.Sprintf(" The diff was cut when it reached %d KiB: it shows %d of its %d bytes, and %d of %d files are left out (listed, with their sizes, at the end of the diff). Read them before you judge: the git_diff and git_show tools, or 'swarm diff %s --commit %s -- <path>'.",
			maxReviewDiff>>10, patch.Shown, patch.Size, len(patch.LeftOut), patch.Files, w.Dev, text.Short(it.ReviewCommit, 12))
	}
	if res, err := f.d.Store.ProtocolMessage(ctx, it.ResultMsg); err == nil {
		if env, err := mailbox.Envelope(res); err == nil {
			notes += " The task_result payload, verbatim: " + string(env.Payload)
		}
	}
	p := protocol.ReviewRequest{OriginalDispatchRef: it.Dispatch, TaskResultRef: it.ResultMsg, RejectCount: it.RejectCount,
		AcceptanceCriteria: it.Criteria, Diff: patch.Diff, CIStatus: ci, CoordinatorNotes: notes}
	_, env, err := f.send(ctx, protocol.TypeReviewRequest, w.Reviewer, it.ID, p, []string{it.Dispatch, it.ResultMsg})
	if err != nil {
		return fmt.Errorf("send the review request of %s to %s: %w", it.ID, w.Reviewer, err)
	}
	return f.edit(ctx, it.ID, it.State, func(cur *workflow.Item) { cur.Request = env.MsgID })
}

// startCI runs the workflow's CI for dev's result in dev's worktree, once
// at a time per item; the run's end moves the item.
func (f *flow) startCI(ctx context.Context, w config.Workflow, it workflow.Item, res message.Message) {
	f.mu.Lock()
	if f.ci[it.ID] || f.d.Git == nil {
		f.mu.Unlock()
		return
	}
	f.ci[it.ID] = true
	f.mu.Unlock()
	f.wg.Go(func() {
		defer func() {
			f.mu.Lock()
			delete(f.ci, it.ID)
			f.mu.Unlock()
		}()
		f.d.Log.Info("workflow CI started", "item", it.ID, "command", strings.Join(w.CI, " "))
		out, err := f.runCI(ctx, w.CI, f.d.Git.Path(w.Dev))
		if ctx.Err() != nil {
			return // the next run runs it again: the result is still unanswered
		}
		if err == nil {
			if err := f.apply(ctx, w, it, []action{reviewAct(w, res, "passed: "+strings.Join(w.CI, " "))}); err != nil {
				f.d.Log.Warn("workflow step", "item", it.ID, "err", err)
			}
			return
		}
		if err := f.ciFailed(ctx, w, it, err, out); err != nil {
			f.d.Log.Warn("workflow step", "item", it.ID, "err", err)
		}
		f.poke()
	})
}

// ciTimeout bounds one CI run.
const ciTimeout = 30 * time.Minute

// runCI runs argv in dir and returns its output's tail.
func runCI(ctx context.Context, argv []string, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ciTimeout)
	defer cancel()
	cmd := proc.Command(ctx, 0, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return tail(out.String(), 40, 4<<10), err
}

// tail is the last n lines of s, at most max bytes.
func tail(s string, n, max int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}

// ciFailed counts a failed CI run on the item as it is stored now.
func (f *flow) ciFailed(ctx context.Context, w config.Workflow, it workflow.Item, runErr error, out string) error {
	cur, err := f.d.Store.Item(ctx, it.ID)
	if err != nil {
		return err
	}
	return f.apply(ctx, w, cur, decideCIFailed(w, cur, runErr, out))
}

// queueQA queues a dev-qa item's dev branch in the merge queue once it
// passed QA ([merge] after_qa), once per item: a candidate of the item
// already stored (queued, landed, sent back) is not queued again; the dev
// re-queues with swarm land after a conflict.
func (f *flow) queueQA(ctx context.Context, w config.Workflow, it workflow.Item) error {
	if f.d.Queue == nil {
		return nil
	}
	cs, err := f.d.Store.Candidates(ctx, mailbox.CandidateFilter{Agent: w.Dev})
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.Source == merge.FromQA && c.Item == it.ID {
			return nil
		}
	}
	tip, err := f.d.Queue.Tip(ctx, w.Dev)
	if err != nil {
		return err
	}
	c, _, err := Enqueue(ctx, f.d.Store, merge.Candidate{Agent: w.Dev, Commit: tip, Source: merge.FromQA, Item: it.ID, By: message.Swarm})
	if err != nil {
		return err
	}
	f.d.Log.Info("merge queue: queued a dev-qa item that passed QA", "item", it.ID, "candidate", c.ID, "commit", merge.Short(tip))
	f.d.PokeMerges()
	return nil
}

// escalationByKey finds the newest escalation with a dedupe key, in any
// state.
func escalationByKey(ctx context.Context, st mailbox.Store, key string) (escalation.Escalation, bool, error) {
	es, err := st.Escalations(ctx, mailbox.EscalationFilter{All: true})
	if err != nil {
		return escalation.Escalation{}, false, err
	}
	var best escalation.Escalation
	found := false
	for _, e := range es {
		if e.DedupeKey == key && (!found || e.ID > best.ID) {
			best, found = e, true
		}
	}
	return best, found, nil
}
