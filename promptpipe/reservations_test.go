package promptpipe

import (
	"strings"
	"testing"
	"time"
)

// TestEnvironmentListsReservations: Environment lists the live file
// reservations, teammates' first, with their terms; none, no lines.
func TestEnvironmentListsReservations(t *testing.T) {
	pc := freshContext()
	p := Render(pc, Sources{Env: env()}, defaultConfig, now)
	if s, _ := p.Section(SecEnvironment); strings.Contains(s.Body, "reservation") {
		t.Fatalf("Environment without reservations mentions them:\n%s", s.Body)
	}
	pc.Reservations = []Reservation{
		{Agent: "backend", Glob: "web/**", Until: now.Add(2 * time.Hour)},
		{Agent: "lead", Glob: "api/**", Exclusive: true, Until: time.Date(2026, 11, 21, 16, 30, 0, 0, time.UTC), Reason: "migrating\nthe schema"},
		{Agent: "frontend", Glob: "docs/*.md", Until: now.Add(48 * time.Hour)},
	}
	p = Render(pc, Sources{Env: env()}, defaultConfig, now)
	s, _ := p.Section(SecEnvironment)
	want := "File reservations (`swarm reservations`; leave a teammate's exclusive ones alone, or ask first):\n" +
		"  lead holds api/** exclusively until 16:30: migrating the schema\n" +
		"  frontend holds docs/*.md until 2026-11-23 15:45\n" +
		"  you hold web/** until 17:45 (`swarm release` when done)"
	if !strings.HasSuffix(s.Body, want) {
		t.Fatalf("Environment:\n%s\nwant it to end with:\n%s", s.Body, want)
	}
	var many []Reservation
	for range maxReservations + 3 {
		many = append(many, Reservation{Agent: "lead", Glob: "x/**"})
	}
	if got := reservations("backend", many, now); !strings.HasSuffix(got, "  … and 3 more\n") {
		t.Fatalf("a long list:\n%s", got)
	}
}
