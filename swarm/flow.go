package swarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/workflow"
)

// flow is the workflow engine (DESIGN §9.3): seed 000's coordinator and
// seed 001's orchestrator as code. It is level-based like recovery: each
// look reads the items and the protocol messages about them, and does the
// one next step each item's state calls for (send a dispatch or a review
// request, count a verdict, lock, run CI, notify a stage's agent). A crash
// between steps only means the next look does the step. Routing, counting,
// locking and timing cost no model tokens.
//
// It also gates dev-qa's sessions: one agent of a dev-qa workflow runs at a
// time (slots), and an agent whose stage it is not waits.
type flow struct {
	s    *Supervisor
	git  WorkflowGit // nil when the worktrees are not git's (tests)
	kick chan struct{}

	mu    sync.Mutex
	slots map[string]string // dev-qa workflow -> the agent in a session
	ci    map[string]bool   // items whose CI runs now
	seen  map[string]string // dev-qa workflow -> its active item and state, last look
	wg    sync.WaitGroup    // CI runs
	runCI func(ctx context.Context, argv []string, dir string) (string, error)
}

func newFlow(s *Supervisor) *flow {
	f := &flow{s: s, kick: make(chan struct{}, 1), slots: map[string]string{}, ci: map[string]bool{}, seen: map[string]string{}, runCI: runCI}
	f.git, _ = s.opts.Worktrees.(WorkflowGit)
	return f
}

func (f *flow) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// flowPoll bounds how long a change the pokes and the feed both missed
// waits for a look.
const flowPoll = 2 * time.Second

// run is the workflows service.
func (f *flow) run(ctx context.Context) error {
	if len(f.s.cfg.Workflows) == 0 {
		return nil
	}
	defer f.wg.Wait()
	t := f.s.clock.NewTimer(flowPoll)
	defer t.Stop()
	for {
		f.look(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-f.kick:
		case <-t.C:
			t.Reset(flowPoll)
		}
	}
}

// look does the next step of every live item.
func (f *flow) look(ctx context.Context) {
	for _, w := range f.s.cfg.Workflows {
		items, err := f.s.store.Items(ctx, w.Name)
		if err != nil {
			if ctx.Err() == nil {
				f.s.log.Warn("read work items", "workflow", w.Name, "err", err)
			}
			continue
		}
		switch w.Kind {
		case workflow.DevReview:
			for _, it := range items {
				if !it.Live() {
					continue
				}
				if err := f.review(ctx, w, it); err != nil && ctx.Err() == nil {
					f.s.log.Warn("workflow step", "workflow", w.Name, "item", it.ID, "state", string(it.State), "err", err)
				}
			}
		case workflow.DevQA:
			if err := f.qa(ctx, w, items); err != nil && ctx.Err() == nil {
				f.s.log.Warn("workflow step", "workflow", w.Name, "err", err)
			}
		}
	}
}

// move applies one item transition and then edit to the row, in one
// transaction, from the state the item is in now.
func (f *flow) move(ctx context.Context, it workflow.Item, ev workflow.Event, to workflow.State, cause, by string, edit func(*workflow.Item)) (workflow.Item, error) {
	var out workflow.Item
	err := f.s.store.InTx(bg(ctx), func(tx mailbox.Tx) error {
		cur, err := tx.Item(it.ID)
		if err != nil {
			return err
		}
		if cur.State != it.State {
			return fmt.Errorf("item %s is %s now, not %s: %w", it.ID, cur.State, it.State, mailbox.ErrStateConflict)
		}
		if _, err := fsm.ApplyBy(tx, cur.Kind.Table(), fsm.SubjectItem, cur.ID, cur.State, ev, to, truncate(cause, 500), by); err != nil {
			return err
		}
		cur.State = to
		if edit != nil {
			edit(&cur)
		}
		out = cur
		return tx.UpdateItem(cur)
	})
	if err == nil {
		f.s.bus.emit(itemNotice(f.s.clock.Now(), out, it.State, cause))
	}
	return out, err
}

// edit writes an item's bookkeeping, keeping its state.
func (f *flow) edit(ctx context.Context, id string, state workflow.State, fn func(*workflow.Item)) error {
	return f.s.store.InTx(bg(ctx), func(tx mailbox.Tx) error {
		cur, err := tx.Item(id)
		if err != nil {
			return err
		}
		if cur.State != state {
			return fmt.Errorf("item %s is %s now, not %s: %w", id, cur.State, state, mailbox.ErrStateConflict)
		}
		fn(&cur)
		return tx.UpdateItem(cur)
	})
}

