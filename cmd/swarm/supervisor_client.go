package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/repo"
)

// stopSupervisor asks a running supervisor to stop and waits up to wait for
// it to go. It reports whether one was running. No supervisor is not an
// error.
func (a *App) stopSupervisor(ctx context.Context, l repo.Layout, wait time.Duration) (bool, error) {
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := control.Call(callCtx, l, control.Request{Op: control.OpStop})
	cancel()
	if errors.Is(err, control.ErrNoSupervisor) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("stop the supervisor: %w", err)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		pingCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := control.Call(pingCtx, l, control.Request{Op: control.OpPing})
		cancel()
		if errors.Is(err, control.ErrNoSupervisor) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true, fmt.Errorf("the supervisor did not stop within %s; stop it with Ctrl-C in its terminal", wait)
}
