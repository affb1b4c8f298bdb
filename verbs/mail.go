package verbs

import (
	"context"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// The mail and escalation verbs (DESIGN §13.1): the rules of who may send
// what, checked with the caller the door established, before the one mail
// service stores anything.

// Send is the send verb: caller sends d (to d.To, or to every agent
// with all). d.From is the --from flag: the operator's to speak as another
// name; a session sends only as itself, and needs can_message
// (can_dispatch for a task).
func Send(ctx context.Context, c identity.Caller, p *mailbox.Poster, d message.Draft, all bool) ([]message.Message, error) {
	if err := checkMail(c, &d, "swarm send"); err != nil {
		return nil, err
	}
	if all {
		return p.Broadcast(ctx, d)
	}
	m, err := p.Post(ctx, d)
	if err != nil {
		return nil, err
	}
	return []message.Message{m}, nil
}

// Reply is the reply verb: caller answers message id with d.
func Reply(ctx context.Context, c identity.Caller, p *mailbox.Poster, id int64, d message.Draft) (message.Message, error) {
	if err := checkMail(c, &d, "swarm reply"); err != nil {
		return message.Message{}, err
	}
	return p.Reply(ctx, id, d)
}

// checkMail applies the mail rules to d and sets its sender.
func checkMail(c identity.Caller, d *message.Draft, what string) error {
	dispatch := ""
	if d.Kind == message.KindTask {
		dispatch = what + " --kind task (a dispatch)"
	}
	from, err := senderRules(c, d.From, what, dispatch)
	d.From = from
	return err
}

// senderRules are the rules of every sending verb (mail and protocol), in
// one place: --from only names the caller (the operator names anyone), a
// session needs can_message, and can_dispatch for a dispatch (dispatch
// names it; "" for none). It returns the sender.
func senderRules(c identity.Caller, from, what, dispatch string) (string, error) {
	from, err := c.Sender(from)
	if err != nil {
		return "", err
	}
	if err := c.Require(mode.CanMessage, what); err != nil {
		return "", err
	}
	if dispatch != "" {
		if err := c.Require(mode.CanDispatch, dispatch); err != nil {
			return "", err
		}
	}
	return from, nil
}

// Escalate is the escalate verb: caller raises d. A session needs
// can_escalate; its escalation is about its own agent unless it names a
// teammate, and it may hold only itself.
func Escalate(ctx context.Context, c identity.Caller, raise Raise, d escalation.Draft) (escalation.Escalation, bool, error) {
	if err := c.Require(mode.CanEscalate, "swarm escalate"); err != nil {
		return escalation.Escalation{}, false, err
	}
	if d.Agent == "" {
		d.Agent = c.Agent()
	}
	if d.Hold {
		if err := c.Hold(d.Agent); err != nil {
			return escalation.Escalation{}, false, err
		}
	}
	return raise(ctx, d)
}

// Raise stores (or counts) an escalation: swarm.Raise with the store in a
// CLI process, which then pokes the supervisor; Supervisor.Raise inside it.
type Raise = func(ctx context.Context, d escalation.Draft) (escalation.Escalation, bool, error)

// MarkRead is the mark-read verb: caller marks recipient's messages ids
// done. Only the operator marks the operator's mail read; an agent's mail
// becomes done when its session completes.
func MarkRead(ctx context.Context, c identity.Caller, st mailbox.Store, recipient string, ids []int64) (int64, error) {
	if err := c.MarkRead(recipient); err != nil {
		return 0, err
	}
	return st.MarkOperatorDone(ctx, ids)
}
