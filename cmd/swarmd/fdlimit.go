package main

import (
	"fmt"
	"math"
)

// The open files a supervisor holds. Each running agent: its session's
// output pipes, its door's socket and connection, the sandbox's lifeline
// pipe, the process's pidfd and the session log (P4 in `make bench`
// measured 7 per running scripted agent in bubblewrap, 3,515 at 500
// agents); an exec engine's CLI adds a pipe or two. The rest: the
// database and its WAL, the supervisor log, the control socket, watchers
// and the web desk's streams.
const (
	fdsPerAgent = 10
	fdsBase     = 64
)

// fdsNeeded is the open-file limit a supervisor of agents needs.
func fdsNeeded(agents int) uint64 { return fdsBase + fdsPerAgent*uint64(max(agents, 0)) }

// fdLimitError is swarm up's refusal when the open-file limit cannot be
// raised far enough: it names what is needed and how to get it.
type fdLimitError struct {
	agents          int
	need, soft, max uint64
}

func (e *fdLimitError) Error() string {
	return fmt.Sprintf("%d agents need up to %d open files (%d each, plus %d), but the limit is %d and cannot go above %d (the hard limit): "+
		"raise it first with 'ulimit -n %d' (beyond the hard limit: as root, or in /etc/security/limits.conf), or run fewer agents with --agents",
		e.agents, e.need, fdsPerAgent, fdsBase, e.soft, e.max, e.need)
}

// planFDLimit decides what swarm up does about RLIMIT_NOFILE for agents,
// given the current soft and hard limits (math.MaxUint64 for unlimited):
// nothing (0), raise the soft limit to raise (the hard limit, or what is
// needed when the hard limit is unlimited), or refuse, before anything
// starts, because even the hard limit is too low.
func planFDLimit(agents int, soft, hard uint64) (raise uint64, err error) {
	need := fdsNeeded(agents)
	switch {
	case soft >= need:
		return 0, nil
	case hard == math.MaxUint64:
		return need, nil
	case hard >= need:
		return hard, nil
	}
	return 0, &fdLimitError{agents: agents, need: need, soft: soft, max: hard}
}