// review does the next step of a dev-review item.
func (f *flow) review(ctx context.Context, w config.Workflow, it workflow.Item) error {
	switch it.State {
	case workflow.Dispatched, workflow.InProgress:
		if it.CIFailures > w.CIRetries {
			return f.decided(ctx, w, it, escalation.KindCIFailure)
		}
		if it.Dispatch == "" {
			return f.dispatch(ctx, w, it)
		}
		msgs, err := f.s.store.TaskMessages(ctx, it.ID)
		if err != nil {
			return err
		}
		d, ok := byMsgID(msgs, it.Dispatch)
		if !ok {
			return fmt.Errorf("dispatch %s is not stored", it.Dispatch)
		}
		res, found := newest(msgs, protocol.TypeTaskResult, w.Dev, d.ID)
		if it.State == workflow.Dispatched && !found && d.Ack != nil && d.Ack.State == message.AckAcked {
			_, err := f.move(ctx, it, workflow.Acked, workflow.InProgress, "dev acknowledged "+it.Dispatch, w.Dev, nil)
			return err
		}
		if !found {
			return f.resultDeadline(ctx, w, it, d)
		}
		if len(w.CI) == 0 {
			return f.toReview(ctx, w, it, res, "not configured")
		}
		f.startCI(ctx, w, it, res)
		return nil
	case workflow.InReview:
		if it.Request == "" {
			return f.request(ctx, w, it)
		}
		msgs, err := f.s.store.TaskMessages(ctx, it.ID)
		if err != nil {
			return err
		}
		req, ok := byMsgID(msgs, it.Request)
		if !ok {
			return fmt.Errorf("review request %s is not stored", it.Request)
		}
		v, found := newest(msgs, protocol.TypeReviewVerdict, w.Reviewer, req.ID)
		if !found {
			return nil
		}
		return f.verdict(ctx, w, it, v)
	case workflow.Rejected:
		return f.afterReject(ctx, w, it)
	case workflow.Locked:
		return f.decided(ctx, w, it, escalation.KindHallucinationLock)
	case workflow.Approved:
		if !needsApproval(w, it) {
			return nil
		}
		if _, found, err := itemEscalation(ctx, f.s.store, it, escalation.KindApproval); err != nil || found {
			return err
		}
		f.s.raise(ctx, escalation.Draft{Kind: escalation.KindApproval, Agent: w.Dev, Ref: itemRef(it.ID),
			Summary: truncate(fmt.Sprintf("item %s (%s, risk %s) was approved by %s: 'swarm escalation approve' merges the reviewed commit %s into the base branch",
				it.ID, it.Title, it.Risk, w.Reviewer, short(it.ReviewCommit)), 500),
			Details:   details(map[string]any{"item": it.ID, "workflow": w.Name, "risk": it.Risk, "review_commit": it.ReviewCommit}),
			DedupeKey: "approval:item:" + it.ID})
	}
	return nil
}

// resultDue is when dev's task_result answering dispatch d is due: d's
// ACK plus its timeout_minutes, else the workflow's result_timeout. Both
// come from stored rows, so a restarted supervisor finds a deadline that
// passed while it was down. ok is false while d is not acknowledged (its
// ACK deadline covers that time).
func resultDue(w config.Workflow, d message.Message) (due time.Time, timeout time.Duration, ok bool) {
	if d.Ack == nil || d.Ack.AckedAt == nil {
		return time.Time{}, 0, false
	}
	timeout = w.ResultTimeout
	if env, err := mailbox.Envelope(d); err == nil {
		var p protocol.TaskDispatch
		if json.Unmarshal(env.Payload, &p) == nil && p.TimeoutMinutes > 0 {
			timeout = time.Duration(p.TimeoutMinutes) * time.Minute
		}
	}
	if timeout <= 0 {
		return time.Time{}, 0, false
	}
	return d.Ack.AckedAt.Add(timeout), timeout, true
}

// resultTimeoutKey is the dedupe key of a round's result timeout: one per
// dispatch, so each round raises at most one.
func resultTimeoutKey(item, dispatch string) string {
	return "stage_timeout:item:" + item + ":result:" + dispatch
}

