//go:build reliability

package reliability

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestR8InterruptedDown interrupts `swarm down --merge` 20 times, with
// Ctrl-C (SIGINT) and kill -9 in turn, at random moments, on the large
// repository where four agents committed their work. After every ten
// interruptions the next `swarm down --merge` must succeed at once, and
// main must hold every original file the agents did not change, unchanged,
// and all of the agents' work; then the work is put back for the next ten.
func TestR8InterruptedDown(t *testing.T) {
	rng := newRand(t)
	w := sharedWorld(t)
	h := w.h
	const batches, perBatch = 2, 10
	landed, finished := 0, 0
	var longest time.Duration
	// The faults fall inside the time an uninterrupted swarm down --merge
	// takes on this machine, measured first: a fixed range would miss it
	// on a fast machine and land after it.
	h.restore(w.worked)
	t0 := time.Now()
	if r := h.swarm("down", "--merge", "--delete-ignored"); r.code != 0 {
		t.Fatalf("the uninterrupted swarm down failed: %s", r)
	}
	full := time.Since(t0)
	w.verify(t, "uninterrupted", w.agents, nil)
	t.Logf("an uninterrupted swarm down --merge takes %s", full.Round(time.Millisecond))
	for b := range batches {
		h.restore(w.worked)
		for i := range perBatch {
			n := b*perBatch + i + 1
			sig := []syscall.Signal{syscall.SIGINT, syscall.SIGKILL}[n%2]
			delay := time.Duration(rng.Int64N(int64(full)))
			cmd := exec.Command(swarmBin, "--dir", h.root, "down", "--merge", "--delete-ignored")
			cmd.Dir = h.root
			cmd.Env = h.env()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			fault := time.NewTimer(delay)
			select {
			case err := <-exited:
				fault.Stop()
				finished++
				t.Logf("interruption %d: swarm down ended (%v) before the %s at %s", n, err, sig, delay.Round(time.Millisecond))
				if err == nil {
					// It finished: nothing is left to interrupt, so the
					// work goes back for the next fault.
					h.restore(w.worked)
				}
				continue
			case <-fault.C: // the moment of the fault, chosen above; not waiting for anything
			}
			_ = cmd.Process.Signal(sig)
			select {
			case err := <-exited:
				landed++
				t.Logf("interruption %d: %s at %s: %v", n, sig, delay.Round(time.Millisecond), err)
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("interruption %d: swarm down still ran a minute after %s", n, sig)
			}
		}
		t0 := time.Now()
		r := h.swarm("down", "--merge", "--delete-ignored")
		if r.code != 0 {
			t.Fatalf("batch %d: the swarm down after %d interruptions failed: %s", b+1, perBatch, r)
		}
		longest = max(longest, time.Since(t0))
		w.verify(t, fmt.Sprintf("batch %d", b+1), w.agents, nil)
	}
	if landed < batches*perBatch/2 {
		t.Errorf("only %d of %d interruptions landed while swarm down ran", landed, batches*perBatch)
	}
	t.Logf("%d interruptions of swarm down (%d landed while it ran, %d came after it had finished); each following swarm down succeeded at once (the longest in %s); 0 files lost",
		batches*perBatch, landed, finished, longest.Round(time.Millisecond))
}
