package verbs

import (
	"context"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/swarm"
)

// The protocol verbs (AMP/1.0): send, ack, log. The runtime sends its
// dispatches through the same swarm.Protocol as itself, so the rules of
// who may send what live with it (SendRequest's doc); these are the doors'
// way in, with the door's caller.

// SendRequest is a protocol message to send (`swarm send --type`).
type SendRequest = swarm.SendRequest

// SendProtocol is the protocol send verb: caller sends req.Draft. --from
// only names the caller (the operator names anyone); a session needs
// can_message (can_dispatch for a dispatch); a review_verdict only from
// the reviewer's current session, as a reply to the open request.
func SendProtocol(ctx context.Context, c identity.Caller, p *swarm.Protocol, req SendRequest) (message.Message, protocol.Envelope, error) {
	req.Caller = c
	return p.Send(ctx, req)
}

// Ack is the ack verb: caller acknowledges the protocol message ref (from
// its current session; can_message).
func Ack(ctx context.Context, c identity.Caller, p *swarm.Protocol, ref string) (message.Message, error) {
	return p.Ack(ctx, c, ref)
}

// AckAll acknowledges every protocol message awaiting caller's ACK.
func AckAll(ctx context.Context, c identity.Caller, p *swarm.Protocol) ([]message.Message, error) {
	return p.AckAll(ctx, c)
}

// ProtocolLog is `swarm protocol log`: a task's protocol messages, or the
// newest limit. A read any caller the door knows may make.
func ProtocolLog(ctx context.Context, c identity.Caller, p *swarm.Protocol, task string, limit int) ([]message.Message, error) {
	if !c.Known() {
		return nil, operatorOnly(c, "swarm protocol log")
	}
	return p.Log(ctx, task, limit)
}
