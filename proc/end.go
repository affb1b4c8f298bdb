package proc

import "time"

// EndMarked ends every process that carries all of markers
// (SWARM_SESSION_ID=<id>, SWARM_ROOT=<root>):
// it kills them (KillMarked), waits up to max for them to go, and reaps
// the orphans among them (ReapOrphans), so a session that ended leaves
// neither processes nor zombies. It returns the pids it killed and whether
// they all went in time.
func EndMarked(max time.Duration, markers ...string) (killed []int, gone bool) {
	killed = KillMarked(markers...)
	gone = true
	if len(killed) > 0 {
		// Real time: this waits for the kernel to deliver SIGKILL.
		gone = AwaitGone(killed, 5*time.Millisecond, max, time.Sleep)
	}
	ReapOrphans()
	return killed, gone
}
