package swarm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/workflow"
)

// The workflow engine's decision table, without a store: every row of both
// kinds' fsm tables the engine takes is a case here, and
// TestDecideCoversTables checks that no row is left out unsaid.

var (
	t0         = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	reviewFlow = config.Workflow{Name: "review", Kind: workflow.DevReview, Dev: "dev", Reviewer: "critic", MaxRejects: 2, CIRetries: 1, ResultTimeout: 30 * time.Minute}
	qaFlow     = config.Workflow{Name: "qa", Kind: workflow.DevQA, Dev: "dev", QA: "tester", Initializer: "lead"}
)

// pmsg is a stored protocol message with its envelope.
func pmsg(id int64, t protocol.Type, from, to, msgID string, payload any) message.Message {
	p, _ := json.Marshal(payload)
	env, _ := json.Marshal(protocol.Envelope{ProtocolVersion: "1.0", MsgID: msgID, Type: t, From: from, To: to, TaskID: "T-1", Payload: p})
	return message.Message{ID: id, From: from, To: to, Kind: message.KindProtocol, Payload: env, MsgID: msgID, TaskID: "T-1", ProtocolType: string(t)}
}

// dispatched is the round's dispatch (#1, "d1"), acknowledged at acked
// (nil: not yet).
func dispatched(acked *time.Time) message.Message {
	m := pmsg(1, protocol.TypeTaskDispatch, message.Swarm, "dev", "d1", protocol.TaskDispatch{Description: "x", TimeoutMinutes: 30})
	m.Ack = &message.Ack{Required: true, State: message.AckPending}
	if acked != nil {
		m.Ack.State, m.Ack.AckedAt = message.AckAcked, acked
	}
	return m
}

func result(id int64) message.Message {
	return pmsg(id, protocol.TypeTaskResult, "dev", message.Swarm, "r1", protocol.TaskResult{Status: "completed"})
}

func request() message.Message {
	return pmsg(3, protocol.TypeReviewRequest, message.Swarm, "critic", "q1", protocol.ReviewRequest{})
}

func verdict(v string, issues ...string) message.Message {
	return pmsg(4, protocol.TypeReviewVerdict, "critic", message.Swarm, "v1", protocol.ReviewVerdict{Verdict: v, Issues: issues})
}

func decided(kind escalation.Kind, state escalation.State, d escalation.Decision) *escalation.Escalation {
	e := &escalation.Escalation{ID: 7, Kind: kind, State: state}
	if d != "" {
		e.Decision = &d
	}
	return e
}

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

// describe is an action in a test's words; from is the item's state
// before it.
func describe(from workflow.State, a action) string {
	switch a.Act {
	case actMove, actReview:
		return fmt.Sprintf("%s %s→%s by %s", a.Act, from, a.To, a.By)
	case actAbort:
		return fmt.Sprintf("abort %s→%s", from, workflow.Aborted)
	case actDispatch, actTell:
		return fmt.Sprintf("%s %s", a.Act, a.Agent)
	case actRaise:
		return fmt.Sprintf("raise %s %s", a.Draft.Kind, a.Draft.DedupeKey)
	case actWake:
		return "wake " + a.Seen
	}
	return a.Act.String()
}

// edge is one row of a kind's table.
type edge struct {
	kind     workflow.Kind
	from, to workflow.State
	event    workflow.Event
}

// covered are the table rows the cases below took.
var covered = map[edge]bool{}

// run applies acts to a copy of it as flow.apply would, recording the
// rows they take, and returns the descriptions and the item they leave.
func run(it workflow.Item, acts []action) ([]string, workflow.Item) {
	var got []string
	for _, a := range acts {
		got = append(got, describe(it.State, a))
		switch a.Act {
		case actMove, actReview:
			covered[edge{it.Kind, it.State, a.To, a.Event}] = true
		case actAbort:
			covered[edge{it.Kind, it.State, workflow.Aborted, workflow.Abort}] = true
		}
		it = moved(it, a)
	}
	return got, it
}

