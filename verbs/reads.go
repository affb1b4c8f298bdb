package verbs

import (
	"context"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/team"
)

// Reads any caller the door knows may make: nobody (the zero Caller) is
// refused, as by every verb.

// PreviewRequest is `swarm prompt <agent>`.
type PreviewRequest = swarm.PreviewRequest

// Preview is the prompt verb: the prompt the agent's next session would
// get, built from the store without starting it.
func Preview(ctx context.Context, c identity.Caller, req PreviewRequest) (promptpipe.Prompt, error) {
	if !c.Known() {
		return promptpipe.Prompt{}, operatorOnly(c, "swarm prompt")
	}
	return swarm.Preview(ctx, req)
}

// Team is the team verb: the team launch's record (ok false without a
// [team]).
func Team(ctx context.Context, c identity.Caller, cfg *config.Config, st mailbox.Store) (team.Record, bool, error) {
	if !c.Known() {
		return team.Record{}, false, operatorOnly(c, "swarm team")
	}
	return swarm.TeamRecord(ctx, cfg, st)
}
