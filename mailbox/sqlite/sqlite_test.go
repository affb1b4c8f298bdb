package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/mailboxtest"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/migrations"
)

func open(t testing.TB, path string, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	mailboxtest.Run(t, func(t testing.TB, now func() time.Time) (mailbox.Store, func() mailbox.Store) {
		path := filepath.Join(t.TempDir(), "swarm.db")
		s := open(t, path, now)
		return s, func() mailbox.Store {
			o, err := Open(context.Background(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
	})
}

func TestSchemaRejectsBadStates(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "swarm.db"), nil)
	ctx := context.Background()
	p := mailbox.NewPoster(s, []string{"backend"}, nil)
	m, err := p.Post(ctx, message.Draft{From: "operator", To: "backend", Body: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE messages SET state = 'lost' WHERE id = ?`,
		`UPDATE messages SET kind = 'memo' WHERE id = ?`,
		`UPDATE messages SET state = 'delivered' WHERE id = ?`, // delivered needs a session
	} {
		if _, err := s.db.ExecContext(ctx, q, m.ID); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO agents (name, state) VALUES ('x', 'Dancing')`); err == nil {
		t.Error("agent state Dancing accepted")
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO events (at, subject_kind, subject, to_state) VALUES (1, 'planet', 'x', 'y')`); err == nil {
		t.Error("subject kind planet accepted")
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO events (at, subject_kind, subject, agent, to_state) VALUES (1, 'agent', 'x', 'y', 'Idle')`); err == nil {
		t.Error("an agent event about another agent accepted")
	}
	for _, q := range []string{
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'gossip', 'T-1', 'm', 1)`,
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'progress', '', 'm', 1)`,
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'session', 'T-1', 'm', 1)`,
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'blocked', 'T-1', '', 1)`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
}

func TestPragmas(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "swarm.db"), nil)
	ctx := context.Background()
	var mode string
	var fk, busy int
	s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
	s.db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk)
	s.db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy)
	if mode != "wal" || fk != 1 || busy != 5000 {
		t.Fatalf("journal_mode=%s foreign_keys=%d busy_timeout=%d", mode, fk, busy)
	}
}