func TestDecideReview(t *testing.T) {
	ciFlow := reviewFlow
	ciFlow.CI = []string{"make", "test"}
	approval := reviewFlow
	approval.Merge = config.MergeApproval
	item := func(s workflow.State, edit ...func(*workflow.Item)) workflow.Item {
		it := workflow.Item{ID: "T-1", Workflow: "review", Kind: workflow.DevReview, Title: "paginate", State: s, Dispatch: "d1", Request: "q1", Risk: workflow.RiskMedium}
		for _, e := range edit {
			e(&it)
		}
		return it
	}
	undispatched := func(it *workflow.Item) { it.Dispatch = "" }
	ciFailed := func(it *workflow.Item) { it.CIFailures = 2 }
	rejected := func(n int) func(*workflow.Item) {
		return func(it *workflow.Item) { it.RejectCount, it.Inputs = n, []string{"no tests"} }
	}
	cases := []struct {
		name    string
		w       config.Workflow
		it      workflow.Item
		lv      reviewLevels
		want    []string
		wantErr string
		check   func(t *testing.T, acts []action, after workflow.Item)
	}{
		{name: "a new item gets its dispatch", it: item(workflow.Dispatched, undispatched),
			want: []string{"dispatch dev"},
			check: func(t *testing.T, acts []action, _ workflow.Item) {
				if p := acts[0].Dispatch; p.Branch != "swarm/dev" || p.TimeoutMinutes != 30 || len(p.Subtasks) != 0 {
					t.Errorf("dispatch = %+v", p)
				}
			}},
		{name: "dev acknowledged", it: item(workflow.Dispatched), lv: reviewLevels{Now: t0, Msgs: []message.Message{dispatched(at(0))}},
			want: []string{"move dispatched→in_progress by dev"}},
		{name: "nothing before the ACK", it: item(workflow.Dispatched), lv: reviewLevels{Now: t0, Msgs: []message.Message{dispatched(nil)}}},
		{name: "a result without CI goes to review", it: item(workflow.Dispatched), lv: reviewLevels{Now: t0, Msgs: []message.Message{dispatched(nil), result(2)}},
			want: []string{"review dispatched→in_review by dev"}},
		{name: "a result in progress goes to review", it: item(workflow.InProgress), lv: reviewLevels{Now: t0, Msgs: []message.Message{dispatched(at(0)), result(2)}},
			want: []string{"review in_progress→in_review by dev"},
			check: func(t *testing.T, acts []action, _ workflow.Item) {
				if acts[0].CI != "not configured" || acts[0].Result.MsgID != "r1" {
					t.Errorf("review = %+v", acts[0])
				}
			}},
		{name: "a result with CI runs CI", w: ciFlow, it: item(workflow.InProgress), lv: reviewLevels{Now: t0, Msgs: []message.Message{dispatched(at(0)), result(2)}},
			want: []string{"ci"}},
		{name: "a dispatch not stored", it: item(workflow.InProgress), lv: reviewLevels{Now: t0}, wantErr: "dispatch d1 is not stored"},
		{name: "waiting within the result timeout", it: item(workflow.InProgress), lv: reviewLevels{Now: t0.Add(29 * time.Minute), Msgs: []message.Message{dispatched(at(0))}}},
		{name: "a result past due raises a stage timeout", it: item(workflow.InProgress), lv: reviewLevels{Now: t0.Add(30 * time.Minute), Msgs: []message.Message{dispatched(at(0))}},
			want: []string{"raise stage_timeout stage_timeout:item:T-1:result:d1"}},
		{name: "a stage timeout still open waits", it: item(workflow.InProgress), lv: reviewLevels{Now: t0.Add(time.Hour), Msgs: []message.Message{dispatched(at(0))},
			Timeout: decided(escalation.KindStageTimeout, escalation.Open, "")}},
		{name: "a stage timeout resumed keeps waiting", it: item(workflow.InProgress), lv: reviewLevels{Now: t0.Add(time.Hour), Msgs: []message.Message{dispatched(at(0))},
			Timeout: decided(escalation.KindStageTimeout, escalation.Resolved, escalation.Resume)}},
		{name: "a stage timeout aborted ends the item", it: item(workflow.InProgress), lv: reviewLevels{Now: t0.Add(time.Hour), Msgs: []message.Message{dispatched(at(0))},
			Timeout: decided(escalation.KindStageTimeout, escalation.Resolved, escalation.Abort)},
			want: []string{"abort in_progress→aborted"}},
		{name: "CI past its retries raises", w: ciFlow, it: item(workflow.InProgress, ciFailed),
			want: []string{"raise ci_failure ci_failure:item:T-1"}},
		{name: "CI's escalation open waits", w: ciFlow, it: item(workflow.InProgress, ciFailed), lv: reviewLevels{Stop: decided(escalation.KindCIFailure, escalation.Acked, "")}},
		{name: "CI's escalation resumed: a fresh round", w: ciFlow, it: item(workflow.InProgress, ciFailed), lv: reviewLevels{Stop: decided(escalation.KindCIFailure, escalation.Resolved, escalation.Resume)},
			want: []string{"move in_progress→in_progress by operator", "dispatch dev"},
			check: func(t *testing.T, _ []action, after workflow.Item) {
				if after.CIFailures != 0 || after.Dispatch != "" || after.Agent != "dev" {
					t.Errorf("after resume: %+v", after)
				}
			}},
		{name: "CI's escalation aborted (dispatched)", w: ciFlow, it: item(workflow.Dispatched, ciFailed), lv: reviewLevels{Stop: decided(escalation.KindCIFailure, escalation.Resolved, escalation.Abort)},
			want: []string{"abort dispatched→aborted"}},
		{name: "in review without a request sends it", it: item(workflow.InReview, func(it *workflow.Item) { it.Request = "" }),
			want: []string{"request"}},
		{name: "a request not stored", it: item(workflow.InReview), lv: reviewLevels{Msgs: []message.Message{dispatched(at(0))}}, wantErr: "review request q1 is not stored"},
		{name: "no verdict yet", it: item(workflow.InReview), lv: reviewLevels{Msgs: []message.Message{dispatched(at(0)), result(2), request()}}},
		{name: "approved", it: item(workflow.InReview), lv: reviewLevels{Msgs: []message.Message{dispatched(at(0)), result(2), request(), verdict("approved")}},
			want: []string{"move in_review→approved by critic", "poke"}},
		{name: "rejected: back to dev with the issues", it: item(workflow.InReview), lv: reviewLevels{Msgs: []message.Message{dispatched(at(0)), result(2), request(), verdict("rejected", "no tests", "typo")}},
			want: []string{"move in_review→rejected by critic", "move rejected→in_progress by swarm", "dispatch dev"},
			check: func(t *testing.T, acts []action, after workflow.Item) {
				p := acts[2].Dispatch
				if after.RejectCount != 1 || len(p.Subtasks) != 2 || p.Subtasks[1].Description != "typo" || !strings.Contains(p.Description, "rejections so far: 1 of 2") {
					t.Errorf("after the rejection: %+v, dispatch %+v", after, p)
				}
			}},
		{name: "rejected at the limit: locked", it: item(workflow.InReview, rejected(1)), lv: reviewLevels{Msgs: []message.Message{dispatched(at(0)), result(2), request(), verdict("rejected", "still no tests")}},
			want: []string{"move in_review→rejected by critic", "move rejected→locked by swarm", "raise hallucination_lock hallucination_lock:item:T-1"}},
		{name: "a bad verdict", it: item(workflow.InReview), lv: reviewLevels{Msgs: []message.Message{dispatched(at(0)), result(2), request(),
			{ID: 4, From: "critic", To: message.Swarm, Kind: message.KindProtocol, ProtocolType: string(protocol.TypeReviewVerdict), Payload: json.RawMessage(`{"payload":"x"}`)}}},
			wantErr: "verdict"},
		{name: "rejected after a crash: redispatched", it: item(workflow.Rejected, rejected(1)),
			want: []string{"move rejected→in_progress by swarm", "dispatch dev"}},
		{name: "rejected after a crash at the limit: locked", it: item(workflow.Rejected, rejected(2)),
			want: []string{"move rejected→locked by swarm", "raise hallucination_lock hallucination_lock:item:T-1"}},
		{name: "locked without its escalation raises it", it: item(workflow.Locked, rejected(2)),
			want: []string{"raise hallucination_lock hallucination_lock:item:T-1"}},
		{name: "locked waits for the operator", it: item(workflow.Locked, rejected(2)), lv: reviewLevels{Stop: decided(escalation.KindHallucinationLock, escalation.Open, "")}},
		{name: "locked and resumed: a fresh count", it: item(workflow.Locked, rejected(2)), lv: reviewLevels{Stop: decided(escalation.KindHallucinationLock, escalation.Resolved, escalation.Resume)},
			want: []string{"move locked→in_progress by operator", "dispatch dev"},
			check: func(t *testing.T, acts []action, after workflow.Item) {
				if after.RejectCount != 0 || !strings.Contains(acts[1].Dispatch.Description, "rejections so far: 0 of 2") {
					t.Errorf("after resume: %+v, dispatch %+v", after, acts[1].Dispatch)
				}
			}},
		{name: "locked and aborted", it: item(workflow.Locked, rejected(2)), lv: reviewLevels{Stop: decided(escalation.KindHallucinationLock, escalation.Resolved, escalation.Abort)},
			want: []string{"abort locked→aborted"}},
		{name: "approved at low risk: nothing", it: item(workflow.Approved, func(it *workflow.Item) { it.Risk = workflow.RiskLow })},
		{name: "approved at high risk asks the operator", it: item(workflow.Approved, func(it *workflow.Item) { it.Risk = workflow.RiskHigh }),
			want: []string{"raise approval approval:item:T-1"}},
		{name: "approved with merge = approval asks once", w: approval, it: item(workflow.Approved), lv: reviewLevels{Stop: decided(escalation.KindApproval, escalation.Open, "")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := c.w
			if w.Name == "" {
				w = reviewFlow
			}
			acts, err := decideReview(w, c.it, c.lv)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, after := run(c.it, acts)
			if !slices.Equal(got, c.want) {
				t.Fatalf("actions:\n got %q\nwant %q", got, c.want)
			}
			if c.check != nil {
				c.check(t, acts, after)
			}
		})
	}
}

