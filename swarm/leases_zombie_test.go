package swarm

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/proc"
)

// TestClaimTakesOverAKilledSupervisor: right after kill -9, a supervisor is
// a zombie until its parent reaps it (forever under a PID 1 that never
// reaps), and kill(pid, 0) still finds it. Its leases are a dead process's
// all the same: the next swarm up on this host takes them over at once.
func TestClaimTakesOverAKilledSupervisor(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	me := ThisHolder()

	// The old supervisor: a process of this host holding backend's lease,
	// then killed and left unreaped.
	old := exec.Command("sleep", "30")
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	defer old.Wait()
	dead := mailbox.Holder{Host: me.Host, PID: old.Process.Pid}
	if _, err := st.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: dead, Agents: []string{"backend"}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	k := &leaseKeeper{d: leaseDeps{Store: st, Holder: me, Heartbeat: time.Hour}}
	if _, err := k.claim(ctx, []string{"backend"}); err == nil {
		t.Fatal("claimed backend while its supervisor runs")
	}
	if err := old.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !proc.Exited(dead.PID) {
		if time.Now().After(deadline) {
			t.Fatal("the old supervisor did not end")
		}
		time.Sleep(2 * time.Millisecond) // polling /proc, with a deadline
	}
	if !proc.Alive(dead.PID) {
		t.Fatal("the killed supervisor was reaped already: the test proves nothing")
	}
	ls, err := k.claim(ctx, []string{"backend"})
	if err != nil {
		t.Fatalf("a killed, unreaped supervisor still holds backend: %v", err)
	}
	ls.Release(ctx)
}
