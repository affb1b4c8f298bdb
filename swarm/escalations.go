package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
)

// This file is the operator's desk (DESIGN §9.1): Raise and Decide, the one
// way every trigger raises an escalation and every decision resolves one,
// whether a supervisor runs or not; and the desk service, which turns what
// changed into notices, holds and releases, and notifications.

// HeldError is the cancellation cause of a session interrupted because a
// holding escalation opened about its agent.
type HeldError struct{ Escalation int64 }

func (e *HeldError) Error() string { return fmt.Sprintf("held: escalation %d", e.Escalation) }

// Raise stores an escalation, or counts its unresolved twin (same dedupe
// key, open or acked): created is false then, and nobody is notified
// again. The raise is the escalation's first event. It works with or
// without a supervisor; a running one learns of it from a poke
// (control.OpEscalation) or from its change feed, and applies the hold.
func Raise(ctx context.Context, st mailbox.Store, d escalation.Draft) (esc escalation.Escalation, created bool, err error) {
	d = d.Normalize()
	if err := d.Validate(); err != nil {
		return esc, false, err
	}
	err = st.InTx(ctx, func(tx mailbox.Tx) error {
		twin, ok, err := tx.UnresolvedTwin(d.DedupeKey)
		if err != nil {
			return err
		}
		if ok {
			esc, err = tx.CountEscalation(twin.ID)
			return err
		}
		if esc, err = tx.InsertEscalation(d); err != nil {
			return err
		}
		created = true
		_, err = fsm.Apply(tx, escalation.Table, fsm.SubjectEscalation, escalation.Subject(esc.ID), "", escalation.Raise, escalation.Open, raiseCause(esc), 0)
		return err
	})
	if err != nil {
		return escalation.Escalation{}, false, fmt.Errorf("raise escalation: %w", err)
	}
	return esc, created, nil
}

func raiseCause(e escalation.Escalation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "raised: %s %s", e.Severity, e.Kind)
	if e.Holds() {
		fmt.Fprintf(&b, ", holds %s", e.AgentName())
	}
	fmt.Fprintf(&b, ": %s", e.Summary)
	return text.Truncate(b.String(), 300)
}

// Actions the operator takes on an escalation: ack, or one of the
// decisions.
var Actions = []escalation.Event{escalation.Ack, escalation.Event(escalation.Resume), escalation.Event(escalation.Abort),
	escalation.Event(escalation.Approve), escalation.Event(escalation.Reject)}

// ErrDecided means the escalation is resolved already, or acked already
// for an ack: there is nothing left to do.
var ErrDecided = errors.New("nothing to decide")

// Decide acks (action escalation.Ack) or resolves escalation id with a
// decision and the operator's note, as one event. A running supervisor
// learns of it from a poke or its change feed and releases the hold; with
// none running, the next `swarm up` finds the hold gone. Who may decide
// is verbs.Decide's rule; caller is who the event names.
func Decide(ctx context.Context, st mailbox.Store, caller identity.Caller, id int64, action escalation.Event, note string) (escalation.Escalation, error) {
	note = strings.TrimSpace(note)
	if len(note) > escalation.MaxNote {
		return escalation.Escalation{}, fmt.Errorf("the note is %d bytes, more than %d: say the rest in a message ('swarm send')", len(note), escalation.MaxNote)
	}
	decision := escalation.Decision("")
	to := escalation.Resolved
	switch {
	case action == escalation.Ack:
		to = escalation.Acked
	case escalation.Decision(action).Valid():
		decision = escalation.Decision(action)
	default:
		return escalation.Escalation{}, fmt.Errorf("unknown action %q (valid: ack, resume, abort, approve, reject)", action)
	}
	var out escalation.Escalation
	err := st.InTx(ctx, func(tx mailbox.Tx) error {
		e, err := tx.Escalation(id)
		if err != nil {
			return err
		}
		switch {
		case e.State == escalation.Resolved:
			return fmt.Errorf("escalation %d was resolved already (%s): %w", id, *e.Decision, ErrDecided)
		case e.State == escalation.Acked && action == escalation.Ack:
			return fmt.Errorf("escalation %d is acked already: %w; resolve it with resume, abort, approve or reject", id, ErrDecided)
		}
		cause := fmt.Sprintf("%s by %s", action, caller.By())
		if note != "" {
			cause += ": " + note
		}
		if _, err := fsm.Apply(tx, escalation.Table, fsm.SubjectEscalation, escalation.Subject(id), e.State, action, to, text.Truncate(cause, 300), 0); err != nil {
			return err
		}
		if note != "" || decision != "" {
			if err := tx.SetDecision(id, decision, note); err != nil {
				return err
			}
		}
		if out, err = tx.Escalation(id); err != nil {
			return err
		}
		// A decision on an ack_timeout moves its message (DESIGN §9.2).
		_, err = SettleAckDecision(tx, out)
		return err
	})
	if errors.Is(err, mailbox.ErrNoSuchEscalation) {
		return out, fmt.Errorf("no escalation %d: 'swarm escalations --all' lists them", id)
	}
	return out, err
}

