//go:build reliability

package reliability

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestR7TwoSupervisors starts two `swarm up` at the same moment, 20 times:
// each time exactly one must run and the other exit 1 saying swarm is
// already running.
func TestR7TwoSupervisors(t *testing.T) {
	h := newHarness(t, swarmConfig{agents: []string{"alice", "bob"}, toml: "[liveness]\nnudge_after = \"0s\"\n"})
	const rounds = 20
	for round := 1; round <= rounds; round++ {
		var (
			ps   [2]*upProc
			errs [2]error
			wg   sync.WaitGroup
		)
		gate := make(chan struct{})
		for i := range ps {
			wg.Go(func() {
				<-gate
				ps[i], errs[i] = h.startUp(nil, "--engine", "script")
			})
		}
		close(gate)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: start: %v", round, err)
			}
		}
		// The loser exits on its own; the winner runs until stopped.
		var loser, winner *upProc
		h.waitFor(30*time.Second, "one of the two to exit", func() (bool, error) {
			switch {
			case ps[0].exited() && ps[1].exited():
				t.Fatalf("round %d: both exited:\n1: exit %d %s\n2: exit %d %s", round,
					ps[0].exitCode(), ps[0].output(), ps[1].exitCode(), ps[1].output())
			case ps[0].exited():
				loser, winner = ps[0], ps[1]
			case ps[1].exited():
				loser, winner = ps[1], ps[0]
			}
			return loser != nil, nil
		})
		if loser.exitCode() != 1 || !strings.Contains(loser.output(), "already running") {
			t.Fatalf("round %d: the loser exited %d, want 1 with \"already running\":\n%s", round, loser.exitCode(), loser.output())
		}
		h.waitFor(30*time.Second, "the winner to answer swarm status", func() (bool, error) {
			if winner.exited() {
				t.Fatalf("round %d: the winner exited %d too:\n%s", round, winner.exitCode(), winner.output())
			}
			return h.running(winner.pid())
		})
		winner.interrupt(t)
	}
	t.Logf("%d rounds: one supervisor ran each time, the other exited 1 with \"already running\"", rounds)
}
