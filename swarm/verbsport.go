package swarm

import (
	"context"
	"fmt"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// Verbs are the verbs the supervisor runs for a door of its own, with
// that door's caller (DESIGN §13.1): a session's in-process engine tools
// (send_message, escalate, send_protocol, ack) and the operator's control
// socket (pause, resume, reload, stop). Package verbs implements them;
// swarm cannot import it (verbs imports swarm), so the binary gives them
// in Options.Verbs. Without them (the runtime's own tests) the primitives
// run as they are and check nothing: the rules are the verbs'.
type Verbs interface {
	// Send posts d from caller through p (verbs.Send).
	Send(ctx context.Context, c identity.Caller, p *mailbox.Poster, d message.Draft) (message.Message, error)
	// Escalate raises d as caller through raise (verbs.Escalate).
	Escalate(ctx context.Context, c identity.Caller, raise func(context.Context, escalation.Draft) (escalation.Escalation, bool, error), d escalation.Draft) (escalation.Escalation, bool, error)
	// SendProtocol sends req as caller through p (verbs.SendProtocol).
	SendProtocol(ctx context.Context, c identity.Caller, p *Protocol, req SendRequest) (message.Message, protocol.Envelope, error)
	// Ack acknowledges ref as caller, or every message awaiting its ACK
	// with all (verbs.Ack, verbs.AckAll).
	Ack(ctx context.Context, c identity.Caller, p *Protocol, ref string, all bool) ([]message.Message, error)
	// Pause, Resume, Reload and Stop are the runtime's verbs (verbs.Pause,
	// ...) run on rt, the supervisor.
	Pause(ctx context.Context, c identity.Caller, rt Runtime, agent string) (string, error)
	Resume(ctx context.Context, c identity.Caller, rt Runtime, agent string) (string, error)
	Reload(ctx context.Context, c identity.Caller, rt Runtime) (ReloadReport, error)
	Stop(ctx context.Context, c identity.Caller, stop func()) error
	// Call runs one verb with its typed request as a session's door's
	// caller (control.OpCall, what `swarm mcp`'s tools send); an error is
	// a verb it does not know, refused by name.
	Call(ctx context.Context, c identity.Caller, req control.CallRequest) (control.RunResult, error)
}

// Runtime is what the runtime's verbs ask of the supervisor.
type Runtime interface {
	Pause(ctx context.Context, agent string) (string, error)
	Resume(ctx context.Context, agent string) (string, error)
	Reload(ctx context.Context) (ReloadReport, error)
}

var _ Runtime = (*Supervisor)(nil)

// primitives is Verbs without a rule of their own: the default for a
// supervisor built without Options.Verbs.
type primitives struct{}

func (primitives) Send(ctx context.Context, _ identity.Caller, p *mailbox.Poster, d message.Draft) (message.Message, error) {
	return p.Post(ctx, d)
}

func (primitives) Escalate(ctx context.Context, _ identity.Caller, raise func(context.Context, escalation.Draft) (escalation.Escalation, bool, error), d escalation.Draft) (escalation.Escalation, bool, error) {
	return raise(ctx, d)
}

func (primitives) SendProtocol(ctx context.Context, c identity.Caller, p *Protocol, req SendRequest) (message.Message, protocol.Envelope, error) {
	req.Caller = c
	return p.Send(ctx, req)
}

func (primitives) Ack(ctx context.Context, c identity.Caller, p *Protocol, ref string, all bool) ([]message.Message, error) {
	if all {
		return p.AckAll(ctx, c)
	}
	m, err := p.Ack(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	return []message.Message{m}, nil
}

func (primitives) Pause(ctx context.Context, _ identity.Caller, rt Runtime, agent string) (string, error) {
	return rt.Pause(ctx, agent)
}

func (primitives) Resume(ctx context.Context, _ identity.Caller, rt Runtime, agent string) (string, error) {
	return rt.Resume(ctx, agent)
}

func (primitives) Reload(ctx context.Context, _ identity.Caller, rt Runtime) (ReloadReport, error) {
	return rt.Reload(ctx)
}

func (primitives) Call(_ context.Context, _ identity.Caller, req control.CallRequest) (control.RunResult, error) {
	return control.RunResult{}, fmt.Errorf("unknown verb %q: this supervisor runs no verbs for its sessions' doors", req.Verb)
}

func (primitives) Stop(_ context.Context, _ identity.Caller, stop func()) error {
	stop()
	return nil
}
