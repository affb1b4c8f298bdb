package swarm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"log/slog"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// This file enforces ACK deadlines (DESIGN §9.2). The deadline of a
// protocol message that asks for an ACK is stored when the message is
// first delivered into a session of its recipient (Tx.Deliver). The
// ack-deadlines service sleeps until the earliest stored deadline, and a
// delivery that stores a new one wakes it, so it acts within
// milliseconds of a deadline. It reads the store, never memory: after a
// crash or a restart it finds the deadlines that passed meanwhile at once.
//
// What a missed deadline does depends on the message's type:
//   - task_dispatch: a critical ack_timeout escalation that holds the
//     recipient. Resume queues the same message again with a fresh
//     deadline to come; abort cancels it (delivery done, ACK cancelled).
//   - review_request: a warning, and a reminder from swarm to the
//     reviewer; the request keeps waiting for its (late) ACK.
//   - ping: no escalation; the team launch handles a missed ping through
//     Options.PingTimeout.
//   - any other type sent with --ack-timeout: a warning.
//
// The message's ACK becomes overdue after the escalation is raised, so a
// crash between the two raises it again on restart, where its dedupe key
// only counts it: one escalation per missed deadline.

// ackRecheck bounds the service's sleep when no deadline is stored: a
// safety net, since every delivery that stores one wakes it.
const ackRecheck = time.Minute

// ackRetry is the pause after a failure (the database busy, a raise
// refused), so a persistent problem does not spin.
const ackRetry = time.Second

// ackSweepPage is how many overdue ACKs one look handles.
const ackSweepPage = 100

// ackDeadlines is the supervisor's ack-deadlines service.
type ackDeadlines struct {
	d    ackDeps
	kick chan struct{}
}

// ackDeps is what the ack-deadlines service needs of the supervisor.
type ackDeps struct {
	Store  mailbox.Store
	Poster *mailbox.Poster
	Raise  func(context.Context, escalation.Draft) (escalation.Escalation, bool, error)
	// PingTimeout is told of a ping past its deadline
	// (Options.PingTimeout); nil logs it.
	PingTimeout func(ctx context.Context, m message.Message)
	Clock       Clock
	Log         *slog.Logger
}

func newAckDeadlines(d ackDeps) *ackDeadlines {
	return &ackDeadlines{d: d, kick: make(chan struct{}, 1)}
}

// poke tells the service a deadline was stored: it looks again now.
func (a *ackDeadlines) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// stored pokes the service when mail just delivered started an ACK clock.
func (a *ackDeadlines) stored(delivered []message.Message) {
	for _, m := range delivered {
		if m.NeedsAck() {
			a.poke()
			return
		}
	}
}

// run is the service: sweep, then sleep until the next deadline or a poke.
func (a *ackDeadlines) run(ctx context.Context) error {
	timer := a.d.Clock.NewTimer(ackRecheck)
	defer timer.Stop()
	for {
		timer.Reset(a.sweep(ctx))
		select {
		case <-ctx.Done():
			return nil
		case <-a.kick:
		case <-timer.C:
		}
	}
}

// sweep handles every pending ACK past its deadline and returns how long
// to sleep: until the next deadline, at most ackRecheck.
func (a *ackDeadlines) sweep(ctx context.Context) time.Duration {
	s := a.d
	now := s.Clock.Now()
	due, err := s.Store.DueAcks(ctx, now, ackSweepPage)
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Warn("read ACK deadlines", "err", err)
		}
		return ackRetry
	}
	failed := false
	for _, m := range due {
		if err := a.missed(ctx, m, now); err != nil {
			if ctx.Err() != nil {
				return ackRetry
			}
			s.Log.Error("ACK deadline passed, and handling it failed; retrying", "msg_id", m.MsgID, "agent", m.To, "err", err)
			failed = true
		}
	}
	switch {
	case failed:
		return ackRetry
	case len(due) == ackSweepPage:
		return 0 // more are due
	}
	next, ok, err := s.Store.NextAckDeadline(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.Log.Warn("read the next ACK deadline", "err", err)
		}
		return ackRetry
	case !ok:
		return ackRecheck
	}
	return min(max(next.Sub(s.Clock.Now()), 0), ackRecheck)
}

