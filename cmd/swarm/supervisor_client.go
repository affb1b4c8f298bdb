package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
)

// stopSupervisor asks a running supervisor to stop and waits up to wait for
// it to release the lock. It asks over the control socket; when the socket
// does not answer but the lock is held, it sends SIGTERM to the pid in the
// lock file. It reports whether one was running. No supervisor is not an
// error.
func (a *App) stopSupervisor(ctx context.Context, l repo.Layout, wait time.Duration) (bool, error) {
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := control.Call(callCtx, l, control.Request{Op: control.OpStop})
	cancel()
	if err != nil {
		pid, held := swarm.LockHolder(l.Lock())
		if !held {
			return false, nil
		}
		if pid <= 0 {
			return true, fmt.Errorf("a supervisor holds %s but does not answer, and its pid is unknown; stop it with Ctrl-C in its terminal", l.Lock())
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return true, fmt.Errorf("stop the supervisor (pid %d): %w", pid, err)
		}
	}
	deadline := time.Now().Add(wait)
	for {
		if _, held := swarm.LockHolder(l.Lock()); !held {
			return true, nil
		}
		if time.Now().After(deadline) {
			return true, fmt.Errorf("the supervisor did not stop within %s; stop it with Ctrl-C in its terminal", wait)
		}
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errNoSupervisor is what commands that need a running supervisor say
// when there is none.
var errNoSupervisor = errors.New("no supervisor is running in this repository; start one with 'swarm up'")
