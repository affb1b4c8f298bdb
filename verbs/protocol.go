package verbs

import (
	"context"
	"errors"
	"fmt"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/workflow"
)

// The protocol verbs (AMP/1.0): send, ack, log. Each checks who may do it
// here, once, then calls swarm.Protocol's rule-free primitives, which the
// runtime's own dispatches (from swarm) use directly.

// SendRequest is a protocol message to send (`swarm send --type`).
type SendRequest = swarm.SendRequest

// StaleSessionError refuses an ack, a task_result or a verdict from a
// session that is not its agent's current one.
type StaleSessionError = swarm.StaleSessionError

// SendProtocol is the protocol send verb: caller sends req.Draft. --from
// only names the caller (the operator names anyone); a session needs
// can_message (can_dispatch for a dispatch); a review_verdict only from
// the reviewer's current session, as a reply to the open request; an ack
// or a task_result from an agent only from its current session.
func SendProtocol(ctx context.Context, c identity.Caller, p *swarm.Protocol, req SendRequest) (message.Message, protocol.Envelope, error) {
	d := req.Draft
	dispatch := ""
	if d.Type == protocol.TypeTaskDispatch {
		dispatch = "swarm send --type task_dispatch (a dispatch)"
	}
	from, err := senderRules(c, d.From, "swarm send --type "+string(d.Type), dispatch)
	if err != nil {
		return message.Message{}, protocol.Envelope{}, err
	}
	d.From = from
	req.Draft, req.Caller = d, c
	switch d.Type {
	case protocol.TypeReviewVerdict, protocol.TypeTaskResult, protocol.TypeAck:
	default:
		return p.Send(ctx, req)
	}
	// The rules below read what the message answers (its task).
	var answered protocol.Envelope
	if req.ReplyTo != "" {
		if answered, err = p.Envelope(ctx, req.ReplyTo); err != nil {
			return message.Message{}, protocol.Envelope{}, err
		}
		if err := d.ReplyTo(answered); err != nil {
			return message.Message{}, protocol.Envelope{}, err
		}
	}
	if d.Type == protocol.TypeReviewVerdict {
		if err := checkVerdict(ctx, c, p, d, req.ReplyTo != "", answered); err != nil {
			return message.Message{}, protocol.Envelope{}, err
		}
	} else {
		what := "send a task_result"
		if d.Type == protocol.TypeAck {
			what = "acknowledge"
		}
		if err := p.CheckSession(ctx, d.From, c.SessionID(), what); err != nil {
			return message.Message{}, protocol.Envelope{}, err
		}
	}
	return p.Send(ctx, req)
}

// checkVerdict is the rule of a workflow item's review_verdict: only the
// reviewer the open review request went to, from its current session, as
// a reply to that request. Anyone else (the dev with or without --from,
// the operator, a leftover of an earlier session) is refused and nothing
// is stored. A verdict about anything but a work item is not checked here.
func checkVerdict(ctx context.Context, c identity.Caller, p *swarm.Protocol, d protocol.Draft, replied bool, answered protocol.Envelope) error {
	it, err := p.Store.Item(ctx, d.TaskID)
	switch {
	case errors.Is(err, mailbox.ErrNoSuchItem):
		return nil
	case err != nil:
		return fmt.Errorf("read work item %s: %w", d.TaskID, err)
	}
	refuse := func(why, hint string) error {
		return &identity.Refusal{Rule: identity.RuleVerdict, Caller: c, What: "a review_verdict for item " + it.ID, Why: why, Hint: hint}
	}
	if it.State != workflow.InReview || it.Request == "" {
		return refuse(fmt.Sprintf("the item is %s, with no review open", it.State), "'swarm workflow status' shows where it is")
	}
	reqMsg, err := p.Store.ProtocolMessage(ctx, it.Request)
	if err != nil {
		return fmt.Errorf("read the review request %s of item %s: %w", it.Request, it.ID, err)
	}
	reviewer := reqMsg.To
	if !c.IsSession() || c.Agent() != reviewer {
		return refuse("only the reviewer the request went to ("+reviewer+") gives this item's verdict, from its own session", "")
	}
	if !replied || answered.MsgID != it.Request {
		return refuse("a verdict answers the open review request", "send it with --reply-to "+it.Request)
	}
	return p.CheckSession(ctx, reviewer, c.SessionID(), "give the verdict of item "+it.ID)
}

// Ack is the ack verb: caller acknowledges the protocol message ref, from
// its current session, with can_message.
func Ack(ctx context.Context, c identity.Caller, p *swarm.Protocol, ref string) (message.Message, error) {
	if err := ackRule(c); err != nil {
		return message.Message{}, err
	}
	// What is owed first: "not delivered yet" says more than "no session".
	env, err := p.Owed(ctx, c, ref)
	if err != nil {
		return message.Message{}, err
	}
	if err := p.CheckSession(ctx, c.Name(), c.SessionID(), "acknowledge"); err != nil {
		return message.Message{}, err
	}
	return p.AckEnvelope(ctx, c, env)
}

// AckAll acknowledges every protocol message awaiting caller's ACK (the
// rules of Ack).
func AckAll(ctx context.Context, c identity.Caller, p *swarm.Protocol) ([]message.Message, error) {
	if err := ackRule(c); err != nil {
		return nil, err
	}
	// A leftover of an earlier session cannot act for the new one.
	if err := p.CheckSession(ctx, c.Name(), c.SessionID(), "acknowledge"); err != nil {
		return nil, err
	}
	return p.AckAll(ctx, c)
}

// ackRule is the ack verbs' capability: can_message.
func ackRule(c identity.Caller) error { return c.Require(mode.CanMessage, "swarm ack") }

// ProtocolLog is `swarm protocol log`: a task's protocol messages, or the
// newest limit. A read any caller the door knows may make.
func ProtocolLog(ctx context.Context, c identity.Caller, p *swarm.Protocol, task string, limit int) ([]message.Message, error) {
	if !c.Known() {
		return nil, operatorOnly(c, "swarm protocol log")
	}
	return p.Log(ctx, task, limit)
}
