package main

import (
	"context"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// sessionVerbs are the verbs the supervisor's in-process engine tools
// call with their session's caller (swarm.Options.Verbs): package swarm
// cannot import verbs, so the binary wires them.
type sessionVerbs struct{}

var _ swarm.SessionVerbs = sessionVerbs{}

func (sessionVerbs) Send(ctx context.Context, c identity.Caller, p *mailbox.Poster, d message.Draft) (message.Message, error) {
	ms, err := verbs.Send(ctx, c, p, d, false)
	if err != nil {
		return message.Message{}, err
	}
	return ms[0], nil
}

func (sessionVerbs) Escalate(ctx context.Context, c identity.Caller, raise func(context.Context, escalation.Draft) (escalation.Escalation, bool, error), d escalation.Draft) (escalation.Escalation, bool, error) {
	return verbs.Escalate(ctx, c, raise, d)
}

func (sessionVerbs) SendProtocol(ctx context.Context, c identity.Caller, p *swarm.Protocol, req swarm.SendRequest) (message.Message, protocol.Envelope, error) {
	return verbs.SendProtocol(ctx, c, p, req)
}

func (sessionVerbs) Ack(ctx context.Context, c identity.Caller, p *swarm.Protocol, ref string, all bool) ([]message.Message, error) {
	if all {
		return verbs.AckAll(ctx, c, p)
	}
	m, err := verbs.Ack(ctx, c, p, ref)
	if err != nil {
		return nil, err
	}
	return []message.Message{m}, nil
}
