package swarm

import (
	"context"
	"errors"
	"testing"

	"github.com/swarmhq/swarm/mailbox"
)

// awayStore is a store whose database is away for its first n lease
// claims, as PostgreSQL is during a restart.
type awayStore struct {
	mailbox.Store
	n, calls int
}

var errAway = errors.New("the database is restarting")

func (s *awayStore) ClaimLeases(ctx context.Context, c mailbox.LeaseClaim) (mailbox.Leases, error) {
	s.calls++
	if s.calls <= s.n {
		return nil, errAway
	}
	return s.Store.ClaimLeases(ctx, c)
}

func (s *awayStore) Unavailable(err error) bool {
	return errors.Is(err, errAway) || s.Store.Unavailable(err)
}

// TestStartWaitsForTheDatabase: a supervisor starting while its database
// is away for a moment (R9's pg_ctl restart) waits for it instead of
// exiting; an error that is not an outage still fails at once.
func TestStartWaitsForTheDatabase(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	away := &awayStore{Store: h.store, n: 3}
	h.sup.store = away
	h.sup.leases.d.Store = away
	if err := h.sup.Claim(context.Background()); err != nil {
		t.Fatalf("Claim during an outage: %v", err)
	}
	if away.calls != 4 {
		t.Fatalf("%d claims, want 3 refused and the fourth taken", away.calls)
	}
	h.sup.Release()

	calls := 0
	err := h.sup.whileAway(context.Background(), "step", func() error { calls++; return errors.New("broken") })
	if err == nil || calls != 1 {
		t.Fatalf("a real error: %v after %d calls, want it at once", err, calls)
	}
}
