package verbs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
)

// editor is session seq of agent with code mode's capabilities.
func editor(agent string, seq int64) identity.Caller {
	return identity.Session(agent, seq, mode.Spec{Mode: mode.Code}.Vector())
}

// TestReserveRules: who may reserve and release for whom, the exclusive
// conflict naming the holder, the warnings (overlap, no file), the
// refresh, and nothing stored by a refusal.
func TestReserveRules(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	files := []string{"api/users.go", "api/orders.go", "web/app.ts"}
	tracked := func(context.Context, string) ([]string, error) { return files, nil }
	known := func(a string) bool { return a == "backend" || a == "frontend" || a == "critic" }
	reserve := func(who identity.Caller, agent string, exclusive bool, globs ...string) (ReserveResult, error) {
		return Reserve(ctx, who, ReserveRequest{Store: st, Agent: agent, Globs: globs, Exclusive: exclusive,
			TTL: 30 * time.Minute, Reason: "migrating the schema", Now: now, Tracked: tracked, Known: known})
	}
	live := func() []mailbox.Reservation {
		t.Helper()
		rs, err := Reservations(ctx, editor("critic", 1), ReservationsRequest{Store: st, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}

	res, err := reserve(editor("backend", 3), "", true, "api/**")
	if err != nil || len(res.Reservations) != 1 || res.Reservations[0].Agent != "backend" || len(res.Warnings) != 0 {
		t.Fatalf("backend reserves api/**: %+v, %v", res, err)
	}
	// A session reserves only for itself, whatever --agent says.
	_, err = reserve(editor("frontend", 2), "backend", false, "web/**")
	if r, ok := identity.IsRefusal(err); !ok || r.Rule != identity.RuleOwnSession {
		t.Fatalf("frontend reserving for backend: %v, want the own_session rule", err)
	}
	// A session without can_edit_files reserves nothing.
	_, err = reserve(identity.Session("critic", 1, mode.Spec{Mode: mode.Review}.Vector()), "", false, "web/**")
	if r, ok := identity.IsRefusal(err); !ok || r.Rule != identity.RuleCapability {
		t.Fatalf("a review session reserving: %v, want the capability rule", err)
	}
	if _, err := reserve(identity.Operator(), "", false, "web/**"); err == nil || !strings.Contains(err.Error(), "--agent") {
		t.Fatalf("the operator reserving for nobody: %v", err)
	}
	if _, err := reserve(identity.Operator(), "ghost", false, "web/**"); err == nil || !strings.Contains(err.Error(), "unknown agent") {
		t.Fatalf("the operator reserving for an unknown agent: %v", err)
	}
	if _, err := reserve(identity.Caller{}, "", false, "web/**"); err == nil {
		t.Fatal("nobody reserved")
	}
	// An exclusive overlap is refused, naming the holder, all or none.
	_, err = reserve(editor("frontend", 2), "", true, "web/**", "api/users.go")
	var conflict *ReservationConflictError
	if !errors.As(err, &conflict) || conflict.Holder.Agent != "backend" ||
		!strings.Contains(err.Error(), "api/users.go overlaps backend's exclusive reservation of api/** (until 12:30: migrating the schema): nothing was reserved") {
		t.Fatalf("frontend's exclusive api/users.go: %v", err)
	}
	if got := live(); len(got) != 1 {
		t.Fatalf("a refused reservation stored something: %+v", got)
	}
	// A shared one is allowed and warned of; a glob matching no tracked
	// file is stored with a warning.
	res, err = reserve(editor("frontend", 2), "", false, "api/users.go", "web/new/**")
	if err != nil || len(res.Reservations) != 2 || len(res.Warnings) != 2 ||
		res.Warnings[0] != "api/users.go overlaps backend's exclusive reservation of api/** (until 12:30: migrating the schema)" ||
		!strings.Contains(res.Warnings[1], "web/new/** matches no file tracked on frontend's branch yet: reserved anyway") {
		t.Fatalf("frontend's shared reservations: %+v, %v", res, err)
	}
	// The operator reserves for an agent; reserving again refreshes.
	res, err = Reserve(ctx, identity.Operator(), ReserveRequest{Store: st, Agent: "frontend", Globs: []string{"web/new/"}, Now: now.Add(time.Minute), Known: known})
	if err != nil || len(res.Reservations) != 1 || res.Reservations[0].Glob != "web/new/**" || res.Reservations[0].ExpiresAt != nil || len(live()) != 3 {
		t.Fatalf("the operator refreshing frontend's web/new/**: %+v, %v; live %+v", res, err, live())
	}

	// Release: a session only its own; the operator anyone's.
	_, err = Release(ctx, editor("frontend", 2), ReleaseRequest{Store: st, Agent: "backend", Now: now})
	if r, ok := identity.IsRefusal(err); !ok || r.Rule != identity.RuleOwnSession {
		t.Fatalf("frontend releasing backend's: %v, want the own_session rule", err)
	}
	rel, err := Release(ctx, editor("frontend", 2), ReleaseRequest{Store: st, Globs: []string{"web/new/", "nope/**"}, Now: now})
	if err != nil || len(rel.Released) != 1 || rel.Released[0].Glob != "web/new/**" || len(rel.Warnings) != 1 || !strings.Contains(rel.Warnings[0], "frontend held no reservation of nope/**") {
		t.Fatalf("frontend's release: %+v, %v", rel, err)
	}
	rel, err = Release(ctx, identity.Operator(), ReleaseRequest{Store: st, Agent: "backend", Now: now})
	if err != nil || len(rel.Released) != 1 || rel.Released[0].Glob != "api/**" {
		t.Fatalf("the operator releasing backend's: %+v, %v", rel, err)
	}
	// Now frontend may take api/users.go exclusively.
	if _, err := reserve(editor("frontend", 2), "", true, "api/users.go"); err != nil {
		t.Fatalf("frontend's exclusive api/users.go once backend released: %v", err)
	}
}
