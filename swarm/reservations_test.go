package swarm

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

func TestNormalizeGlob(t *testing.T) {
	for in, want := range map[string]string{
		"api/**": "api/**", "./api/users.go": "api/users.go", "api/": "api/**", " docs/*.md ": "docs/*.md",
		"**/*_test.go": "**/*_test.go", "web/[a-c]?.ts": "web/[a-c]?.ts",
	} {
		if got, err := NormalizeGlob(in); err != nil || got != want {
			t.Errorf("NormalizeGlob(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"": "empty", "/etc/passwd": "absolute", "../other/x": "..", "api/../../x": "..", "a//b": "empty segment",
		"a/./b": ". segment", "api/**.go": "whole segment", "web/[a-": "malformed", `api\x`: `\`, "a\nb": "control",
	} {
		if got, err := NormalizeGlob(in); err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "path.Match") {
			t.Errorf("NormalizeGlob(%q) = %q, %v; want an error saying %q and what a glob is", in, got, err, why)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		glob, file string
		want       bool
	}{
		{"api/**", "api/users.go", true},
		{"api/**", "api/v1/users.go", true},
		{"api/**", "api", true}, // ** takes zero segments
		{"api/**", "apix/users.go", false},
		{"api/*.go", "api/users.go", true},
		{"api/*.go", "api/v1/users.go", false},
		{"**/*_test.go", "a/b/c_test.go", true},
		{"**/*_test.go", "c_test.go", true},
		{"api/**/users.go", "api/users.go", true},
		{"api/**/users.go", "api/x/y/users.go", true},
		{"api/**/users.go", "api/x/y/users.ts", false},
		{"README.md", "README.md", true},
		{"README.md", "docs/README.md", false},
		{"web/[a-c]?.ts", "web/bx.ts", true},
		{"web/[a-c]?.ts", "web/dx.ts", false},
	} {
		if got := GlobMatch(tt.glob, tt.file); got != tt.want {
			t.Errorf("GlobMatch(%q, %q) = %v, want %v", tt.glob, tt.file, got, tt.want)
		}
	}
}

func TestGlobsOverlap(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"api/**", "api/users.go", true},
		{"api/**", "api/v1/**", true},
		{"api/**", "**/*.go", true},
		{"api/*.go", "api/users.*", true},
		{"api/*.go", "api/*.ts", false},
		{"api/*.go", "web/*.go", false},
		{"api/*.go", "api/v1/x.go", false},
		{"**", "anything/at/all", true},
		{"a*b", "*c*", true}, // acb
		{"a?", "ab", true},
		{"a?", "abc", false},
		{"[a-c]x", "[c-e]x", true},
		{"[a-b]x", "[d-e]x", false},
		{"[a-b]x", "cx", false},
		{"**/x.go", "api/**/y.go", false},
		{"**/x.go", "api/**", true},
		{"docs/*.md", "docs/setup.md", true},
	} {
		if got := GlobsOverlap(tt.a, tt.b); got != tt.want {
			t.Errorf("GlobsOverlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := GlobsOverlap(tt.b, tt.a); got != tt.want {
			t.Errorf("GlobsOverlap(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

// reserveFor stores r as a test's setup: who may reserve what is
// verbs.Reserve's rule, tested in package verbs.
func reserveFor(t *testing.T, st mailbox.Store, now time.Time, r mailbox.Reservation) {
	t.Helper()
	if _, err := st.Reserve(context.Background(), now, []mailbox.Reservation{r}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCrossingDraft: the files under other agents' exclusive reservations,
// one draft naming both, the same key for the same crossing.
func TestCrossingDraft(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	later := now.Add(30 * time.Minute)
	live := []mailbox.Reservation{
		{Agent: "backend", Glob: "api/**", Exclusive: true, Reason: "migrating the schema", ExpiresAt: &later},
		{Agent: "critic", Glob: "web/**"},                          // shared: not crossed
		{Agent: "frontend", Glob: "api/users.go", Exclusive: true}, // its own
	}
	if _, ok := CrossingDraft("frontend", 2, []string{"web/app.ts", "README.md"}, live, now); ok {
		t.Fatal("a crossing of a shared reservation")
	}
	d, ok := CrossingDraft("frontend", 2, []string{"api/users.go", "web/app.ts", "api/v1/orders.go"}, live, now)
	if !ok || d.Kind != escalation.KindReservation || d.Severity != escalation.Warning || d.Hold || d.Agent != "frontend" ||
		d.Summary != "session 2 of frontend committed api/users.go, api/v1/orders.go under backend's exclusive reservation of api/** (until 12:30: migrating the schema); ask them to agree who changes them, then resolve this" {
		t.Fatalf("draft = %+v", d)
	}
	d2, _ := CrossingDraft("frontend", 5, []string{"api/other.go"}, live, now)
	if d2.DedupeKey != d.DedupeKey {
		t.Fatalf("another crossing of the same reservation has key %s, want %s", d2.DedupeKey, d.DedupeKey)
	}
	if _, ok := CrossingDraft("frontend", 2, []string{"api/users.go"}, live, later); ok {
		t.Fatal("a lapsed reservation was crossed")
	}
}

// committedBy is what each fake guard says its session committed.
var committedBy sync.Map // *fakeGuard → []string

func (g *fakeGuard) Committed(context.Context) ([]string, error) {
	if v, ok := committedBy.Load(g); ok {
		return v.([]string), nil
	}
	return nil, nil
}

// TestSessionCrossingAReservationEscalatesOnce: bravo's sessions commit
// under alpha's exclusive reservation twice: one reservation escalation
// (a warning that holds nobody) naming both, counted twice.
func TestSessionCrossingAReservationEscalatesOnce(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n")
	reserveFor(t, h.store, time.Now(), mailbox.Reservation{Agent: "alpha", Glob: "api/**", Exclusive: true, Reason: "migrating the schema"})
	h.wt.guard = func(agent string) *fakeGuard {
		g := &fakeGuard{}
		if agent == "bravo" {
			committedBy.Store(g, []string{"api/users.go", "README.md"})
		}
		return g
	}
	h.start()
	for range 2 {
		r := h.nextRun()
		r.finish <- engine.Result{Outcome: engine.Success}
	}
	e := h.waitEscalation(escalation.KindReservation, escalation.Open)
	if e.AgentName() != "bravo" || e.Hold || e.Severity != escalation.Warning ||
		!strings.Contains(e.Summary, "of bravo committed api/users.go under alpha's exclusive reservation of api/**") || strings.Contains(e.Summary, "README") {
		t.Fatalf("escalation = %+v", e)
	}
	h.waitFor("bravo", lifecycle.Idle)
	h.send(message.Draft{From: "operator", To: "bravo", Body: "again"})
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitForSeq("bravo", lifecycle.Idle, 2)
	var got []escalation.Escalation
	for _, x := range escalations(t, h.store) {
		if x.Kind == escalation.KindReservation {
			got = append(got, x)
		}
	}
	if len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("reservation escalations %+v, want one counted twice", got)
	}
}

// TestReservationExpiryService runs the expiry service in a synctest
// bubble: a reservation is released at its TTL, not before, and one of
// an agent the swarm no longer has is released at start.
func TestReservationExpiryService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		root := t.TempDir()
		cfg, err := config.Parse([]byte(baseConfig+"[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"beta\"\n"), "swarm.toml", root)
		if err != nil {
			t.Fatal(err)
		}
		l := repo.At(root, "")
		clk := offsetClock(time.Until(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)))
		st, err := sqlite.Open(ctx, l.DB, sqlite.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		// This supervisor runs alpha only (swarm up --agents alpha): beta
		// is still the swarm's, run elsewhere or later.
		sup, err := New(Options{Config: cfg, Layout: l, Store: st, Clock: clk, Agents: []string{"alpha"},
			Engines:   func(config.Agent) (engine.Engine, error) { return &fakeEngine{name: "script"}, nil },
			Worktrees: &fakeWorktrees{root: filepath.Join(root, "wt")}, Prompts: &fakePrompts{}})
		if err != nil {
			t.Fatal(err)
		}
		reserve := func(agent, glob string, ttl time.Duration) {
			now := clk.Now()
			r := mailbox.Reservation{Agent: agent, Glob: glob}
			if ttl > 0 {
				until := now.Add(ttl)
				r.ExpiresAt = &until
			}
			reserveFor(t, st, now, r)
		}
		reserve("alpha", "api/**", 10*time.Minute)
		reserve("alpha", "docs/**", 0)
		reserve("gone", "web/**", 0) // an agent removed from swarm.toml
		reserve("beta", "db/**", 0)
		held := func() []string {
			rs, err := st.Reservations(ctx, time.Time{}, true)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range rs {
				if r.ReleasedAt == nil {
					out = append(out, r.Agent+":"+r.Glob)
				}
			}
			return out
		}
		done := make(chan struct{})
		go func() { defer close(done); sup.expireReservations(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		if got := strings.Join(held(), " "); got != "alpha:api/** alpha:docs/** beta:db/**" {
			t.Fatalf("held at start: %s; want gone's released, beta's kept", got)
		}
		time.Sleep(10*time.Minute - time.Second)
		synctest.Wait()
		if got := strings.Join(held(), " "); got != "alpha:api/** alpha:docs/** beta:db/**" {
			t.Fatalf("held a second before the TTL: %s", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := strings.Join(held(), " "); got != "alpha:docs/** beta:db/**" {
			t.Fatalf("held at the TTL: %s; want api/** expired", got)
		}
	})
}

// TestRetireReleasesReservations: retiring a spawned agent releases its
// reservations, whether the operator retires it or it retires itself.
func TestRetireReleasesReservations(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cfg, err := config.Parse([]byte(baseConfig+"[[agent]]\nname = \"lead\"\n"), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	st, err := sqlite.Open(ctx, l.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if err := st.InTx(ctx, func(tx mailbox.Tx) error {
		return tx.AddSpawned(mailbox.Spawned{Name: "worker", SpawnedBy: "lead", SpawnedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"worker", "lead"} {
		reserveFor(t, st, now, mailbox.Reservation{Agent: a, Glob: a + "/**", Exclusive: true})
	}
	if _, err := Retire(ctx, RetireRequest{Config: cfg, Layout: l, Store: st, Name: "worker", Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	rs, err := st.Reservations(ctx, now, false)
	if err != nil || len(rs) != 1 || rs[0].Agent != "lead" {
		t.Fatalf("live after retiring worker: %+v, %v; want lead's only", rs, err)
	}
}

// TestPromptListsTeammatesReservations: a teammate's prompt names the live
// reservations in Environment; a lapsed one is gone.
func TestPromptListsTeammatesReservations(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cfg, err := config.Parse([]byte(baseConfig+"[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n"), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	st, err := sqlite.Open(ctx, l.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	until := at.Add(30 * time.Minute)
	reserveFor(t, st, at, mailbox.Reservation{Agent: "alpha", Glob: "api/**", Exclusive: true, Reason: "migrating the schema", ExpiresAt: &until})
	bravo, _ := cfg.Agent("bravo")
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{{at.Add(time.Minute), true}, {at.Add(30 * time.Minute), false}} {
		pp := NewPipePrompts(cfg, l, st, nil, func() time.Time { return tt.at }, slog.Default())
		p, err := pp.Build(ctx, newPromptRequest(cfg.AgentNames(), bravo, 1, filepath.Join(root, "wt"), nil, nil, false))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(p.Text, "  alpha holds api/** exclusively until 12:30: migrating the schema\n"); got != tt.want {
			t.Fatalf("at %s the prompt lists alpha's reservation: %v, want %v\n%s", tt.at.Format("15:04"), got, tt.want, p.Text)
		}
	}
}

// TestEphemeralRetireReleasesReservations: an ephemeral agent that
// retires itself (Idle with no work left) releases its reservations.
func TestEphemeralRetireReleasesReservations(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"lead\"\nmode = \"coordinate\"\n")
	h.start()
	lead := h.nextRun()
	ctx := context.Background()
	if _, _, err := Spawn(ctx, h.sup.cfg, h.store, h.sup.Poster(), SpawnRequest{Name: "worker-1", Role: "write the tests",
		Ephemeral: true, Caller: sessionOf("lead", 1)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.sup.StartSpawned(ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	w := h.nextRun()
	reserveFor(t, h.store, time.Now(), mailbox.Reservation{Agent: "worker-1", Glob: "tests/**", Exclusive: true})
	w.finish <- engine.Result{Outcome: engine.Success}
	if n := h.waitFor("worker-1", lifecycle.Stopped); n.Cause != CauseRetired {
		t.Fatalf("worker-1 stopped with cause %q, want %q", n.Cause, CauseRetired)
	}
	if rs, err := h.store.Reservations(ctx, time.Now(), false); err != nil || len(rs) != 0 {
		t.Fatalf("live reservations after worker-1 retired: %+v, %v", rs, err)
	}
	lead.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("lead", lifecycle.Idle)
}
