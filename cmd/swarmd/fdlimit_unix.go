//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// ensureFDLimit raises the open-file soft limit for a supervisor of agents
// when it is short and the hard limit allows, or refuses (planFDLimit).
// Go raises the soft limit to the hard one at start already; this says
// what is needed when even that is not enough.
func ensureFDLimit(agents int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // nothing to go on: the sessions will say if files run out
	}
	raise, err := planFDLimit(agents, uint64(lim.Cur), uint64(lim.Max))
	if err != nil || raise == 0 {
		return err
	}
	want := lim
	want.Cur = raise
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("raise the open-file limit from %d to %d for %d agents: %w; run 'ulimit -n %d' first", lim.Cur, raise, agents, err, fdsNeeded(agents))
	}
	return nil
}