// resultDeadline raises a stage_timeout escalation when dev acknowledged
// the round's dispatch d and its task_result is past due: once per round,
// whatever became of the escalation since (it is looked up by its key among
// all escalations, resolved ones too). The operator's abort on it ends the
// item; resume (or ack) keeps the item waiting for the late result.
func (f *flow) resultDeadline(ctx context.Context, w config.Workflow, it workflow.Item, d message.Message) error {
	due, timeout, ok := resultDue(w, d)
	if !ok || f.s.clock.Now().Before(due) {
		return nil
	}
	key := resultTimeoutKey(it.ID, d.MsgID)
	e, found, err := escalationByKey(ctx, f.s.store, key)
	if err != nil {
		return err
	}
	if !found {
		f.s.log.Warn("workflow result past due", "workflow", w.Name, "item", it.ID, "agent", w.Dev, "dispatch", d.MsgID, "due_at", due)
		f.s.raise(ctx, escalation.Draft{Kind: escalation.KindStageTimeout, Agent: w.Dev, Ref: itemRef(it.ID),
			Summary: truncate(fmt.Sprintf("item %s (%s): %s acknowledged dispatch #%d at %s and sent no task_result within %s; the item stays %s. Remind %s ('swarm send %s \"...\"'); resume keeps waiting for the result, abort ends the item",
				it.ID, it.Title, w.Dev, d.ID, d.Ack.AckedAt.UTC().Format(time.RFC3339), protocol.Age(timeout), it.State, w.Dev, w.Dev), 500),
			Details: details(map[string]any{"item": it.ID, "workflow": w.Name, "stage": it.State, "dispatch": d.MsgID,
				"acked_at": d.Ack.AckedAt.UTC().Format(time.RFC3339Nano), "due_at": due.UTC().Format(time.RFC3339Nano), "timeout": timeout.String()}),
			DedupeKey: key})
		return nil
	}
	if e.State != escalation.Resolved || e.Decision == nil || e.Decision.Releases() {
		return nil
	}
	cause := fmt.Sprintf("%s by operator (escalation %d: no task_result within %s)", *e.Decision, e.ID, protocol.Age(timeout))
	return f.s.store.InTx(bg(ctx), func(tx mailbox.Tx) error { return abortTx(tx, it, cause, message.Operator) })
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

// byMsgID finds a message by its msg_id.
func byMsgID(ms []message.Message, msgID string) (message.Message, bool) {
	for _, m := range ms {
		if m.MsgID == msgID {
			return m, true
		}
	}
	return message.Message{}, false
}

// newest is the newest protocol message of type t from sender to the
// runtime stored after the message with id after.
func newest(ms []message.Message, t protocol.Type, from string, after int64) (message.Message, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if m.ID <= after {
			break
		}
		if m.ProtocolType == string(t) && m.From == from && m.To == message.Swarm {
			return m, true
		}
	}
	return message.Message{}, false
}

// send sends a protocol message from the runtime.
func (f *flow) send(ctx context.Context, t protocol.Type, to, task string, payload any, refs []string) (message.Message, protocol.Envelope, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return message.Message{}, protocol.Envelope{}, err
	}
	return f.s.protocol.Send(bg(ctx), SendRequest{Draft: protocol.Draft{Type: t, From: message.Swarm, To: to, TaskID: task, Payload: body, ContextRef: refs}, Caller: identity.Runtime()})
}

// dispatch sends dev the item's task_dispatch: the criteria verbatim, and
// what the last round left (the reviewer's issues, CI's output) verbatim
// as subtasks.
func (f *flow) dispatch(ctx context.Context, w config.Workflow, it workflow.Item) error {
	p := protocol.TaskDispatch{Description: it.Title, Branch: "swarm/" + w.Dev, AcceptanceCriteria: it.Criteria, RiskLevel: string(it.Risk),
		TimeoutMinutes: int((w.ResultTimeout + time.Minute - 1) / time.Minute)}
	if len(it.Inputs) > 0 {
		p.Description = fmt.Sprintf("%s\n\nThis task comes back to you (rejections so far: %d of %d). Fix every point listed under subtasks: they are quoted verbatim. Then commit and send a new task_result.",
			it.Title, it.RejectCount, w.MaxRejects)
		for i, in := range it.Inputs {
			p.Subtasks = append(p.Subtasks, protocol.Subtask{SubtaskID: fmt.Sprintf("fix-%d", i+1), Description: in})
		}
	}
	_, env, err := f.send(ctx, protocol.TypeTaskDispatch, w.Dev, it.ID, p, nil)
	if err != nil {
		return fmt.Errorf("dispatch %s to %s: %w", it.ID, w.Dev, err)
	}
	return f.edit(ctx, it.ID, it.State, func(cur *workflow.Item) { cur.Dispatch, cur.Agent = env.MsgID, w.Dev })
}

