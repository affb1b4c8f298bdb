package verbs

import (
	"context"
	"errors"
	"fmt"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/swarm"
)

// Decide is the decide verb (ack, resume, abort, approve, reject): the
// operator decides any escalation; a session only acks one about its own
// agent (an escalation's agent never changes, so it is read first).
func Decide(ctx context.Context, c identity.Caller, st mailbox.Store, id int64, action escalation.Event, note string) (escalation.Escalation, error) {
	if c.IsSession() || !c.Known() {
		if action != escalation.Ack {
			if err := c.OperatorOnly(fmt.Sprintf("swarm escalation %s %d", action, id)); err != nil {
				return escalation.Escalation{}, err
			}
		}
		e, err := st.Escalation(ctx, id)
		if errors.Is(err, mailbox.ErrNoSuchEscalation) {
			return e, fmt.Errorf("no escalation %d: 'swarm escalations --all' lists them", id)
		}
		if err != nil {
			return e, err
		}
		if err := c.ForAgent(e.AgentName(), fmt.Sprintf("swarm escalation ack %d", id)); err != nil {
			return e, err
		}
		if e.AgentName() == "" {
			if err := c.OperatorOnly(fmt.Sprintf("swarm escalation ack %d (about no agent)", id)); err != nil {
				return e, err
			}
		}
	}
	return swarm.Decide(ctx, st, c, id, action, note)
}
