package swarm

import (
	"context"
	"testing"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
)

// TestBusyDatabaseNeverStopsARunner: while another process holds the
// database's write lock for longer than the store retries (busy_timeout,
// then its own backoff), the runner's session end waits instead of
// stopping the agent with "database is locked"; once the lock is let go,
// the agent goes on (issue 28 item 8).
func TestBusyDatabaseNeverStopsARunner(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	busy := make(chan struct{}, 1000)
	st, err := sqlite.Open(context.Background(), h.layout.DB, sqlite.Options{
		BusyTimeout: 5 * time.Millisecond, BusyWait: 20 * time.Millisecond,
		Busy: func() {
			select {
			case busy <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h.sup.store = st
	h.start()
	run := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)

	// Another process takes the write lock and keeps it.
	other, err := sqlite.Open(context.Background(), h.layout.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- other.InTx(context.Background(), func(mailbox.Tx) error {
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	for len(busy) > 0 { // only what the session's end meets counts
		<-busy
	}
	run.finish <- engine.Result{Outcome: engine.Success}
	// The store gives up after BusyWait (two attempts); more busy rounds
	// than that mean the runner tried again instead of stopping.
	deadline := time.After(20 * time.Second)
	for n := 0; n < 6; n++ {
		select {
		case <-busy:
		case <-deadline:
			t.Fatalf("the session's end met a busy database %d times, want it to keep trying", n)
		}
	}
	if r, _ := h.sup.lookup("alpha"); r.liveState() == lifecycle.Stopped {
		t.Fatal("alpha stopped while the database was busy")
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	h.waitFor("alpha", lifecycle.SessionComplete)
	h.waitFor("alpha", lifecycle.Idle)
	for _, n := range h.history {
		if n.Agent == "alpha" && n.To == lifecycle.Stopped {
			t.Fatalf("alpha stopped: %s", n.Cause)
		}
	}
}
