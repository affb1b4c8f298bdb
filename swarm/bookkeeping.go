package swarm

import (
	"context"
	"time"
)

// bookkeepingTimeout bounds one bookkeeping write (a variable so a test
// can shorten it).
var bookkeepingTimeout = 10 * time.Second

// bookkeeping is the context of a bookkeeping write: one that must happen
// even while its caller is being stopped (a session's end, an item's
// move), so it does not end with ctx, but has its own deadline, so a stuck
// store (a PostgreSQL server that stopped answering, a lock never
// released) cannot hang a shutdown.
func bookkeeping(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
}

// bounded runs one bookkeeping write with bookkeeping's context.
func bounded(ctx context.Context, write func(context.Context) error) error {
	bctx, done := bookkeeping(ctx)
	defer done()
	return write(bctx)
}
