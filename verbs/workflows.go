package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/workflow"
	"github.com/swarmhq/swarm/worktree"
)

// The workflow verbs (DESIGN §9.3): start, signal, abort, merge, status,
// history. The supervisor's flow moves items as the runtime through the
// same store transitions; these are the doors' way in.

// StartRequest is `swarm workflow start`.
type StartRequest = swarm.StartRequest

// StartItem is the start verb: caller (the operator, or a session with
// can_dispatch) starts a work item; the history records it as the trigger.
func StartItem(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, req StartRequest) (workflow.Item, error) {
	if err := c.Require(mode.CanDispatch, "swarm workflow start"); err != nil {
		return workflow.Item{}, err
	}
	req.Caller = c
	return swarm.StartItem(ctx, st, cfg, req)
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

// SignalRequest is `swarm workflow signal`, from the stage's agent.
type SignalRequest struct {
	Item      string // "" means the agent's live item
	Status    string
	Next      string
	Message   string   // feedback or notes, forwarded verbatim
	Artifacts []string // paths created
}

// IllegalSignalError is a signal the workflow's table refuses: the state
// is kept (exit 1).
type IllegalSignalError struct {
	Item  workflow.Item
	Next  string
	Legal []workflow.State
}

func (e *IllegalSignalError) Error() string {
	legal := make([]string, len(e.Legal))
	for i, s := range e.Legal {
		legal[i] = string(s)
	}
	return fmt.Sprintf("illegal transition for item %s: %s → %s is not allowed (from %s: %s); the item stays in %s",
		e.Item.ID, e.Item.State, e.Next, e.Item.State, orNone(strings.Join(legal, ", ")), e.Item.State)
}

// SignalItem is the signal verb: only the stage's agent's session
// signals an item (rule stage). It moves a dev-qa item by that signal. COMPLETE
// moves it to Next if the table allows; ERROR and TIMEOUT keep the stage
// and raise an escalation for the operator.
func SignalItem(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, req SignalRequest) (workflow.Item, error) {
	status, err := workflow.ParseStatus(req.Status)
	if err != nil {
		return workflow.Item{}, usage("%v", err)
	}
	if !c.IsSession() {
		return workflow.Item{}, c.Stage("the stage's agent", "swarm workflow signal")
	}
	agent := c.Agent()
	it, w, err := signalled(ctx, st, cfg, agent, req.Item)
	if err != nil {
		return workflow.Item{}, err
	}
	role, working := workflow.Stage(it.State)
	owner := w.Role(role)
	if !working || owner == "" {
		owner = "nobody"
	}
	if err := c.Stage(owner, fmt.Sprintf("signalling item %s (in %s)", it.ID, it.State)); err != nil {
		return workflow.Item{}, err
	}
	if status != workflow.StatusComplete {
		_, _, rerr := swarm.Raise(ctx, st, escalation.Draft{Kind: escalation.KindAgent, Severity: escalation.Warning, Agent: agent, Ref: escalation.ItemRef(it.ID),
			Summary:   text.Truncate(fmt.Sprintf("%s signalled %s for item %s in %s: %s", agent, status, it.ID, it.State, orNone(req.Message)), 500),
			DedupeKey: fmt.Sprintf("signal:%s:%s:%s", it.ID, it.State, status)})
		if rerr != nil {
			return it, rerr
		}
		return it, nil
	}
	next := workflow.State(strings.ToUpper(strings.TrimSpace(req.Next)))
	if req.Next == "" {
		return workflow.Item{}, usage("--next is required with --status COMPLETE: the state the item moves to (from %s: %s)", it.State, legalNext(it.State))
	}
	if err := workflow.QATable.Check(it.State, workflow.Signal, next); err != nil {
		return it, &IllegalSignalError{Item: it, Next: string(next), Legal: workflow.QATable.Next(it.State, workflow.Signal)}
	}
	cause := fmt.Sprintf("%s: %s", status, orNone(text.Truncate(req.Message, 200)))
	if len(req.Artifacts) > 0 {
		cause += " (artifacts: " + strings.Join(req.Artifacts, ", ") + ")"
	}
	err = st.InTx(ctx, func(tx mailbox.Tx) error {
		cur, err := tx.Item(it.ID)
		if err != nil {
			return err
		}
		if _, err := fsm.ApplyBy(tx, workflow.QATable, fsm.SubjectItem, it.ID, cur.State, workflow.Signal, next, text.Truncate(cause, 500), c.By()); err != nil {
			return err
		}
		nextRole, _ := workflow.Stage(next)
		cur.Agent, cur.StageAt, cur.Notified = w.Role(nextRole), nil, ""
		var inputs []string
		if m := strings.TrimSpace(req.Message); m != "" {
			inputs = append(inputs, fmt.Sprintf("%s (%s) says: %s", agent, it.State, m))
		}
		for _, a := range req.Artifacts {
			inputs = append(inputs, "artifact: "+a)
		}
		cur.Inputs = inputs
		return tx.UpdateItem(cur)
	})
	if errors.Is(err, mailbox.ErrStateConflict) {
		return it, fmt.Errorf("item %s moved while signalling; see 'swarm workflow status %s' and signal again if it still needs it", it.ID, w.Name)
	}
	if err != nil {
		return it, fmt.Errorf("signal item %s: %w", it.ID, err)
	}
	return st.Item(ctx, it.ID)
}

func legalNext(s workflow.State) string {
	var out []string
	for _, n := range workflow.QATable.Next(s, workflow.Signal) {
		out = append(out, string(n))
	}
	return orNone(strings.Join(out, ", "))
}

// signalled finds the item a signal is about: the named one, or the live
// dev-qa item whose stage belongs to the agent.
func signalled(ctx context.Context, st mailbox.Store, cfg *config.Config, agent, id string) (workflow.Item, config.Workflow, error) {
	if id != "" {
		it, err := st.Item(ctx, id)
		if errors.Is(err, mailbox.ErrNoSuchItem) {
			return it, config.Workflow{}, fmt.Errorf("no item %s: 'swarm workflow status' lists the items", id)
		}
		if err != nil {
			return it, config.Workflow{}, err
		}
		w, ok := cfg.Workflow(it.Workflow)
		if !ok {
			return it, w, fmt.Errorf("item %s belongs to workflow %s, which swarm.toml no longer has", it.ID, it.Workflow)
		}
		if w.Kind != workflow.DevQA {
			return it, w, fmt.Errorf("item %s is a %s item: its stages end with protocol messages ('swarm send swarm --type task_result|review_verdict --reply-to <id>'), not signals", it.ID, w.Kind)
		}
		return it, w, nil
	}
	for _, w := range cfg.Workflows {
		if w.Kind != workflow.DevQA || w.RoleOf(agent) == "" {
			continue
		}
		items, err := st.Items(ctx, w.Name)
		if err != nil {
			return workflow.Item{}, w, err
		}
		if it, ok := swarm.ActiveQA(items); ok {
			if role, _ := workflow.Stage(it.State); w.Role(role) == agent {
				return it, w, nil
			}
		}
	}
	return workflow.Item{}, config.Workflow{}, fmt.Errorf("%s has no item in a stage of its own; name one with --item (see 'swarm workflow status')", agent)
}

// AbortItem is the abort verb, the operator's: it ends a live item: its dispatch's ACK is cancelled, and the
// workflow moves on.
func AbortItem(ctx context.Context, c identity.Caller, st mailbox.Store, id, note string) (workflow.Item, error) {
	if err := operatorOnly(c, "swarm workflow abort"); err != nil {
		return workflow.Item{}, err
	}
	it, err := st.Item(ctx, id)
	if errors.Is(err, mailbox.ErrNoSuchItem) {
		return it, fmt.Errorf("no item %s: 'swarm workflow status' lists the items", id)
	}
	if err != nil {
		return it, err
	}
	if !it.Live() {
		return it, fmt.Errorf("item %s is %s already: nothing to abort", id, it.State)
	}
	err = st.InTx(ctx, func(tx mailbox.Tx) error {
		return swarm.AbortTx(tx, it, "aborted by "+c.By()+optNote(note), c.By())
	})
	if err != nil {
		return it, fmt.Errorf("abort item %s: %w", id, err)
	}
	return st.Item(ctx, id)
}

func optNote(note string) string {
	if note = strings.TrimSpace(note); note != "" {
		return ": " + text.Truncate(note, 200)
	}
	return ""
}

// History is the history verb: an item's transitions, oldest first. A
// read any caller the door knows may make.
func History(ctx context.Context, c identity.Caller, st mailbox.Store, ids ...string) ([]workflow.Entry, error) {
	if !c.Known() {
		return nil, operatorOnly(c, "swarm workflow history")
	}
	evs, err := st.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectItem, Subjects: ids})
	if err != nil {
		return nil, err
	}
	out := make([]workflow.Entry, 0, len(evs))
	for _, e := range evs {
		en := workflow.Entry{Item: e.Subject, To: workflow.State(e.To), At: e.At, TriggeredBy: e.AgentName(), Cause: e.Cause}
		if e.From != nil { // nil: the item's creation
			en.From = workflow.State(*e.From)
		}
		out = append(out, en)
	}
	return out, nil
}

