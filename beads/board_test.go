package beads_test

import (
	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/engine"
)

// The agents' task tools reach beads through engine.TaskBoard.
var _ engine.TaskBoard = (*beads.Client)(nil)
