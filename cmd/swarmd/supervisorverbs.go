package main

import (
	"context"
	"fmt"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// supervisorVerbs are the verbs the supervisor runs for its own doors
// (swarm.Options.Verbs): the engines' in-process tools, with their
// session's caller, and the operator's control socket. Package swarm
// cannot import verbs, so the binary wires them. via runs the typed verb
// calls of the sessions' doors (nil: none).
type supervisorVerbs struct{ via *swarmCommands }

var _ swarm.Verbs = supervisorVerbs{}

func (supervisorVerbs) Send(ctx context.Context, c identity.Caller, p *mailbox.Poster, d message.Draft) (message.Message, error) {
	ms, err := verbs.Send(ctx, c, p, d, false)
	if err != nil {
		return message.Message{}, err
	}
	return ms[0], nil
}

func (supervisorVerbs) Escalate(ctx context.Context, c identity.Caller, raise func(context.Context, escalation.Draft) (escalation.Escalation, bool, error), d escalation.Draft) (escalation.Escalation, bool, error) {
	return verbs.Escalate(ctx, c, raise, d)
}

func (supervisorVerbs) SendProtocol(ctx context.Context, c identity.Caller, p *swarm.Protocol, req swarm.SendRequest) (message.Message, protocol.Envelope, error) {
	return verbs.SendProtocol(ctx, c, p, req)
}

func (supervisorVerbs) Ack(ctx context.Context, c identity.Caller, p *swarm.Protocol, ref string, all bool) ([]message.Message, error) {
	if all {
		return verbs.AckAll(ctx, c, p)
	}
	m, err := verbs.Ack(ctx, c, p, ref)
	if err != nil {
		return nil, err
	}
	return []message.Message{m}, nil
}

func (supervisorVerbs) Pause(ctx context.Context, c identity.Caller, rt swarm.Runtime, agent string) (string, error) {
	return verbs.Pause(ctx, c, rt, agent)
}

func (supervisorVerbs) Resume(ctx context.Context, c identity.Caller, rt swarm.Runtime, agent string) (string, error) {
	return verbs.Resume(ctx, c, rt, agent)
}

func (supervisorVerbs) Reload(ctx context.Context, c identity.Caller, rt swarm.Runtime) (swarm.ReloadReport, error) {
	return verbs.Reload(ctx, c, rt)
}

func (supervisorVerbs) Stop(ctx context.Context, c identity.Caller, stop func()) error {
	return verbs.Stop(ctx, c, stop)
}

// Call runs a verb a session's door was called with (control.OpCall), as
// that session: `swarm mcp`'s tools.
func (v supervisorVerbs) Call(ctx context.Context, c identity.Caller, req control.CallRequest) (control.RunResult, error) {
	if v.via == nil {
		return control.RunResult{}, fmt.Errorf("unknown verb %q: this supervisor runs no verbs for its sessions' doors", req.Verb)
	}
	return v.via.call(ctx, c, req)
}