func TestPathWithSpaces(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "my repo", ".swarm", "swarm.db"), nil)
	p := mailbox.NewPoster(s, []string{"a"}, nil)
	if _, err := p.Post(context.Background(), message.Draft{From: "operator", To: "a", Body: "x"}); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptFileSaysWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swarm.db")
	if err := os.WriteFile(path, []byte("this is not a database, it is a text file long enough to have a header page"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), path, Options{})
	if err == nil {
		t.Fatal("opened a text file as a database")
	}
	for _, want := range []string{path, "swarm doctor", ".recover"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestMigratesTheFirstRelease opens a swarm.db written by the first
// release (schema 1: 3 messages, 2 sessions, 14 events) and checks that it
// migrates in place with everything intact, and that the widened state
// CHECK takes the new states.
func TestMigratesTheFirstRelease(t *testing.T) {
	src, err := os.ReadFile("testdata/v1-release.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "swarm.db")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, nil)
	ctx := context.Background()
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestMigration(t) {
		t.Fatalf("schema version = %d, %v, want %d", v, err, latestMigration(t))
	}
	inbox, err := s.Inbox(ctx, "backend", mailbox.Filter{})
	if err != nil || len(inbox) != 2 || inbox[0].Body != "first message" || inbox[0].State != message.Done || !inbox[1].IsUrgent() {
		t.Fatalf("backend's mail = %+v, %v", inbox, err)
	}
	sess, err := s.Session(ctx, "frontend", 1)
	if err != nil || sess.State != mailbox.SessionCompleted || sess.Prompt == "" {
		t.Fatalf("frontend session 1 = %+v, %v", sess, err)
	}
	evs, err := s.Events(ctx, mailbox.EventFilter{})
	if err != nil || len(evs) != 14 {
		t.Fatalf("%d events, %v; want 14", len(evs), err)
	}
	for _, e := range evs {
		if e.SubjectKind != fsm.SubjectAgent || e.AgentName() != e.Subject || e.Subject == "" {
			t.Fatalf("migrated event = %+v", e)
		}
	}
	if evs[0].From != nil {
		t.Fatalf("first event's from = %v, want null", *evs[0].From)
	}
	a, err := s.Agent(ctx, "backend")
	if err != nil || a.State != lifecycle.Stopped || a.SessionSeq != 1 || a.Tokens == 0 {
		t.Fatalf("backend = %+v, %v", a, err)
	}
	// The rebuilt table takes the states the coordination layer adds, and
	// events keep numbering after the copied ones.
	err = s.InTx(ctx, func(tx mailbox.Tx) error {
		ev, err := tx.Transition(fsm.Change{Kind: fsm.SubjectAgent, Subject: "backend", From: "Stopped", To: string(lifecycle.Held), Cause: "test"})
		if err == nil && ev.ID != 15 {
			return fmt.Errorf("new event id %d, want 15", ev.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Check(ctx); err != nil || v != "ok" {
		t.Fatalf("integrity = %q, %v", v, err)
	}
	// The rebuilt messages table (0003) kept threads and its foreign key,
	// and lets mail to operator become done without a session.
	all, err := s.MessagesSince(ctx, 0, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("messages = %+v, %v", all, err)
	}
	p := mailbox.NewPoster(s, []string{"backend", "frontend"}, nil)
	if _, err := p.Post(ctx, message.Draft{From: "operator", To: "backend", Body: "x", ReplyTo: 99}); !errors.Is(err, mailbox.ErrNoSuchMessage) {
		t.Fatalf("reply to a missing message: %v", err)
	}
	q, err := p.Post(ctx, message.Draft{From: "backend", To: "operator", Body: "a question", ReplyTo: all[0].ID})
	if err != nil || q.ThreadID != all[0].ThreadID {
		t.Fatalf("reply after the rebuild = %+v, %v", q, err)
	}
	if n, err := s.MarkOperatorDone(ctx, []int64{q.ID}); err != nil || n != 1 {
		t.Fatalf("MarkOperatorDone = %d, %v", n, err)
	}
	var fkProblems int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fkProblems); err != nil || fkProblems != 0 {
		t.Fatalf("foreign key check: %d problem(s), %v", fkProblems, err)
	}
	var ddl string
	s.db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'messages'`).Scan(&ddl)
	if !strings.Contains(ddl, `REFERENCES "messages"`) {
		t.Fatalf("messages.reply_to no longer references messages:\n%s", ddl)
	}
}

// The multi-process tests re-execute the test binary as children; the
// child role is chosen by an environment variable.
const childEnv = "SWARM_MAILBOX_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "send":
		os.Exit(childSend())
	case "open":
		os.Exit(childOpen())
	default:
		fmt.Fprintln(os.Stderr, "unknown child role")
		os.Exit(3)
	}
}

func childSend() int {
	n, _ := strconv.Atoi(os.Getenv("SWARM_TEST_N"))
	s, err := Open(context.Background(), os.Getenv("SWARM_TEST_DB"), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	p := mailbox.NewPoster(s, []string{"backend"}, nil)
	for i := range n {
		if _, err := p.Post(context.Background(), message.Draft{From: "operator", To: "backend", Body: fmt.Sprintf("msg %d", i)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func childOpen() int {
	s, err := Open(context.Background(), os.Getenv("SWARM_TEST_DB"), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runChildren starts n copies of the test binary in role and waits for all.
func runChildren(t *testing.T, n int, role string, env ...string) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), append(env, childEnv+"="+role, "GORACE=atexit_sleep_ms=0")...)
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		})
	}
	wg.Wait()
	return errs
}

func TestConcurrentSendersAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes")
	}
	db := filepath.Join(t.TempDir(), "swarm.db")
	// swarm init creates the database before anyone sends.
	s := open(t, db, nil)
	for i, err := range runChildren(t, 4, "send", "SWARM_TEST_DB="+db, "SWARM_TEST_N=250") {
		if err != nil {
			t.Errorf("sender %d: %v", i, err)
		}
	}
	ms, err := s.Inbox(context.Background(), "backend", mailbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, m := range ms {
		if seen[m.ID] {
			t.Fatalf("duplicate id %d", m.ID)
		}
		seen[m.ID] = true
	}
	if len(ms) != 1000 {
		t.Fatalf("%d messages stored, want 1000", len(ms))
	}
}

func TestMigrationRace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 120 processes")
	}
	dir := t.TempDir()
	for round := range 20 {
		db := filepath.Join(dir, fmt.Sprintf("round%d.db", round))
		for i, err := range runChildren(t, 6, "open", "SWARM_TEST_DB="+db) {
			if err != nil {
				t.Errorf("round %d opener %d: %v", round, i, err)
			}
		}
		s, err := Open(context.Background(), db, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		s.db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n)
		s.Close()
		if want := latestMigration(t); n != want {
			t.Fatalf("round %d: %d migration rows, want %d", round, n, want)
		}
	}
}

// latestMigration is the number of the newest SQLite migration.
func latestMigration(t testing.TB) int {
	t.Helper()
	ms, err := migrations.For("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// BenchmarkSend measures one validated, posted message.
func BenchmarkSend(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "swarm.db"), nil)
	p := mailbox.NewPoster(s, []string{"backend"}, nil)
	ctx := context.Background()
	d := message.Draft{From: "operator", To: "backend", Body: "the /users endpoint returns 500"}
	for b.Loop() {
		if _, err := p.Post(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBroadcast10 sends one message to 10 agents in one transaction.
func BenchmarkBroadcast10(b *testing.B) {
	agents := []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"}
	s := open(b, filepath.Join(b.TempDir(), "swarm.db"), nil)
	p := mailbox.NewPoster(s, agents, nil)
	ctx := context.Background()
	d := message.Draft{From: "operator", Body: "standup in 5"}
	for b.Loop() {
		if _, err := p.Broadcast(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawInsert is the floor Send is compared with.
func BenchmarkRawInsert(b *testing.B) {
	ctx := context.Background()
	raw, err := OpenRaw(ctx, filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	for b.Loop() {
		if err := raw.Insert(ctx, "operator", "backend", "the /users endpoint returns 500"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStaleLeaseIsTakenOver: without session locks, a lease whose
// heartbeat is older than the TTL is taken over, and its old holder learns
// at its next renewal that it lost it.
func TestStaleLeaseIsTakenOver(t *testing.T) {
	clk := mailboxtest.NewClock()
	s := open(t, filepath.Join(t.TempDir(), "swarm.db"), clk.Now)
	ctx := context.Background()
	a := mailbox.Holder{Host: "h", PID: 1}
	b := mailbox.Holder{Host: "h", PID: 2}
	la, err := s.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: a, Agents: []string{"x"}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(59 * time.Second)
	var he *mailbox.HeldError
	if _, err := s.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"x"}, TTL: time.Minute}); !errors.As(err, &he) {
		t.Fatalf("claim within the TTL = %v, want a HeldError", err)
	}
	clk.Add(2 * time.Second)
	if _, err := s.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: b, Agents: []string{"x"}, TTL: time.Minute}); err != nil {
		t.Fatalf("claim after the TTL: %v", err)
	}
	if err := la.Renew(ctx); !errors.Is(err, mailbox.ErrLeaseLost) || !strings.Contains(err.Error(), "x") {
		t.Fatalf("the old holder's Renew = %v, want ErrLeaseLost naming x", err)
	}
}

// TestReservationsMigrationKeepsEscalations applies the migrations before
// the reservations migration to a database with escalations in it (the newest deleted), then
// opens it: its rebuild keeps every row and the id sequence, so no id
// is used twice, and the widened kind CHECK takes reservation.
func TestReservationsMigrationKeepsEscalations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "swarm.db")
	db, err := openDB(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	all, err := migrations.For("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Name == "reservations" {
			break
		}
		if err := applyMigration(ctx, db, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := db.ExecContext(ctx, `INSERT INTO escalations (kind, severity, summary, dedupe_key, created_at) VALUES ('agent', 'warning', ?, ?, 1)`,
			fmt.Sprint("old ", i), fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM escalations WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, path, nil)
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM escalations WHERE summary LIKE 'old %'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d old escalations after the migration, %v; want 2", n, err)
	}
	var id int64
	err = s.InTx(ctx, func(tx mailbox.Tx) error {
		e, err := tx.InsertEscalation(escalation.Draft{Kind: escalation.KindReservation, Severity: escalation.Warning, Summary: "crossed", DedupeKey: "r"})
		id = e.ID
		return err
	})
	if err != nil || id != 4 {
		t.Fatalf("a reservation escalation after the migration: id %d, %v; want id 4 (3 was used)", id, err)
	}
}

// TestOpenUpToDateTakesNoWriteLock: every command opens the store, so
// opening an up-to-date database must not wait for the write lock the
// supervisor may hold. The lock is held for the whole Open; Open fails
// (busy, after its short timeouts) if it asks for it.
func TestOpenUpToDateTakesNoWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swarm.db")
	open(t, path, nil)
	writer, err := openDB(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	ctx := context.Background()
	tx, err := writer.BeginTx(ctx, nil) // immediate: the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id = -1`); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path, Options{BusyTimeout: 20 * time.Millisecond, OpenTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("open while another process holds the write lock: %v", err)
	}
	s.Close()
}