// WorkflowView is one workflow as `swarm workflow status --json` prints it: the
// items, and for dev-qa seed 001's workflow-state.json fields.
type WorkflowView struct {
	Name string        `json:"name"`
	Kind workflow.Kind `json:"kind"`
	// Roles binds each of the kind's roles to its agent.
	Roles map[string]string `json:"roles"`
	Items []workflow.Item   `json:"items"`

	// The dev-qa fields: MarshalJSON prints every one for dev-qa (null
	// when there is none, as next_agent once COMPLETE) and none for
	// other kinds.
	CurrentState      string           `json:"current_state,omitempty"`
	NextAgent         *string          `json:"next_agent,omitempty"`
	PreviousState     *string          `json:"previous_state,omitempty"`
	FeatureID         *string          `json:"feature_id,omitempty"`
	Timestamp         *time.Time       `json:"timestamp,omitempty"`
	TransitionHistory []workflow.Entry `json:"transition_history,omitempty"`
}

// MarshalJSON keeps seed 001's shape for dev-qa: a reader of
// workflow-state.json finds every key, whatever the state.
func (s WorkflowView) MarshalJSON() ([]byte, error) {
	type common struct {
		Name  string            `json:"name"`
		Kind  workflow.Kind     `json:"kind"`
		Roles map[string]string `json:"roles"`
		Items []workflow.Item   `json:"items"`
	}
	c := common{Name: s.Name, Kind: s.Kind, Roles: s.Roles, Items: s.Items}
	if s.Kind != workflow.DevQA {
		return json.Marshal(c)
	}
	history := s.TransitionHistory
	if history == nil {
		history = []workflow.Entry{}
	}
	return json.Marshal(struct {
		common
		CurrentState      string           `json:"current_state"`
		NextAgent         *string          `json:"next_agent"`
		PreviousState     *string          `json:"previous_state"`
		FeatureID         *string          `json:"feature_id"`
		Timestamp         *time.Time       `json:"timestamp"`
		TransitionHistory []workflow.Entry `json:"transition_history"`
	}{c, s.CurrentState, s.NextAgent, s.PreviousState, s.FeatureID, s.Timestamp, history})
}