// missed acts on one message whose ACK deadline passed, then marks its
// ACK overdue.
func (a *ackDeadlines) missed(ctx context.Context, m message.Message, now time.Time) error {
	s := a.d
	env, err := mailbox.Envelope(m)
	if err != nil {
		return err
	}
	switch env.Type {
	case protocol.TypePing:
		// The team launch relaunches and pings again; it raises its own
		// protocol_breach when that fails too.
		if s.PingTimeout != nil {
			s.PingTimeout(ctx, m)
		} else {
			s.Log.Info("a ping was not acknowledged in time", "msg_id", m.MsgID, "agent", m.To)
		}
	default:
		if _, _, err := s.Raise(ctx, AckTimeoutDraft(m, env)); err != nil {
			return err
		}
		if env.Type == protocol.TypeReviewRequest {
			if err := a.remind(ctx, m, now); err != nil {
				s.Log.Warn("remind the reviewer", "msg_id", m.MsgID, "agent", m.To, "err", err)
			}
		}
	}
	if _, err := s.Store.MarkAckOverdue(ctx, m.MsgID, now); err != nil {
		return err
	}
	return nil
}

// AckTimeoutDraft is the ack_timeout escalation of a message whose ACK
// deadline passed: about its recipient, with ref msg:<msg_id>. A dispatch's
// is critical and holds the recipient; any other's is a warning.
func AckTimeoutDraft(m message.Message, env protocol.Envelope) escalation.Draft {
	d := escalation.Draft{Kind: escalation.KindAckTimeout, Severity: escalation.Warning, Agent: m.To, Ref: escalation.MsgRef(m.MsgID)}
	if env.Type == protocol.TypeTaskDispatch {
		d.Severity, d.Hold = escalation.Critical, true
	}
	if message.Reserved(m.To) {
		d.Agent, d.Hold = "", false
	}
	what := "resume queues it again with a fresh deadline, abort cancels it"
	if !d.Hold {
		what = "it keeps waiting for the ACK"
	}
	d.Summary = fmt.Sprintf("%s did not acknowledge %s %s (task %s, from %s) within %s of its delivery; %s",
		m.To, env.Type, m.MsgID, env.TaskID, env.From, protocol.Age(env.AckTimeout()), what)
	facts := map[string]any{"msg_id": m.MsgID, "type": env.Type, "task_id": env.TaskID, "from": env.From, "to": env.To,
		"message": m.ID, "ack_timeout_sec": env.AckTimeoutSec}
	if m.Ack != nil && m.Ack.DueAt != nil {
		facts["due_at"] = m.Ack.DueAt.Format(time.RFC3339Nano)
	}
	if m.SessionSeq != nil {
		facts["session_seq"] = *m.SessionSeq
	}
	d.Details = details(facts)
	// One escalation per missed deadline, however often it is raised.
	d.DedupeKey = escalation.DefaultDedupeKey(escalation.KindAckTimeout, d.Agent, d.Ref, "")
	return d
}

// remind sends the reviewer a reminder from swarm, in the request's thread.
func (a *ackDeadlines) remind(ctx context.Context, m message.Message, now time.Time) error {
	late := ""
	if m.Ack != nil && m.Ack.DueAt != nil {
		late = fmt.Sprintf(" %s ago", protocol.Age(now.Sub(*m.Ack.DueAt)))
	}
	body := fmt.Sprintf("Reminder: review request #%d (%s, task %s, from %s) was due for your ACK%s. Acknowledge it now with `swarm ack %s`, then review the result against every criterion and answer with a review_verdict (`swarm send %s --type review_verdict --reply-to %s --payload ...`).",
		m.ID, m.MsgID, m.TaskID, m.From, late, m.MsgID, m.From, m.MsgID)
	_, err := a.d.Poster.Post(ctx, message.Draft{From: message.Swarm, To: m.To, Body: body, ReplyTo: m.ID})
	return err
}

// SettleAckDecision applies the operator's decision on an ack_timeout
// escalation to the message it is about (ref msg:<msg_id>), inside the
// transaction that records the decision: resume or approve queue the same
// message again (same id, same msg_id) with its ACK pending and a fresh
// deadline to start at its next delivery; abort or reject cancel it. A
// message acknowledged or pruned meanwhile is left alone. It returns the
// message it moved, if any.
func SettleAckDecision(tx mailbox.Tx, e escalation.Escalation) (*message.Message, error) {
	msgID, ok := escalation.MsgOf(e.RefText())
	if e.Kind != escalation.KindAckTimeout || e.Decision == nil || !ok {
		return nil, nil
	}
	var m message.Message
	var err error
	if e.Decision.Releases() {
		m, err = tx.RequeueAck(msgID)
	} else {
		m, err = tx.CancelAck(msgID)
	}
	if errors.Is(err, mailbox.ErrAckClosed) || errors.Is(err, mailbox.ErrNoSuchMessage) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("apply the decision on escalation %d to %s: %w", e.ID, msgID, err)
	}
	return &m, nil
}
