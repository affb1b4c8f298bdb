package verbs

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/swarm"
)

// TestCancelLandingKeepsWhy: a cancelled candidate says why on its row,
// as a conflict or a failure does ('swarm merges' and the web desk's
// history read it there); cancelling it again, or one that is not there,
// is refused with an error the desk can tell apart.
func TestCancelLandingKeepsWhy(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, _, err := swarm.Enqueue(ctx, st, merge.Candidate{Agent: "alpha", Commit: strings.Repeat("a", 40), Source: merge.FromLand, By: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := CancelLanding(ctx, identity.Operator(), st, c.ID, "wrong branch")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != merge.Cancelled || got.Reason != "cancelled by operator: wrong branch" {
		t.Fatalf("after cancel: %s %q", got.State, got.Reason)
	}
	_, err = CancelLanding(ctx, identity.Operator(), st, c.ID, "again")
	if !errors.Is(err, ErrLeftQueue) || !strings.Contains(err.Error(), "is cancelled already") {
		t.Fatalf("second cancel: %v", err)
	}
	if again, _ := st.Candidate(ctx, c.ID); again.Reason != got.Reason {
		t.Fatalf("the second cancel changed the reason to %q", again.Reason)
	}
	if _, err := CancelLanding(ctx, identity.Operator(), st, 99, ""); !errors.Is(err, mailbox.ErrNoSuchCandidate) {
		t.Fatalf("cancel of no candidate: %v", err)
	}
}
