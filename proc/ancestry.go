package proc

// SessionMark is what marks a process as a swarm session's: its
// environment, fixed when it was started, names the session's door
// (SWARM_DOOR) and the repository (SWARM_ROOT).
type SessionMark struct {
	Pid     int    // the marked process
	Session string // its SWARM_SESSION_ID
	Door    string // its SWARM_DOOR
}

// maxAncestors bounds the walk up the process tree.
const maxAncestors = 128