// WorkflowStatus is the status verb: one workflow (every workflow when
// name is empty). A read any caller the door knows may make.
func WorkflowStatus(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, name string) ([]WorkflowView, error) {
	if !c.Known() {
		return nil, operatorOnly(c, "swarm workflow status")
	}
	var out []WorkflowView
	for _, w := range cfg.Workflows {
		if name != "" && w.Name != name {
			continue
		}
		items, err := st.Items(ctx, w.Name)
		if err != nil {
			return nil, err
		}
		if items == nil {
			items = []workflow.Item{}
		}
		s := WorkflowView{Name: w.Name, Kind: w.Kind, Roles: map[string]string{}, Items: items}
		for _, r := range []string{"dev", "reviewer", "qa", "initializer"} {
			if a := w.Role(r); a != "" {
				s.Roles[r] = a
			}
		}
		if w.Kind == workflow.DevQA {
			if err := qaState(ctx, c, st, w, &s); err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	if name != "" && len(out) == 0 {
		return nil, usage("no workflow %q (swarm.toml has %s)", name, orNone(strings.Join(cfg.WorkflowNames(), ", ")))
	}
	return out, nil
}

// qaState fills seed 001's fields: the workflow's state is its active
// item's, START before any item began, COMPLETE when every item is done.
func qaState(ctx context.Context, c identity.Caller, st mailbox.Store, w config.Workflow, s *WorkflowView) error {
	ids := make([]string, len(s.Items))
	for i, it := range s.Items {
		ids[i] = it.ID
	}
	s.TransitionHistory = []workflow.Entry{}
	if len(ids) > 0 {
		h, err := History(ctx, c, st, ids...)
		if err != nil {
			return err
		}
		for _, e := range h {
			if e.From == "" {
				continue // an item stored in START is not a move of the workflow
			}
			s.TransitionHistory = append(s.TransitionHistory, e)
		}
	}
	str := func(v string) *string { return &v }
	active, ok := swarm.ActiveQA(s.Items)
	switch {
	case ok:
		s.CurrentState, s.FeatureID = string(active.State), str(active.ID)
	case slices.ContainsFunc(s.Items, func(it workflow.Item) bool { return it.State == workflow.Start }):
		s.CurrentState = string(workflow.Start)
	case len(s.Items) > 0:
		s.CurrentState = string(workflow.Complete)
		s.FeatureID = str(s.Items[len(s.Items)-1].ID)
	default:
		s.CurrentState = string(workflow.Start)
	}
	if n := len(s.TransitionHistory); n > 0 {
		last := s.TransitionHistory[n-1]
		s.PreviousState, s.Timestamp = str(string(last.From)), &last.At
		if s.CurrentState == string(workflow.Complete) {
			s.PreviousState = str(string(last.To))
		}
	}
	if role, _ := workflow.Stage(workflow.State(s.CurrentState)); role != "" {
		s.NextAgent = str(w.Role(role))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func usage(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }
