package mailboxtest

import (
	"errors"
	"sync"
	"time"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
)

// testReservations: reserving stores rows in order, refreshing a held glob
// keeps one row; check sees the live rows and refuses all or none; lists
// give live or every row; releasing by glob and by agent; expiry at the
// deadline; and the reservation escalation kind stores.
func testReservations(e *env) {
	t, s, ctx := e.t, e.s, e.ctx
	now := e.clk.Now()
	hour := now.Add(time.Hour)
	reserve := func(at time.Time, check func([]mailbox.Reservation) error, rs ...mailbox.Reservation) []mailbox.Reservation {
		t.Helper()
		got, err := s.Reserve(ctx, at, rs, check)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := reserve(now, nil,
		mailbox.Reservation{Agent: "backend", Glob: "api/**", Exclusive: true, Reason: "schema", ExpiresAt: &hour},
		mailbox.Reservation{Agent: "backend", Glob: "docs/*.md"})
	if len(got) != 2 || got[0].ID == 0 || got[0].Glob != "api/**" || !got[0].Exclusive || got[0].Reason != "schema" ||
		got[0].ExpiresAt == nil || !got[0].ExpiresAt.Equal(hour) || !got[0].CreatedAt.Equal(now) || got[0].ReleasedAt != nil ||
		got[1].Exclusive || got[1].ExpiresAt != nil {
		t.Fatalf("Reserve = %+v", got)
	}
	first := got[0].ID

	// The check sees what is live, and its refusal stores nothing.
	refused := errors.New("refused")
	var seen []mailbox.Reservation
	_, err := s.Reserve(ctx, now, []mailbox.Reservation{{Agent: "frontend", Glob: "api/users.go", Exclusive: true}},
		func(live []mailbox.Reservation) error { seen = live; return refused })
	if !errors.Is(err, refused) || len(seen) != 2 {
		t.Fatalf("Reserve with a refusing check: %v, saw %+v", err, seen)
	}

	// Refreshing a held glob keeps its row and its start.
	later := now.Add(10 * time.Minute)
	two := later.Add(2 * time.Hour)
	got = reserve(later, nil, mailbox.Reservation{Agent: "backend", Glob: "api/**", Reason: "still the schema", ExpiresAt: &two})
	if len(got) != 1 || got[0].ID != first || got[0].Exclusive || got[0].Reason != "still the schema" ||
		!got[0].ExpiresAt.Equal(two) || !got[0].CreatedAt.Equal(now) {
		t.Fatalf("refresh = %+v, want row %d refreshed", got, first)
	}
	reserve(later, nil, mailbox.Reservation{Agent: "frontend", Glob: "web/**", ExpiresAt: &hour})
	live, err := s.Reservations(ctx, later, false)
	if err != nil || len(live) != 3 || live[0].ID != first || live[2].Agent != "frontend" {
		t.Fatalf("Reservations = %+v, %v", live, err)
	}

	// Expiry: frontend's lapses at the hour, not before.
	if n, err := s.ExpireReservations(ctx, hour.Add(-time.Nanosecond)); err != nil || n != 0 {
		t.Fatalf("ExpireReservations before the hour = %d, %v", n, err)
	}
	if live, _ := s.Reservations(ctx, hour, false); len(live) != 2 {
		t.Fatalf("live at the hour: %+v, want frontend's gone", live)
	}
	if n, err := s.ExpireReservations(ctx, hour); err != nil || n != 1 {
		t.Fatalf("ExpireReservations at the hour = %d, %v, want 1", n, err)
	}
	all, err := s.Reservations(ctx, hour, true)
	if err != nil || len(all) != 3 || all[2].ReleasedAt == nil || !all[2].ReleasedAt.Equal(hour) {
		t.Fatalf("every reservation = %+v, %v", all, err)
	}
	// Reserving it again is a new row, as the expired one was released.
	got = reserve(hour, nil, mailbox.Reservation{Agent: "frontend", Glob: "web/**"})
	if got[0].ID == all[2].ID || !got[0].CreatedAt.Equal(hour) {
		t.Fatalf("reserve after expiry = %+v", got)
	}

	// Release by glob (one not held is skipped), then every one.
	rel, err := s.ReleaseReservations(ctx, "backend", []string{"docs/*.md", "nothing/**"}, hour)
	if err != nil || len(rel) != 1 || rel[0].Glob != "docs/*.md" || rel[0].ReleasedAt == nil {
		t.Fatalf("release by glob = %+v, %v", rel, err)
	}
	rel, err = s.ReleaseReservations(ctx, "backend", nil, hour)
	if err != nil || len(rel) != 1 || rel[0].ID != first {
		t.Fatalf("release all = %+v, %v", rel, err)
	}
	if rel, err := s.ReleaseReservations(ctx, "backend", nil, hour); err != nil || len(rel) != 0 {
		t.Fatalf("release again = %+v, %v", rel, err)
	}
	if live, _ := s.Reservations(ctx, hour, false); len(live) != 1 || live[0].Agent != "frontend" {
		t.Fatalf("live after releases: %+v", live)
	}

	// Racing exclusive reservations of one glob: the check runs one at a
	// time, so exactly one passes.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for _, a := range []string{"backend", "lead"} {
		wg.Go(func() {
			_, err := s.Reserve(ctx, hour, []mailbox.Reservation{{Agent: a, Glob: "race/**", Exclusive: true}}, func(live []mailbox.Reservation) error {
				for _, r := range live {
					if r.Glob == "race/**" {
						return refused
					}
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.Is(err, refused):
				t.Errorf("racing reserve: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d racing exclusive reservations passed the check, want 1", won)
	}

	// The escalation kind stores.
	esc, _ := e.raise(escalation.Draft{Kind: escalation.KindReservation, Agent: "frontend", Summary: "frontend committed api/users.go under backend's exclusive api/**"})
	if esc.Kind != escalation.KindReservation || esc.Severity != escalation.Warning || esc.Hold {
		t.Fatalf("reservation escalation = %+v", esc)
	}
}
