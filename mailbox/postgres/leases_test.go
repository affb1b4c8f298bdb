package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/swarmhq/swarm/internal/pgtest"
	"github.com/swarmhq/swarm/mailbox"
)

// TestLeaseLockIsTheLiveness: a live holder's agents are refused however
// stale its heartbeat or whatever the caller believes; when its lock
// connection ends (a server restart, a network cut) and nobody took the
// agents, Renew locks them again; when someone did, Renew says the lease
// was lost.
func TestLeaseLockIsTheLiveness(t *testing.T) {
	s := open(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	a := mailbox.Holder{Host: "host-a", PID: 1}
	b := mailbox.Holder{Host: "host-b", PID: 2}
	la, err := s.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: a, Agents: []string{"x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	var he *mailbox.HeldError
	if _, err := s.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"x"}, TTL: 1, Gone: func(mailbox.Holder) bool { return true }}); !errors.As(err, &he) || he.Held[0].Holder != a {
		t.Fatalf("claiming a live holder's agent = %v, want a HeldError naming %s", err, a)
	}
	// cut ends every session holding an advisory lock, as a server
	// restart would.
	cut := func() {
		t.Helper()
		tag, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()`)
		if err != nil || tag.RowsAffected() == 0 {
			t.Fatalf("terminate the lock connection: %v (%d rows)", err, tag.RowsAffected())
		}
	}
	cut()
	if err := la.Renew(ctx); err != nil {
		t.Fatalf("Renew after the lock connection ended = %v, want it locked again", err)
	}
	if _, err := s.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"y"}}); !errors.As(err, &he) {
		t.Fatalf("claim after the relock = %v, want a HeldError", err)
	}
	cut()
	lb, err := s.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"y"}})
	if err != nil {
		t.Fatalf("claim while the holder's locks are free = %v", err)
	}
	defer lb.Release(ctx)
	if err := la.Renew(ctx); !errors.Is(err, mailbox.ErrLeaseLost) {
		t.Fatalf("Renew after a takeover = %v, want ErrLeaseLost", err)
	}
}
