package swarm

import (
	"context"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// SessionVerbs are the verbs a session's in-process engine tools call
// (send_message, escalate, send_protocol, ack), with the session's caller,
// so the engines are a door like the others (DESIGN §13.1). Package verbs
// implements them; swarm cannot import it (verbs imports swarm), so the
// binary gives them in Options.Verbs. Nil (the runtime's tests) leaves the
// tools on the primitives, which hold the protocol's rules themselves.
type SessionVerbs interface {
	// Send posts d from caller through p (verbs.Send).
	Send(ctx context.Context, c identity.Caller, p *mailbox.Poster, d message.Draft) (message.Message, error)
	// Escalate raises d as caller through raise (verbs.Escalate).
	Escalate(ctx context.Context, c identity.Caller, raise func(context.Context, escalation.Draft) (escalation.Escalation, bool, error), d escalation.Draft) (escalation.Escalation, bool, error)
	// SendProtocol sends req as caller through p (verbs.SendProtocol).
	SendProtocol(ctx context.Context, c identity.Caller, p *Protocol, req SendRequest) (message.Message, protocol.Envelope, error)
	// Ack acknowledges ref as caller, or every message awaiting its ACK
	// with all (verbs.Ack, verbs.AckAll).
	Ack(ctx context.Context, c identity.Caller, p *Protocol, ref string, all bool) ([]message.Message, error)
}
