package verbs

import (
	"context"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/swarm"
)

// SpawnRequest is `swarm spawn`'s input.
type SpawnRequest = swarm.SpawnRequest

// RetireRequest is `swarm retire`'s input.
type RetireRequest = swarm.RetireRequest

// RetireResult is what `swarm retire --json` prints.
type RetireResult = swarm.RetireResult

// Spawn is the spawn verb: caller (the operator, or a session with
// can_spawn_sessions) stores a spawned agent and mails it its task; the
// door then asks the runtime to start it.
func Spawn(ctx context.Context, c identity.Caller, cfg *config.Config, st mailbox.Store, poster *mailbox.Poster, req SpawnRequest, now time.Time) (mailbox.Spawned, message.Message, error) {
	if err := c.Require(mode.CanSpawnSessions, "swarm spawn"); err != nil {
		return mailbox.Spawned{}, message.Message{}, err
	}
	req.Caller = c
	return swarm.Spawn(ctx, cfg, st, poster, req, now)
}

// Retire is the retire verb, the operator's: a spawned agent is retired,
// its runner stopped by a running supervisor, its work kept, merged,
// squashed or discarded.
func Retire(ctx context.Context, c identity.Caller, req RetireRequest) (RetireResult, error) {
	if err := operatorOnly(c, "swarm retire"); err != nil {
		return RetireResult{Agent: req.Name}, err
	}
	return swarm.Retire(ctx, req)
}