// Raise raises an escalation in the supervisor: stored (or counted), then
// held, announced and notified at once.
func (s *Supervisor) Raise(ctx context.Context, d escalation.Draft) (escalation.Escalation, bool, error) {
	e, created, err := Raise(ctx, s.store, d)
	if err != nil {
		return e, created, err
	}
	s.EscalationChanged()
	if r, ok := s.lookup(e.AgentName()); ok {
		r.escalated()
	}
	return e, created, nil
}

// Decide acks or resolves an escalation from inside the supervisor (the
// live view), releasing a hold at once.
func (s *Supervisor) Decide(ctx context.Context, id int64, action escalation.Event, note string) (escalation.Escalation, error) {
	e, err := Decide(ctx, s.store, identity.Operator(), id, action, note)
	if err != nil {
		return e, err
	}
	s.EscalationChanged()
	return e, nil
}

// EscalationChanged tells the desk that an escalation was raised or
// decided, here or by another process: it looks now rather than at its
// next poll.
func (s *Supervisor) EscalationChanged() {
	s.desk.poke()
	s.flow.poke() // a decision may unlock a work item
}

// raise is a trigger inside the supervisor: failures are logged, never
// fatal to the agent that tripped it.
func (s *Supervisor) raise(ctx context.Context, d escalation.Draft) {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	if _, _, err := s.Raise(bctx, d); err != nil {
		s.log.Error("raise escalation", "kind", d.Kind, "agent", d.Agent, "err", err)
	}
}

// details turns facts into an escalation's details object.
func details(kv map[string]any) json.RawMessage {
	b, err := json.Marshal(kv)
	if err != nil {
		return nil
	}
	return b
}

// escalator is the engine's way to escalate as the agent.
type escalator struct {
	raise  func(context.Context, escalation.Draft) (escalation.Escalation, bool, error) // Supervisor.Raise
	agent  string
	caller identity.Caller // the running session
	verbs  Verbs
}

func (e escalator) Escalate(ctx context.Context, r engine.EscalationRequest) (engine.EscalationResult, error) {
	d := escalation.Draft{Kind: escalation.KindAgent, Severity: escalation.Severity(r.Severity), Hold: r.Hold, Agent: e.agent,
		Ref: r.Ref, Summary: r.Summary, Details: r.Details}
	if r.Approval {
		d.Kind = escalation.KindApproval
	}
	esc, created, err := e.verbs.Escalate(ctx, e.caller, e.raise, d)
	if err != nil {
		return engine.EscalationResult{}, err
	}
	return engine.EscalationResult{ID: esc.ID, Count: esc.Count, Created: created, Hold: esc.Holds()}, nil
}

// desk is the supervisor's escalation service: it follows the escalation
// events (raised here or by any other process), announces each as a
// notice, wakes the runner of the agent it is about (which applies or
// releases a hold itself, from the level in the store), and drives the
// notifier.
type desk struct {
	d        deskDeps
	kick     chan struct{}
	last     int64 // the newest escalation event already handled
	notifier *notifier
}

