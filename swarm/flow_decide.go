package swarm

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/workflow"
	"github.com/swarmhq/swarm/worktree"
)

// The workflow engine's decisions, as pure functions of what a look read
// (the item, its workflow and its levels) to the actions flow.apply does:
// no store, no clock, no git here, so every row of both kinds' tables is
// unit-tested (flow_decide_test.go) as nomad's reconciler is.

// act is what one action does.
type act int

const (
	actMove     act = iota // move the item: Event to To, by By, for Cause, with Edit
	actAbort               // abort the item (its ACKs cancelled), for Cause
	actDispatch            // send dev Dispatch; record its msg_id
	actRequest             // send the reviewer the review request
	actReview              // dev's result passed: move (Event to To) at dev's tip, then request
	actCI                  // run the workflow's CI on Result
	actRaise               // raise Draft (Warn, when set, is logged first)
	actPoke                // look again at once
	actQueue               // queue the passed dev-qa item in the merge queue
	actWake                // the active item changed (Seen): wake the workflow's members
	actTell                // tell Agent its turn came (Body), then record it
	actEdit                // write Edit to the row, keeping its state
)

var actNames = [...]string{"move", "abort", "dispatch", "request", "review", "ci", "raise", "poke", "queue", "wake", "tell", "edit"}

func (a act) String() string { return actNames[a] }

// action is one step flow.apply does, in order, on the item the steps
// before it left.
type action struct {
	Act      act
	Event    workflow.Event
	To       workflow.State
	Cause    string
	By       string
	Edit     func(*workflow.Item) // actMove's bookkeeping; nil for none
	Dispatch protocol.TaskDispatch
	Result   message.Message // actReview, actCI: dev's task_result
	CI       string          // actReview: what CI did
	Draft    escalation.Draft
	Warn     []any // actRaise: the warning's attributes
	Agent    string
	Body     string
	Seen     string
}

// step is the actions about one item (none: the workflow's).
type step struct {
	Item workflow.Item
	Acts []action
}

// reviewLevels is what a look read about a dev-review item, beyond the
// item: flow.readReview reads what the item's state needs.
type reviewLevels struct {
	Now  time.Time
	Msgs []message.Message // the item's task messages, oldest first
	// Stop is the escalation of this round the item's state waits on (a
	// lock, CI that kept failing, the approval); nil when none was raised.
	Stop *escalation.Escalation
	// Timeout is the round's result timeout escalation; nil when none.
	Timeout *escalation.Escalation
}

// moved is it after a (a move's state and edit): what the next action
// works on.
func moved(it workflow.Item, a action) workflow.Item {
	if a.Act == actMove || a.Act == actReview {
		it.State = a.To
	}
	if a.Edit != nil {
		it.Inputs = append([]string(nil), it.Inputs...)
		a.Edit(&it)
	}
	return it
}

// stopKind is the escalation a dev-review item in its state waits on, if
// any.
func stopKind(w config.Workflow, it workflow.Item) (escalation.Kind, bool) {
	switch it.State {
	case workflow.Dispatched, workflow.InProgress:
		if it.CIFailures > w.CIRetries {
			return escalation.KindCIFailure, true
		}
	case workflow.Locked:
		return escalation.KindHallucinationLock, true
	case workflow.Approved:
		if needsApproval(w, it) {
			return escalation.KindApproval, true
		}
	}
	return "", false
}

// round is the current round's dispatch and dev's answer to it, in msgs.
func round(w config.Workflow, it workflow.Item, msgs []message.Message) (d message.Message, stored bool, res message.Message, answered bool) {
	d, stored = byMsgID(msgs, it.Dispatch)
	if !stored {
		return d, false, res, false
	}
	res, answered = newest(msgs, protocol.TypeTaskResult, w.Dev, d.ID)
	return d, true, res, answered
}

