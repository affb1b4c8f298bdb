package swarm

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox/sqlite"
)

// Resolving the unmetered warning is no budget grant: only a resumed
// budget trip restarts an agent's count.
func TestUnmeteredWarningGrantsNothing(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	warn, _, err := Raise(ctx, st, escalation.Draft{Kind: escalation.KindBudget, Severity: escalation.Warning, Agent: "scribe",
		Summary: "scribe reports no usage", DedupeKey: unmeteredKey("scribe")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decide(ctx, st, identity.Operator(), warn.ID, escalation.Event(escalation.Resume), "noted"); err != nil {
		t.Fatal(err)
	}
	grants, err := budgetGrants(ctx, st)
	if err != nil || len(grants) != 0 {
		t.Fatalf("grants = %v, %v; want none", grants, err)
	}
	trip, _, err := Raise(ctx, st, escalation.Draft{Kind: escalation.KindBudget, Agent: "scribe", Hold: true, Summary: "scribe spent its budget"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decide(ctx, st, identity.Operator(), trip.ID, escalation.Event(escalation.Resume), ""); err != nil {
		t.Fatal(err)
	}
	if grants, err = budgetGrants(ctx, st); err != nil || grants["scribe"].IsZero() {
		t.Fatalf("grants = %v, %v; want scribe's", grants, err)
	}
}

// An unmetered session counts prompt bytes / 4 as input tokens.
func TestEstimateCountsUnmeteredSessions(t *testing.T) {
	if got := estimatedUsage(4003); got.InputTokens != 1000 || got.Work() != 1000 {
		t.Fatalf("estimate = %+v", got)
	}
}
