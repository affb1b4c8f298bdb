package main

import (
	"context"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/repo"
)

// poke wakes a running supervisor after a write. It is best effort: with no
// supervisor the mail waits in the database, and a supervisor that misses
// the poke finds the mail at its next data_version poll.
func (a *App) poke(_ context.Context, l repo.Layout) { control.Poke(l) }