// decideReview is the next step of a dev-review item.
func decideReview(w config.Workflow, it workflow.Item, lv reviewLevels) ([]action, error) {
	switch it.State {
	case workflow.Dispatched, workflow.InProgress:
		if it.CIFailures > w.CIRetries {
			return decideStopped(w, it, escalation.KindCIFailure, lv.Stop), nil
		}
		if it.Dispatch == "" {
			return []action{dispatchAct(w, it)}, nil
		}
		d, stored, res, found := round(w, it, lv.Msgs)
		if !stored {
			return nil, fmt.Errorf("dispatch %s is not stored", it.Dispatch)
		}
		if it.State == workflow.Dispatched && !found && d.Ack != nil && d.Ack.State == message.AckAcked {
			return []action{{Act: actMove, Event: workflow.Acked, To: workflow.InProgress, Cause: "dev acknowledged " + it.Dispatch, By: w.Dev}}, nil
		}
		if !found {
			return decideDeadline(w, it, d, lv), nil
		}
		if len(w.CI) == 0 {
			return []action{reviewAct(w, res, "not configured")}, nil
		}
		return []action{{Act: actCI, Result: res}}, nil
	case workflow.InReview:
		if it.Request == "" {
			return []action{{Act: actRequest}}, nil
		}
		req, ok := byMsgID(lv.Msgs, it.Request)
		if !ok {
			return nil, fmt.Errorf("review request %s is not stored", it.Request)
		}
		v, found := newest(lv.Msgs, protocol.TypeReviewVerdict, w.Reviewer, req.ID)
		if !found {
			return nil, nil
		}
		return decideVerdict(w, it, v)
	case workflow.Rejected:
		return afterReject(w, it), nil
	case workflow.Locked:
		return decideStopped(w, it, escalation.KindHallucinationLock, lv.Stop), nil
	case workflow.Approved:
		if !needsApproval(w, it) || lv.Stop != nil {
			return nil, nil
		}
		return []action{{Act: actRaise, Draft: approvalDraft(w, it)}}, nil
	}
	return nil, nil
}

// reviewAct records dev's result (CI passed or is not configured) and
// sends the reviewer the request.
func reviewAct(w config.Workflow, res message.Message, ci string) action {
	return action{Act: actReview, Event: workflow.Result, To: workflow.InReview, By: w.Dev, Result: res, CI: ci}
}

// dispatchAct sends dev the item's task_dispatch: the criteria verbatim,
// and what the last round left (the reviewer's issues, CI's output)
// verbatim as subtasks.
func dispatchAct(w config.Workflow, it workflow.Item) action {
	p := protocol.TaskDispatch{Description: it.Title, Branch: worktree.Branch(w.Dev), AcceptanceCriteria: it.Criteria, RiskLevel: string(it.Risk),
		TimeoutMinutes: int((w.ResultTimeout + time.Minute - 1) / time.Minute)}
	if len(it.Inputs) > 0 {
		p.Description = fmt.Sprintf("%s\n\nThis task comes back to you (rejections so far: %d of %d). Fix every point listed under subtasks: they are quoted verbatim. Then commit and send a new task_result.",
			it.Title, it.RejectCount, w.MaxRejects)
		for i, in := range it.Inputs {
			p.Subtasks = append(p.Subtasks, protocol.Subtask{SubtaskID: fmt.Sprintf("fix-%d", i+1), Description: in})
		}
	}
	return action{Act: actDispatch, Agent: w.Dev, Dispatch: p}
}

