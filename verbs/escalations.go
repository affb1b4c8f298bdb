package verbs

import (
	"context"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/swarm"
)

// Decide is the decide verb (ack, resume, abort, approve, reject): the
// operator decides any escalation; a session only acks one about its own
// agent.
func Decide(ctx context.Context, c identity.Caller, st mailbox.Store, id int64, action escalation.Event, note string) (escalation.Escalation, error) {
	return swarm.Decide(ctx, st, c, id, action, note)
}