// deskDeps is what the desk needs of the supervisor.
type deskDeps struct {
	Store  mailbox.Store
	Clock  Clock
	Log    *slog.Logger
	Notify config.Notify // [notify] at start; reload swaps the notifier's
	Root   string        // the repository, where notify commands run
	Emit   func(lifecycle.Notice)
	// Escalated tells the runner of agent, if this supervisor runs it,
	// that an escalation about it changed.
	Escalated func(agent string)
	PokeTeam  func() // the team launch's fallback may be decided
}

func newDesk(dd deskDeps) *desk {
	d := &desk{d: dd, kick: make(chan struct{}, 1)}
	if dd.Notify.Enabled() {
		d.notifier = newNotifier(dd.Notify, dd.Root, dd.Store, dd.Clock, dd.Log, d.poke)
	}
	return d
}

// notifyConfig is the [notify] table the desk sends by.
func (d *desk) notifyConfig() config.Notify {
	if d.notifier == nil {
		return d.d.Notify
	}
	return d.notifier.config()
}

func (d *desk) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// start skips the events of earlier runs: they are not news. Open holds
// were applied by the runners' own checks at start-up.
func (d *desk) start(ctx context.Context) error {
	evs, err := d.d.Store.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectEscalation, Limit: 1})
	if err != nil {
		return err
	}
	if len(evs) > 0 {
		d.last = evs[len(evs)-1].ID
	}
	return nil
}

// run is the desk service.
func (d *desk) run(ctx context.Context) error {
	var sending chan struct{}
	if d.notifier != nil {
		sending = make(chan struct{})
		go func() { defer close(sending); d.notifier.send(ctx) }()
	}
	// The timer wakes the desk when a reminder (or a retry) is due; a
	// stale one only causes a look that finds nothing to do.
	timer := d.d.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.follow(ctx)
		if d.notifier != nil {
			if next, ok := d.notifier.scan(ctx); ok {
				timer.Reset(max(next.Sub(d.d.Clock.Now()), 0))
			}
		}
		select {
		case <-ctx.Done():
			if sending != nil {
				<-sending
			}
			return nil
		case <-d.kick:
		case <-timer.C:
		}
	}
}

// follow handles the escalation events since the last look.
func (d *desk) follow(ctx context.Context) {
	evs, err := d.d.Store.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectEscalation, SinceID: d.last})
	if err != nil {
		if ctx.Err() == nil {
			d.d.Log.Warn("read escalation events", "err", err)
		}
		return
	}
	if len(evs) > 0 {
		d.d.PokeTeam() // the team launch's fallback may be decided
	}
	for _, ev := range evs {
		d.last = ev.ID
		d.d.Escalated(ev.AgentName())
		n := lifecycle.Notice{At: ev.At, Agent: ev.AgentName(), Kind: lifecycle.NoticeEscalation, Cause: ev.Cause}
		var id int64
		fmt.Sscan(ev.Subject, &id)
		if e, err := d.d.Store.Escalation(ctx, id); err == nil {
			n.Escalation = &e
			n.Text = escalationLine(e, escalation.State(ev.To))
		} else {
			n.Text = fmt.Sprintf("escalation %s %s", ev.Subject, ev.To)
		}
		d.d.Emit(n)
	}
}

// escalationLine is an escalation's one-line notice for state to.
func escalationLine(e escalation.Escalation, to escalation.State) string {
	what := map[escalation.State]string{escalation.Open: "opened", escalation.Acked: "acked", escalation.Resolved: "resolved"}[to]
	if to == escalation.Resolved {
		what = "resolved by swarm" // its cause is gone (escalation.Clear)
		if e.Decision != nil {
			what = "resolved: " + string(*e.Decision)
		}
	}
	hold := ""
	if e.Hold && to == escalation.Open && e.Agent != nil {
		hold = ", holds " + *e.Agent
	}
	return fmt.Sprintf("escalation %d %s (%s %s%s): %s", e.ID, what, e.Severity, e.Kind, hold, text.Truncate(e.Summary, 120))
}