// toReview records dev's result (CI passed or is not configured), and
// sends the reviewer the request.
func (f *flow) toReview(ctx context.Context, w config.Workflow, it workflow.Item, res message.Message, ci string) error {
	if f.git == nil {
		return errors.New("the workflow needs git worktrees to compute the review's diff")
	}
	commit, err := f.git.Tip(ctx, w.Dev)
	if err != nil {
		return err
	}
	status := ""
	if env, err := mailbox.Envelope(res); err == nil {
		var r protocol.TaskResult
		if json.Unmarshal(env.Payload, &r) == nil {
			status = r.Status
		}
	}
	cause := fmt.Sprintf("task_result %s (%s); CI %s; review at %s", res.MsgID, status, ci, short(commit))
	it, err = f.move(ctx, it, workflow.Result, workflow.InReview, cause, w.Dev, func(cur *workflow.Item) {
		cur.ResultMsg, cur.ReviewCommit, cur.Request, cur.Agent, cur.CIFailures = res.MsgID, commit, "", w.Reviewer, 0
	})
	if err != nil {
		return err
	}
	return f.request(ctx, w, it)
}

// maxReviewDiff caps the diff a review request carries.
const maxReviewDiff = 64 << 10

// request sends the reviewer the review_request of an item in review.
func (f *flow) request(ctx context.Context, w config.Workflow, it workflow.Item) error {
	patch, err := f.git.ReviewDiff(ctx, it.ReviewCommit, maxReviewDiff)
	if err != nil {
		return err
	}
	ci := "not configured"
	if len(w.CI) > 0 {
		ci = "passed: " + strings.Join(w.CI, " ")
	}
	notes := fmt.Sprintf("Reviewed commit %s of swarm/%s.", it.ReviewCommit, w.Dev)
	if patch.Cut() {
		// The reviewer must know what it was not shown, and how to read it.
		notes += fmt.Sprintf(" The diff was cut when it reached %d KiB: it shows %d of its %d bytes, and %d of %d files are left out (listed, with their sizes, at the end of the diff). Read them before you judge: the git_diff and git_show tools, or 'swarm diff %s --commit %s -- <path>'.",
			maxReviewDiff>>10, patch.Shown, patch.Size, len(patch.LeftOut), patch.Files, w.Dev, short(it.ReviewCommit))
	}
	if res, err := f.s.store.ProtocolMessage(ctx, it.ResultMsg); err == nil {
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

// verdict counts a reviewer's verdict.
func (f *flow) verdict(ctx context.Context, w config.Workflow, it workflow.Item, v message.Message) error {
	env, err := mailbox.Envelope(v)
	if err != nil {
		return err
	}
	var p protocol.ReviewVerdict
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return fmt.Errorf("verdict %s: %w", v.MsgID, err)
	}
	if p.Verdict == "approved" {
		_, err := f.move(ctx, it, workflow.Approve, workflow.Approved, "approved by "+w.Reviewer+" in "+v.MsgID, w.Reviewer,
			func(cur *workflow.Item) { cur.Agent, cur.Inputs = "", nil })
		if err == nil {
			f.poke() // an approval escalation may be due
		}
		return err
	}
	n := it.RejectCount + 1
	it, err = f.move(ctx, it, workflow.Reject, workflow.Rejected, fmt.Sprintf("rejection %d of %d by %s in %s", n, w.MaxRejects, w.Reviewer, v.MsgID), w.Reviewer,
		func(cur *workflow.Item) { cur.RejectCount, cur.Inputs = n, p.Issues })
	if err != nil {
		return err
	}
	return f.afterReject(ctx, w, it)
}

// afterReject locks an item at its reject limit, or sends it back to dev.
func (f *flow) afterReject(ctx context.Context, w config.Workflow, it workflow.Item) error {
	if it.RejectCount >= w.MaxRejects {
		it, err := f.move(ctx, it, workflow.Lock, workflow.Locked, fmt.Sprintf("locked at %d rejections (max_rejects %d)", it.RejectCount, w.MaxRejects), message.Swarm,
			func(cur *workflow.Item) { cur.Agent = "" })
		if err != nil {
			return err
		}
		f.raiseLock(ctx, w, it)
		return nil
	}
	it, err := f.move(ctx, it, workflow.Redo, workflow.InProgress, "back to dev with the reviewer's issues", message.Swarm,
		func(cur *workflow.Item) { cur.Dispatch, cur.Agent = "", w.Dev })
	if err != nil {
		return err
	}
	return f.dispatch(ctx, w, it)
}

func (f *flow) raiseLock(ctx context.Context, w config.Workflow, it workflow.Item) {
	f.s.raise(ctx, escalation.Draft{Kind: escalation.KindHallucinationLock, Agent: w.Dev, Ref: itemRef(it.ID),
		Summary: truncate(fmt.Sprintf("item %s (%s) is locked: %s rejected it %d times; resume gives %s a fresh count and the last issues, abort ends the item",
			it.ID, it.Title, w.Reviewer, it.RejectCount, w.Dev), 500),
		Details:   details(map[string]any{"item": it.ID, "workflow": w.Name, "reject_count": it.RejectCount, "issues": it.Inputs}),
		DedupeKey: "hallucination_lock:item:" + it.ID})
}

// decided acts on the operator's decision on the escalation that stops an
// item (a lock, or CI that kept failing): resume starts a fresh round,
// abort ends the item. With no escalation raised since the item stopped
// (a crash in between), it raises it.
func (f *flow) decided(ctx context.Context, w config.Workflow, it workflow.Item, kind escalation.Kind) error {
	e, found, err := itemEscalation(ctx, f.s.store, it, kind)
	if err != nil {
		return err
	}
	if !found {
		if kind == escalation.KindHallucinationLock {
			f.raiseLock(ctx, w, it)
		} else {
			f.raiseCI(ctx, w, it, "")
		}
		return nil
	}
	if e.State != escalation.Resolved || e.Decision == nil {
		return nil
	}
	cause := fmt.Sprintf("%s by operator (escalation %d)", *e.Decision, e.ID)
	if !e.Decision.Releases() {
		return f.s.store.InTx(bg(ctx), func(tx mailbox.Tx) error { return abortTx(tx, it, cause, message.Operator) })
	}
	it, err = f.move(ctx, it, workflow.Resume, workflow.InProgress, cause, message.Operator, func(cur *workflow.Item) {
		cur.Dispatch, cur.Agent = "", w.Dev
		if kind == escalation.KindHallucinationLock {
			cur.RejectCount = 0
		} else {
			cur.CIFailures = 0
		}
	})
	if err != nil {
		return err
	}
	return f.dispatch(ctx, w, it)
}

// startCI runs the workflow's CI for dev's result in dev's worktree, once
// at a time per item; the run's end moves the item.
func (f *flow) startCI(ctx context.Context, w config.Workflow, it workflow.Item, res message.Message) {
	f.mu.Lock()
	if f.ci[it.ID] || f.git == nil {
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
		f.s.log.Info("workflow CI started", "item", it.ID, "command", strings.Join(w.CI, " "))
		out, err := f.runCI(ctx, w.CI, f.git.Path(w.Dev))
		if ctx.Err() != nil {
			return // the next run runs it again: the result is still unanswered
		}
		if err == nil {
			if err := f.toReview(ctx, w, it, res, "passed: "+strings.Join(w.CI, " ")); err != nil {
				f.s.log.Warn("workflow step", "item", it.ID, "err", err)
			}
			return
		}
		if err := f.ciFailed(ctx, w, it, err, out); err != nil {
			f.s.log.Warn("workflow step", "item", it.ID, "err", err)
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

// ciFailed counts a failed CI run: a repair dispatch with the output's
// tail, or, past ci_retries, a ci_failure escalation.
func (f *flow) ciFailed(ctx context.Context, w config.Workflow, it workflow.Item, runErr error, out string) error {
	cur, err := f.s.store.Item(ctx, it.ID)
	if err != nil {
		return err
	}
	n := cur.CIFailures + 1
	input := fmt.Sprintf("CI failed (%s: %v). The last lines of its output:\n%s", strings.Join(w.CI, " "), runErr, orNone(out))
	cause := fmt.Sprintf("CI failed (%d of %d allowed repairs used): %v", n, w.CIRetries, runErr)
	cur, err = f.move(ctx, cur, workflow.CIFailed, workflow.InProgress, cause, message.Swarm, func(c *workflow.Item) {
		c.CIFailures, c.Inputs = n, []string{input}
		if n <= w.CIRetries {
			c.Dispatch = "" // a repair dispatch goes out
		}
	})
	if err != nil {
		return err
	}
	if n > w.CIRetries {
		f.raiseCI(ctx, w, cur, out)
	}
	return nil
}

func (f *flow) raiseCI(ctx context.Context, w config.Workflow, it workflow.Item, out string) {
	f.s.raise(ctx, escalation.Draft{Kind: escalation.KindCIFailure, Agent: w.Dev, Ref: itemRef(it.ID),
		Summary: truncate(fmt.Sprintf("item %s: CI (%s) failed %d times in a row in %s's worktree; no review was requested. Resume sends %s a repair dispatch with the output, abort ends the item",
			it.ID, strings.Join(w.CI, " "), it.CIFailures, w.Dev, w.Dev), 500),
		Details:   details(map[string]any{"item": it.ID, "workflow": w.Name, "ci": w.CI, "failures": it.CIFailures, "output_tail": out}),
		DedupeKey: "ci_failure:item:" + it.ID})
}

// qa does the next step of a dev-qa workflow: the oldest waiting item
// begins when none is active, and the active item's stage agent is told
// when its turn comes.
func (f *flow) qa(ctx context.Context, w config.Workflow, items []workflow.Item) error {
	if f.s.cfg.Merge.AfterQA {
		for _, it := range items {
			if it.State == workflow.QAPassed {
				if err := f.queueQA(ctx, w, it); err != nil {
					return err
				}
			}
		}
	}
	active, ok := activeQA(items)
	if !ok {
		begun := false
		for _, it := range items {
			if it.State != workflow.Start && it.State != workflow.Aborted {
				begun = true
			}
		}
		for _, it := range items {
			if it.State != workflow.Start {
				continue
			}
			to, agent := workflow.DevReady, w.Dev
			if w.Initializer != "" && !begun {
				to, agent = workflow.Initializer, w.Initializer
			}
			var err error
			if active, err = f.move(ctx, it, workflow.Begin, to, "its turn came (first in, first out)", message.Swarm,
				func(cur *workflow.Item) { cur.Agent = agent }); err != nil {
				return err
			}
			ok = true
			break
		}
	}
	key := ""
	if ok {
		key = active.ID + " " + string(active.State)
	}
	f.mu.Lock()
	changed := f.seen[w.Name] != key
	f.seen[w.Name] = key
	f.mu.Unlock()
	if changed {
		f.wakeMembers(w)
	}
	// The agent is told when its turn comes (a READY state, or the
	// initializer's stage); the working states begin with its session.
	if !ok || active.Notified == active.State || !notifies(active.State) {
		return nil
	}
	role, _ := workflow.Stage(active.State)
	agent := w.Role(role)
	if agent == "" {
		return nil
	}
	var next []string
	for _, n := range workflow.QATable.Next(stageState(active.State), workflow.Signal) {
		next = append(next, string(n))
	}
	body := fmt.Sprintf("Workflow %s: item %s (%s) is at %s, and it is your turn (%s). Your prompt's Workflow Context has the details; end the stage with 'swarm workflow signal --item %s --status COMPLETE --next %s'.",
		w.Name, active.ID, active.Title, active.State, role, active.ID, strings.Join(next, "|"))
	if _, err := f.s.poster.Post(bg(ctx), message.Draft{From: message.Swarm, To: agent, Kind: message.KindTask, Body: body}); err != nil {
		return fmt.Errorf("tell %s of item %s: %w", agent, active.ID, err)
	}
	return f.edit(ctx, active.ID, active.State, func(cur *workflow.Item) { cur.Notified = active.State })
}

// notifies reports whether entering s tells the stage's agent its turn came.
func notifies(s workflow.State) bool {
	switch s {
	case workflow.Initializer, workflow.DevReady, workflow.QAReady, workflow.DevFeedback:
		return true
	}
	return false
}

// stageState is the working state a READY state leads to.
func stageState(s workflow.State) workflow.State {
	switch s {
	case workflow.DevReady, workflow.DevFeedback:
		return workflow.Dev
	case workflow.QAReady:
		return workflow.QA
	}
	return s
}

// wakeMembers wakes the agents of a workflow: the gate may have opened.
func (f *flow) wakeMembers(w config.Workflow) {
	for _, a := range w.Members() {
		if r, ok := f.s.lookup(a); ok {
			r.poke(false)
		}
	}
}

// gated lists the dev-qa workflows agent belongs to.
func (f *flow) gated(agent string) []config.Workflow {
	var out []config.Workflow
	for _, w := range f.s.cfg.Workflows {
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
			if _, local := f.s.lookup(m); local || m == agent {
				continue
			}
			if _, err := f.s.store.LastSession(bg(ctx), m, mailbox.SessionRunning); err == nil {
				return fmt.Sprintf("workflow %s runs one agent at a time, and %s is in a session (run by another supervisor)", w.Name, m)
			} else if !errors.Is(err, mailbox.ErrNoSuchSession) {
				return fmt.Sprintf("workflow %s: %v", w.Name, err)
			}
		}
		items, err := f.s.store.Items(bg(ctx), w.Name)
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
// DEV), and the stage's clock starts. nil when the session works in no
// stage.
func (f *flow) opening(ctx context.Context, agent string) *stageRun {
	for _, w := range f.gated(agent) {
		items, err := f.s.store.Items(bg(ctx), w.Name)
		if err != nil {
			f.s.log.Warn("read work items", "workflow", w.Name, "err", err)
			continue
		}
		it, ok := activeQA(items)
		if !ok {
			continue
		}
		role, _ := workflow.Stage(it.State)
		if w.Role(role) != agent {
			continue
		}
		now := f.s.clock.Now()
		to := stageState(it.State)
		if to != it.State {
			it, err = f.move(ctx, it, workflow.StageOpen, to, fmt.Sprintf("%s's session started", agent), agent, func(cur *workflow.Item) { cur.StageAt = &now })
		} else {
			err = f.edit(ctx, it.ID, it.State, func(cur *workflow.Item) { cur.StageAt = &now })
		}
		if err != nil {
			f.s.log.Warn("open the stage", "item", it.ID, "err", err)
			continue
		}
		d := w.StageTimeout(it.Complex)
		return &stageRun{Workflow: w.Name, Item: it.ID, State: to, Deadline: now.Add(d), Timeout: d}
	}
	return nil
}

// StageTimeoutError is the cancellation cause of a session whose dev-qa
// stage ran past its timeout.
type StageTimeoutError struct{ Stage stageRun }

func (e *StageTimeoutError) Error() string {
	return fmt.Sprintf("stage %s of item %s (workflow %s) ran past its timeout of %s", e.Stage.State, e.Stage.Item, e.Stage.Workflow, e.Stage.Timeout)
}

// itemNotice is an item's transition as a notice for the live view.
func itemNotice(at time.Time, it workflow.Item, from workflow.State, cause string) lifecycle.Notice {
	return lifecycle.Notice{At: at, Kind: lifecycle.NoticeInfo,
		Text: fmt.Sprintf("workflow %s: item %s %s → %s (%s)", it.Workflow, it.ID, from, it.State, truncate(cause, 120))}
}

// queueQA queues a dev-qa item's dev branch in the merge queue once it
// passed QA ([merge] after_qa), once per item: a candidate of the item
// already stored (queued, landed, sent back) is not queued again; the dev
// re-queues with swarm land after a conflict.
func (f *flow) queueQA(ctx context.Context, w config.Workflow, it workflow.Item) error {
	git, ok := f.s.opts.Worktrees.(QueueGit)
	if !ok {
		return nil
	}
	cs, err := f.s.store.Candidates(ctx, mailbox.CandidateFilter{Agent: w.Dev})
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.Source == merge.FromQA && c.Item == it.ID {
			return nil
		}
	}
	tip, err := git.Tip(ctx, w.Dev)
	if err != nil {
		return err
	}
	c, _, err := Enqueue(ctx, f.s.store, merge.Candidate{Agent: w.Dev, Commit: tip, Source: merge.FromQA, Item: it.ID, By: message.Swarm})
	if err != nil {
		return err
	}
	f.s.log.Info("merge queue: queued a dev-qa item that passed QA", "item", it.ID, "candidate", c.ID, "commit", merge.Short(tip))
	f.s.merges.poke()
	return nil
}