func TestDecideCIFailed(t *testing.T) {
	w := reviewFlow
	w.CI = []string{"make", "test"}
	for _, c := range []struct {
		from     workflow.State
		failures int
		want     []string
	}{
		{workflow.Dispatched, 0, []string{"move dispatched→in_progress by swarm"}},
		{workflow.InProgress, 1, []string{"move in_progress→in_progress by swarm", "raise ci_failure ci_failure:item:T-1"}},
	} {
		it := workflow.Item{ID: "T-1", Kind: workflow.DevReview, State: c.from, Dispatch: "d1", CIFailures: c.failures}
		got, after := run(it, decideCIFailed(w, it, errors.New("exit status 1"), "FAIL x"))
		if !slices.Equal(got, c.want) {
			t.Fatalf("from %s with %d failures:\n got %q\nwant %q", c.from, c.failures, got, c.want)
		}
		repair := after.CIFailures <= w.CIRetries
		if after.CIFailures != c.failures+1 || (after.Dispatch == "") != repair || !strings.Contains(after.Inputs[0], "FAIL x") {
			t.Errorf("after: %+v", after)
		}
	}
}

func TestDecideQA(t *testing.T) {
	qa := func(id string, s workflow.State, notified workflow.State) workflow.Item {
		return workflow.Item{ID: id, Workflow: "qa", Kind: workflow.DevQA, Title: id, State: s, Notified: notified}
	}
	noInit := qaFlow
	noInit.Initializer = ""
	cases := []struct {
		name    string
		w       config.Workflow
		afterQA bool
		items   []workflow.Item
		seen    string
		want    []string
	}{
		{name: "the first item begins with the initializer", items: []workflow.Item{qa("F-1", workflow.Start, ""), qa("F-2", workflow.Start, "")},
			want: []string{"move START→INITIALIZER by swarm", "wake F-1 INITIALIZER", "tell lead"}},
		{name: "without an initializer the first begins with dev", w: noInit, items: []workflow.Item{qa("F-1", workflow.Start, "")},
			want: []string{"move START→DEV_READY by swarm", "wake F-1 DEV_READY", "tell dev"}},
		{name: "the next item begins with dev", items: []workflow.Item{qa("F-1", workflow.Aborted, ""), qa("F-0", workflow.QAPassed, ""), qa("F-2", workflow.Start, "")},
			want: []string{"move START→DEV_READY by swarm", "wake F-2 DEV_READY", "tell dev"}},
		{name: "a passed item is queued with after_qa", afterQA: true, items: []workflow.Item{qa("F-0", workflow.QAPassed, "")}, seen: "x",
			want: []string{"queue", "wake "}},
		{name: "QA's turn is told once", items: []workflow.Item{qa("F-1", workflow.QAReady, "")}, seen: "F-1 QA_READY",
			want: []string{"tell tester"}},
		{name: "told already: nothing", items: []workflow.Item{qa("F-1", workflow.QAReady, workflow.QAReady)}, seen: "F-1 QA_READY"},
		{name: "feedback goes to dev", items: []workflow.Item{qa("F-1", workflow.DevFeedback, workflow.QA)}, seen: "F-1 QA",
			want: []string{"wake F-1 DEV_FEEDBACK", "tell dev"}},
		{name: "a working stage is not told", items: []workflow.Item{qa("F-1", workflow.Dev, workflow.DevReady)}, seen: "F-1 DEV_READY",
			want: []string{"wake F-1 DEV"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := c.w
			if w.Name == "" {
				w = qaFlow
			}
			var got []string
			for _, st := range decideQA(w, c.afterQA, c.items, c.seen) {
				d, _ := run(st.Item, st.Acts)
				got = append(got, d...)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("actions:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestDecideOpening(t *testing.T) {
	for _, c := range []struct {
		state workflow.State
		agent string
		want  string // "" when the session opens no stage
	}{
		{workflow.DevReady, "dev", "move DEV_READY→DEV by dev"},
		{workflow.DevFeedback, "dev", "move DEV_FEEDBACK→DEV by dev"},
		{workflow.QAReady, "tester", "move QA_READY→QA by tester"},
		{workflow.Dev, "dev", "edit"}, // a second session of the stage: its clock restarts
		{workflow.QAReady, "dev", ""},
		{workflow.Start, "dev", ""},
	} {
		items := []workflow.Item{{ID: "F-1", Kind: workflow.DevQA, State: c.state}}
		it, a, ok := decideOpening(qaFlow, items, c.agent, t0)
		got := ""
		if ok {
			var after workflow.Item
			var d []string
			d, after = run(it, []action{a})
			got = d[0]
			if after.StageAt == nil || !after.StageAt.Equal(t0) {
				t.Errorf("%s by %s: the stage's clock did not start: %+v", c.state, c.agent, after)
			}
		}
		if got != c.want {
			t.Errorf("%s by %s: got %q, want %q", c.state, c.agent, got, c.want)
		}
	}
}

// TestDecideCoversTables: every row of both kinds' tables is taken by a
// decision case above, or is named here with who takes it instead.
func TestDecideCoversTables(t *testing.T) {
	t.Run("cases", func(t *testing.T) {
		TestDecideReview(t)
		TestDecideCIFailed(t)
		TestDecideQA(t)
		TestDecideOpening(t)
	})
	elsewhere := map[edge]string{}
	for _, k := range workflow.Kinds {
		first := workflow.Dispatched
		if k == workflow.DevQA {
			first = workflow.Start
		}
		elsewhere[edge{k, "", first, workflow.Create}] = "StartItem stores the item"
	}
	elsewhere[edge{workflow.DevReview, workflow.Approved, workflow.Merged, workflow.Merge}] = "MergeItem (swarm workflow merge, the approval's decision)"
	for _, s := range []workflow.State{workflow.InReview, workflow.Approved, workflow.Rejected} {
		elsewhere[edge{workflow.DevReview, s, workflow.Aborted, workflow.Abort}] = "AbortItem (swarm workflow abort)"
	}
	for _, s := range []workflow.State{workflow.Start, workflow.Initializer, workflow.DevReady, workflow.Dev, workflow.QAReady, workflow.QA, workflow.DevFeedback} {
		elsewhere[edge{workflow.DevQA, s, workflow.Aborted, workflow.Abort}] = "AbortItem (swarm workflow abort)"
		for _, to := range workflow.QATable.Next(s, workflow.Signal) {
			elsewhere[edge{workflow.DevQA, s, to, workflow.Signal}] = "SignalItem (the stage's agent)"
		}
	}
	events := []workflow.Event{workflow.Create, workflow.Acked, workflow.Result, workflow.CIFailed, workflow.Approve, workflow.Reject, workflow.Redo,
		workflow.Lock, workflow.Resume, workflow.Merge, workflow.Abort, workflow.Signal, workflow.Begin, workflow.StageOpen, workflow.Finish}
	rows := 0
	for _, k := range workflow.Kinds {
		for _, from := range append([]workflow.State{""}, workflow.States...) {
			for _, ev := range events {
				for _, to := range k.Table().Next(from, ev) {
					rows++
					e := edge{k, from, to, ev}
					if !covered[e] && elsewhere[e] == "" {
						t.Errorf("%s: no decision case takes %q --%s--> %q", k, from, ev, to)
					}
					if covered[e] && elsewhere[e] != "" {
						t.Errorf("%s: %q --%s--> %q is decided here, not only by %s", k, from, ev, to, elsewhere[e])
					}
				}
			}
		}
	}
	if rows < 36 { // both tables had 36 rows when this was written
		t.Fatalf("only %d rows found: the events list is out of date", rows)
	}
}
