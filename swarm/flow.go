package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/workflow"
)

// flow is the workflow engine (DESIGN §9.3): seed 000's coordinator and
// seed 001's orchestrator as code. It is level-based like recovery: each
// look reads the items and the protocol messages about them (the levels),
// decides the one next step each item's state calls for as a pure function
// (flow_decide.go: send a dispatch or a review request, count a verdict,
// lock, run CI, notify a stage's agent), and applies it (flow_apply.go). A
// crash between steps only means the next look does the step. Routing,
// counting, locking and timing cost no model tokens.
//
// It also gates dev-qa's sessions (flow_gate.go): one agent of a dev-qa
// workflow runs at a time (slots), and an agent whose stage it is not
// waits.
type flow struct {
	d    flowDeps
	kick chan struct{}

	mu    sync.Mutex
	slots map[string]string // dev-qa workflow -> the agent in a session
	ci    map[string]bool   // items whose CI runs now
	seen  map[string]string // dev-qa workflow -> its active item and state, last look
	wg    sync.WaitGroup    // CI runs
	runCI func(ctx context.Context, argv []string, dir string) (string, error)
}

// flowDeps is what the workflow engine needs of the supervisor.
type flowDeps struct {
	Store     mailbox.Store
	Poster    *mailbox.Poster
	Protocol  *Protocol
	Raise     func(context.Context, escalation.Draft) // logged, never fatal
	Emit      func(lifecycle.Notice)
	Clock     Clock
	Log       *slog.Logger
	Workflows []config.Workflow
	AfterQA   bool        // [merge] after_qa
	Git       WorkflowGit // nil when the worktrees are not git's (tests)
	Queue     QueueGit    // nil without a merge queue's git
	// Local reports whether this supervisor runs agent, and Wake pokes
	// its runner when it does.
	Local      func(agent string) bool
	Wake       func(agent string)
	PokeMerges func()
}

func newFlow(d flowDeps) *flow {
	return &flow{d: d, kick: make(chan struct{}, 1), slots: map[string]string{}, ci: map[string]bool{}, seen: map[string]string{}, runCI: runCI}
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
	if len(f.d.Workflows) == 0 {
		return nil
	}
	defer f.wg.Wait()
	t := f.d.Clock.NewTimer(flowPoll)
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
	for _, w := range f.d.Workflows {
		items, err := f.d.Store.Items(ctx, w.Name)
		if err != nil {
			if ctx.Err() == nil {
				f.d.Log.Warn("read work items", "workflow", w.Name, "err", err)
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
					f.d.Log.Warn("workflow step", "workflow", w.Name, "item", it.ID, "state", string(it.State), "err", err)
				}
			}
		case workflow.DevQA:
			if err := f.qa(ctx, w, items); err != nil && ctx.Err() == nil {
				f.d.Log.Warn("workflow step", "workflow", w.Name, "err", err)
			}
		}
	}
}

// review does the next step of a dev-review item: read, decide, apply.
func (f *flow) review(ctx context.Context, w config.Workflow, it workflow.Item) error {
	lv, err := f.readReview(ctx, w, it)
	if err != nil {
		return err
	}
	acts, err := decideReview(w, it, lv)
	if err != nil {
		return err
	}
	return f.apply(ctx, w, it, acts)
}

// qa does the next step of a dev-qa workflow: the oldest waiting item
// begins when none is active, and the active item's stage agent is told
// when its turn comes.
func (f *flow) qa(ctx context.Context, w config.Workflow, items []workflow.Item) error {
	f.mu.Lock()
	seen := f.seen[w.Name]
	f.mu.Unlock()
	for _, st := range decideQA(w, f.d.AfterQA, items, seen) {
		if err := f.apply(ctx, w, st.Item, st.Acts); err != nil {
			return err
		}
	}
	return nil
}

// move applies one item transition and then edit to the row, in one
// transaction, from the state the item is in now.
func (f *flow) move(ctx context.Context, it workflow.Item, ev workflow.Event, to workflow.State, cause, by string, edit func(*workflow.Item)) (workflow.Item, error) {
	var out workflow.Item
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	err := f.d.Store.InTx(bctx, func(tx mailbox.Tx) error {
		cur, err := tx.Item(it.ID)
		if err != nil {
			return err
		}
		if cur.State != it.State {
			return fmt.Errorf("item %s is %s now, not %s: %w", it.ID, cur.State, it.State, mailbox.ErrStateConflict)
		}
		if _, err := fsm.ApplyBy(tx, cur.Kind.Table(), fsm.SubjectItem, cur.ID, cur.State, ev, to, text.Truncate(cause, 500), by); err != nil {
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
		f.d.Emit(itemNotice(f.d.Clock.Now(), out, it.State, cause))
	}
	return out, err
}

// edit writes an item's bookkeeping, keeping its state.
func (f *flow) edit(ctx context.Context, id string, state workflow.State, fn func(*workflow.Item)) error {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	return f.d.Store.InTx(bctx, func(tx mailbox.Tx) error {
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

// send sends a protocol message from the runtime.
func (f *flow) send(ctx context.Context, t protocol.Type, to, task string, payload any, refs []string) (message.Message, protocol.Envelope, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return message.Message{}, protocol.Envelope{}, err
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	return f.d.Protocol.Send(bctx, SendRequest{Draft: protocol.Draft{Type: t, From: message.Swarm, To: to, TaskID: task, Payload: body, ContextRef: refs}, Caller: identity.Runtime()})
}

// wakeMembers wakes the agents of a workflow: the gate may have opened.
func (f *flow) wakeMembers(w config.Workflow) {
	for _, a := range w.Members() {
		f.d.Wake(a)
	}
}

// itemNotice is an item's transition as a notice for the live view.
func itemNotice(at time.Time, it workflow.Item, from workflow.State, cause string) lifecycle.Notice {
	return lifecycle.Notice{At: at, Kind: lifecycle.NoticeInfo,
		Text: fmt.Sprintf("workflow %s: item %s %s → %s (%s)", it.Workflow, it.ID, from, it.State, text.Truncate(cause, 120))}
}