// decideVerdict counts a reviewer's verdict.
func decideVerdict(w config.Workflow, it workflow.Item, v message.Message) ([]action, error) {
	env, err := mailbox.Envelope(v)
	if err != nil {
		return nil, err
	}
	var p protocol.ReviewVerdict
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return nil, fmt.Errorf("verdict %s: %w", v.MsgID, err)
	}
	if p.Verdict == "approved" {
		return []action{
			{Act: actMove, Event: workflow.Approve, To: workflow.Approved, Cause: "approved by " + w.Reviewer + " in " + v.MsgID, By: w.Reviewer,
				Edit: func(cur *workflow.Item) { cur.Agent, cur.Inputs = "", nil }},
			{Act: actPoke}, // an approval escalation may be due
		}, nil
	}
	n := it.RejectCount + 1
	reject := action{Act: actMove, Event: workflow.Reject, To: workflow.Rejected, Cause: fmt.Sprintf("rejection %d of %d by %s in %s", n, w.MaxRejects, w.Reviewer, v.MsgID), By: w.Reviewer,
		Edit: func(cur *workflow.Item) { cur.RejectCount, cur.Inputs = n, p.Issues }}
	return append([]action{reject}, afterReject(w, moved(it, reject))...), nil
}

// afterReject locks an item at its reject limit, or sends it back to dev.
func afterReject(w config.Workflow, it workflow.Item) []action {
	if it.RejectCount >= w.MaxRejects {
		lock := action{Act: actMove, Event: workflow.Lock, To: workflow.Locked, Cause: fmt.Sprintf("locked at %d rejections (max_rejects %d)", it.RejectCount, w.MaxRejects), By: message.Swarm,
			Edit: func(cur *workflow.Item) { cur.Agent = "" }}
		return []action{lock, {Act: actRaise, Draft: lockDraft(w, moved(it, lock))}}
	}
	redo := action{Act: actMove, Event: workflow.Redo, To: workflow.InProgress, Cause: "back to dev with the reviewer's issues", By: message.Swarm,
		Edit: func(cur *workflow.Item) { cur.Dispatch, cur.Agent = "", w.Dev }}
	return []action{redo, dispatchAct(w, moved(it, redo))}
}

// decideStopped acts on the operator's decision on the escalation e that
// stops an item (a lock, or CI that kept failing): resume starts a fresh
// round, abort ends the item. With no escalation raised since the item
// stopped (a crash in between), it raises it.
func decideStopped(w config.Workflow, it workflow.Item, kind escalation.Kind, e *escalation.Escalation) []action {
	if e == nil {
		if kind == escalation.KindHallucinationLock {
			return []action{{Act: actRaise, Draft: lockDraft(w, it)}}
		}
		return []action{{Act: actRaise, Draft: ciDraft(w, it, "")}}
	}
	if e.State != escalation.Resolved || e.Decision == nil {
		return nil
	}
	cause := fmt.Sprintf("%s by operator (escalation %d)", *e.Decision, e.ID)
	if !e.Decision.Releases() {
		return []action{{Act: actAbort, Cause: cause}}
	}
	resume := action{Act: actMove, Event: workflow.Resume, To: workflow.InProgress, Cause: cause, By: message.Operator, Edit: func(cur *workflow.Item) {
		cur.Dispatch, cur.Agent = "", w.Dev
		if kind == escalation.KindHallucinationLock {
			cur.RejectCount = 0
		} else {
			cur.CIFailures = 0
		}
	}}
	return []action{resume, dispatchAct(w, moved(it, resume))}
}

// decideDeadline raises a stage_timeout escalation when dev acknowledged
// the round's dispatch d and its task_result is past due: once per round,
// whatever became of the escalation since (lv.Timeout is looked up by its
// key among all escalations, resolved ones too). The operator's abort on
// it ends the item; resume (or ack) keeps the item waiting for the late
// result.
func decideDeadline(w config.Workflow, it workflow.Item, d message.Message, lv reviewLevels) []action {
	due, timeout, ok := resultDue(w, d)
	if !ok || lv.Now.Before(due) {
		return nil
	}
	e := lv.Timeout
	if e == nil {
		return []action{{Act: actRaise, Draft: timeoutDraft(w, it, d, due, timeout),
			Warn: []any{"workflow", w.Name, "item", it.ID, "agent", w.Dev, "dispatch", d.MsgID, "due_at", due}}}
	}
	if e.State != escalation.Resolved || e.Decision == nil || e.Decision.Releases() {
		return nil
	}
	return []action{{Act: actAbort, Cause: fmt.Sprintf("%s by operator (escalation %d: no task_result within %s)", *e.Decision, e.ID, protocol.Age(timeout))}}
}

// decideCIFailed counts a failed CI run of the item cur: a repair dispatch
// with the output's tail, or, past ci_retries, a ci_failure escalation.
func decideCIFailed(w config.Workflow, cur workflow.Item, runErr error, out string) []action {
	n := cur.CIFailures + 1
	input := fmt.Sprintf("CI failed (%s: %v). The last lines of its output:\n%s", strings.Join(w.CI, " "), runErr, orNone(out))
	fail := action{Act: actMove, Event: workflow.CIFailed, To: workflow.InProgress, Cause: fmt.Sprintf("CI failed (%d of %d allowed repairs used): %v", n, w.CIRetries, runErr), By: message.Swarm,
		Edit: func(c *workflow.Item) {
			c.CIFailures, c.Inputs = n, []string{input}
			if n <= w.CIRetries {
				c.Dispatch = "" // a repair dispatch goes out
			}
		}}
	if n > w.CIRetries {
		return []action{fail, {Act: actRaise, Draft: ciDraft(w, moved(cur, fail), out)}}
	}
	return []action{fail}
}

// decideQA is the next steps of a dev-qa workflow: the passed items queued
// ([merge] after_qa), the oldest waiting item begun when none is active,
// the members woken when the active item changed since the last look
// (seen), and the active item's stage agent told when its turn comes.
func decideQA(w config.Workflow, afterQA bool, items []workflow.Item, seen string) []step {
	var steps []step
	if afterQA {
		for _, it := range items {
			if it.State == workflow.QAPassed {
				steps = append(steps, step{Item: it, Acts: []action{{Act: actQueue}}})
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
			begin := action{Act: actMove, Event: workflow.Begin, To: to, Cause: "its turn came (first in, first out)", By: message.Swarm,
				Edit: func(cur *workflow.Item) { cur.Agent = agent }}
			steps = append(steps, step{Item: it, Acts: []action{begin}})
			active, ok = moved(it, begin), true
			break
		}
	}
	key := ""
	if ok {
		key = active.ID + " " + string(active.State)
	}
	if key != seen {
		steps = append(steps, step{Acts: []action{{Act: actWake, Seen: key}}})
	}
	// The agent is told when its turn comes (a READY state, or the
	// initializer's stage); the working states begin with its session.
	if !ok || active.Notified == active.State || !notifies(active.State) {
		return steps
	}
	role, _ := workflow.Stage(active.State)
	agent := w.Role(role)
	if agent == "" {
		return steps
	}
	var next []string
	for _, n := range workflow.QATable.Next(stageState(active.State), workflow.Signal) {
		next = append(next, string(n))
	}
	body := fmt.Sprintf("Workflow %s: item %s (%s) is at %s, and it is your turn (%s). Your prompt's Workflow Context has the details; end the stage with 'swarm workflow signal --item %s --status COMPLETE --next %s'.",
		w.Name, active.ID, active.Title, active.State, role, active.ID, strings.Join(next, "|"))
	return append(steps, step{Item: active, Acts: []action{{Act: actTell, Agent: agent, Body: body}}})
}

// decideOpening is what agent's session start does to a dev-qa workflow's
// items: a READY item whose stage is the agent's moves into its working
// state (DEV_READY → DEV), or a working one keeps its state; either way the
// stage's clock starts at now. ok is false when the session works in no
// stage of w.
func decideOpening(w config.Workflow, items []workflow.Item, agent string, now time.Time) (it workflow.Item, a action, ok bool) {
	it, ok = activeQA(items)
	if !ok {
		return it, a, false
	}
	if role, _ := workflow.Stage(it.State); w.Role(role) != agent {
		return it, a, false
	}
	start := func(cur *workflow.Item) { cur.StageAt = &now }
	if to := stageState(it.State); to != it.State {
		return it, action{Act: actMove, Event: workflow.StageOpen, To: to, Cause: fmt.Sprintf("%s's session started", agent), By: agent, Edit: start}, true
	}
	return it, action{Act: actEdit, To: it.State, Edit: start}, true
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

func approvalDraft(w config.Workflow, it workflow.Item) escalation.Draft {
	return escalation.Draft{Kind: escalation.KindApproval, Agent: w.Dev, Ref: escalation.ItemRef(it.ID),
		Summary: text.Truncate(fmt.Sprintf("item %s (%s, risk %s) was approved by %s: 'swarm escalation approve' merges the reviewed commit %s into the base branch",
			it.ID, it.Title, it.Risk, w.Reviewer, text.Short(it.ReviewCommit, 12)), 500),
		Details:   details(map[string]any{"item": it.ID, "workflow": w.Name, "risk": it.Risk, "review_commit": it.ReviewCommit}),
		DedupeKey: escalation.ItemKey(escalation.KindApproval, it.ID)}
}

func lockDraft(w config.Workflow, it workflow.Item) escalation.Draft {
	return escalation.Draft{Kind: escalation.KindHallucinationLock, Agent: w.Dev, Ref: escalation.ItemRef(it.ID),
		Summary: text.Truncate(fmt.Sprintf("item %s (%s) is locked: %s rejected it %d times; resume gives %s a fresh count and the last issues, abort ends the item",
			it.ID, it.Title, w.Reviewer, it.RejectCount, w.Dev), 500),
		Details:   details(map[string]any{"item": it.ID, "workflow": w.Name, "reject_count": it.RejectCount, "issues": it.Inputs}),
		DedupeKey: escalation.ItemKey(escalation.KindHallucinationLock, it.ID)}
}

func ciDraft(w config.Workflow, it workflow.Item, out string) escalation.Draft {
	return escalation.Draft{Kind: escalation.KindCIFailure, Agent: w.Dev, Ref: escalation.ItemRef(it.ID),
		Summary: text.Truncate(fmt.Sprintf("item %s: CI (%s) failed %d times in a row in %s's worktree; no review was requested. Resume sends %s a repair dispatch with the output, abort ends the item",
			it.ID, strings.Join(w.CI, " "), it.CIFailures, w.Dev, w.Dev), 500),
		Details:   details(map[string]any{"item": it.ID, "workflow": w.Name, "ci": w.CI, "failures": it.CIFailures, "output_tail": out}),
		DedupeKey: escalation.ItemKey(escalation.KindCIFailure, it.ID)}
}

func timeoutDraft(w config.Workflow, it workflow.Item, d message.Message, due time.Time, timeout time.Duration) escalation.Draft {
	return escalation.Draft{Kind: escalation.KindStageTimeout, Agent: w.Dev, Ref: escalation.ItemRef(it.ID),
		Summary: text.Truncate(fmt.Sprintf("item %s (%s): %s acknowledged dispatch #%d at %s and sent no task_result within %s; the item stays %s. Remind %s ('swarm send %s \"...\"'); resume keeps waiting for the result, abort ends the item",
			it.ID, it.Title, w.Dev, d.ID, d.Ack.AckedAt.UTC().Format(time.RFC3339), protocol.Age(timeout), it.State, w.Dev, w.Dev), 500),
		Details: details(map[string]any{"item": it.ID, "workflow": w.Name, "stage": it.State, "dispatch": d.MsgID,
			"acked_at": d.Ack.AckedAt.UTC().Format(time.RFC3339Nano), "due_at": due.UTC().Format(time.RFC3339Nano), "timeout": timeout.String()}),
		DedupeKey: escalation.ResultTimeoutKey(it.ID, d.MsgID)}
}
