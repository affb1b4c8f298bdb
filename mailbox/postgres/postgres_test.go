package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/pgtest"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/mailboxtest"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/migrations"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helper())
	}
	os.Exit(pgtest.Main(m))
}

func open(t testing.TB, url string, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	mailboxtest.Run(t, func(t testing.TB, now func() time.Time) (mailbox.Store, func() mailbox.Store) {
		url := pgtest.NewDB(t)
		s := open(t, url, now)
		return s, func() mailbox.Store {
			o, err := Open(context.Background(), url, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
	}, mailboxtest.Hooks{CutLeaseLocks: func(t testing.TB, st mailbox.Store) {
		t.Helper()
		cutLeaseLocks(t, st.(*Store))
	}})
}

// cutLeaseLocks ends every connection of this database holding an
// advisory lock (the lease connections of s and its peers), as a network
// cut or a server restart would.
func cutLeaseLocks(t testing.TB, s *Store) {
	t.Helper()
	tag, err := s.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND pid <> pg_backend_pid()
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("terminate the lock connection: %v (%d rows)", err, tag.RowsAffected())
	}
}

func TestSchemaRejectsBadStates(t *testing.T) {
	s := open(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	p := mailbox.NewPoster(s, []string{"backend"}, nil)
	m, err := p.Post(ctx, message.Draft{From: "operator", To: "backend", Body: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE messages SET state = 'lost' WHERE id = $1`,
		`UPDATE messages SET kind = 'memo' WHERE id = $1`,
		`UPDATE messages SET state = 'delivered' WHERE id = $1`, // delivered needs a session
		`UPDATE messages SET sender = recipient WHERE id = $1`,
		`UPDATE messages SET state = 'done' WHERE id = $1`,                                               // done without a session: only mail to operator, or cancelled
		`UPDATE messages SET msg_id = 'x-1' WHERE id = $1`,                                               // a msg_id only on protocol mail
		`UPDATE messages SET kind = 'protocol' WHERE id = $1`,                                            // protocol mail needs a msg_id
		`UPDATE messages SET ack_required = 1 WHERE id = $1`,                                             // an ACK needs a state and a timeout
		`UPDATE messages SET ack_state = 'overdue', ack_required = 1, ack_timeout_sec = 5 WHERE id = $1`, // overdue needs a deadline
	} {
		if _, err := s.pool.Exec(ctx, q, m.ID); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	for _, q := range []string{
		`INSERT INTO agents (name, state) VALUES ('x', 'Dancing')`,
		`INSERT INTO events (at, subject_kind, subject, to_state) VALUES (1, 'planet', 'x', 'y')`,
		`INSERT INTO events (at, subject_kind, subject, agent, to_state) VALUES (1, 'agent', 'x', 'y', 'Idle')`,
		`INSERT INTO escalations (kind, severity, summary, dedupe_key, created_at) VALUES ('gossip', 'info', 'x', 'k', 1)`,
		`INSERT INTO escalations (kind, severity, summary, dedupe_key, created_at, hold) VALUES ('agent', 'info', 'x', 'k', 1, 1)`,
		`INSERT INTO escalations (kind, severity, summary, dedupe_key, created_at, state) VALUES ('agent', 'info', 'x', 'k', 1, 'resolved')`,
		`INSERT INTO escalations (kind, severity, summary, dedupe_key, created_at, decision) VALUES ('agent', 'info', 'x', 'k', 1, 'abort')`,
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'gossip', 'T-1', 'm', 1)`,
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'progress', '', 'm', 1)`,   // a task report needs its task
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'session', 'T-1', 'm', 1)`, // a session report has none
		`INSERT INTO reports (agent, kind, task, message, at) VALUES ('x', 'blocked', 'T-1', '', 1)`,
	} {
		if _, err := s.pool.Exec(ctx, q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
}

// TestEveryTableNotifies checks that every table the store writes carries
// the change-feed trigger: a table without one would be a change that
// other processes never hear of (SQLite's data_version sees every commit).
func TestEveryTableNotifies(t *testing.T) {
	s := open(t, pgtest.NewDB(t), nil)
	rows, err := s.pool.Query(context.Background(), `SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname <> 'schema_migrations'
		AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = c.relname || '_notify')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		t.Errorf("table %s has no %s_notify trigger", name, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentOpenersMigrateOnce opens one fresh database from several
// goroutines (separate pools) at once: each migration is applied once.
func TestConcurrentOpenersMigrateOnce(t *testing.T) {
	url := pgtest.NewDB(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), url, Options{MaxConns: 2})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, url, nil)
	all, _ := migrations.For("postgres")
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(all) {
		t.Fatalf("schema_migrations has %d rows, want %d (%v)", n, len(all), err)
	}
	if v, err := s.SchemaVersion(context.Background()); err != nil || v != len(all) {
		t.Fatalf("SchemaVersion = %d, %v", v, err)
	}
}

func TestURLWithAPasswordIsRefused(t *testing.T) {
	for _, u := range []string{"postgres://me:secret@db.example/swarm", "postgres://db.example/swarm?password=secret"} {
		_, err := Open(context.Background(), u, Options{})
		if err == nil || !strings.Contains(err.Error(), "PGPASSWORD") || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%s) = %v; want a refusal that names PGPASSWORD and hides the password", u, err)
		}
	}
	if err := CheckURL("mysql://db/x"); err == nil {
		t.Error("a mysql URL accepted")
	}
}

func TestUnreachableServerSaysWhatToDo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres:///nope?host="+t.TempDir()+"&sslmode=disable&connect_timeout=2", Options{OpenTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "reachable") {
		t.Fatalf("Open on no server = %v", err)
	}
	// A connection that never came up is not a migration's failure.
	if strings.Contains(err.Error(), "migration") {
		t.Fatalf("a connection failure labelled as a migration: %v", err)
	}
}

func TestInsertsCommitInIDOrder(t *testing.T) {
	// Many concurrent senders: every id a reader sees was committed after
	// every lower id, so MessagesSince never skips one.
	s := open(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var missed []int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last int64
		seen := map[int64]bool{}
		check := func() {
			ms, err := s.MessagesSince(ctx, last, 1000)
			if err != nil {
				t.Error(err)
				return
			}
			for _, m := range ms {
				seen[m.ID] = true
				last = m.ID
			}
		}
		for {
			select {
			case <-stop:
				check()
				all, _ := s.MessagesSince(ctx, 0, 100000)
				for _, m := range all {
					if !seen[m.ID] {
						missed = append(missed, m.ID)
					}
				}
				return
			default:
				check()
			}
		}
	}()
	var senders sync.WaitGroup
	for i := range 4 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for j := range 50 {
				if _, err := s.InsertMessages(ctx, []message.Draft{{From: "operator", To: "backend", Body: fmt.Sprintf("%d/%d", i, j)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	senders.Wait()
	close(stop)
	wg.Wait()
	if len(missed) > 0 {
		t.Fatalf("the reader skipped %d ids: %v", len(missed), missed)
	}
}

// The two-process test: a child process posts; the parent's feed, whose
// polling interval is an hour, can only hear of it through NOTIFY.
const helperEnv = "SWARM_PGTEST_HELPER_URL"

func helper() int {
	s, err := Open(context.Background(), os.Getenv(helperEnv), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	if _, err := mailbox.NewPoster(s, []string{"backend"}, nil).Post(context.Background(),
		message.Draft{From: "operator", To: "backend", Body: "from another process"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestFeedWakesOnAnotherProcessesWrite(t *testing.T) {
	url := pgtest.NewDB(t)
	s := open(t, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := s.Feed(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	woke := make(chan error, 1)
	go func() { woke <- f.Wait(ctx) }()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+url)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the other process: %v\n%s", err, out)
	}
	if err := <-woke; err != nil {
		t.Fatalf("the feed did not wake: %v", err)
	}
	ms, err := s.MessagesSince(ctx, 0, 10)
	if err != nil || len(ms) != 1 || ms[0].Body != "from another process" {
		t.Fatalf("messages = %+v, %v", ms, err)
	}
}

func TestFeedIgnoresItsOwnStoresWrites(t *testing.T) {
	s := open(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	f, err := s.Feed(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := s.SetMeta(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// A marker from another connection: the first thing Wait may report.
	other := open(t, s.loc, nil)
	if err := other.SetMeta(ctx, "k", "w"); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Exactly one notification was news; the own one was skipped, and
	// nothing else is pending: a short wait ends by its deadline.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := f.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Wait = %v, want the deadline", err)
	}
}

// TestFeedReconnects kills the listening backend, commits meanwhile from
// another connection, and checks the change is reported and later ones
// are heard on the new listener.
func TestFeedReconnects(t *testing.T) {
	url := pgtest.NewDB(t)
	s := open(t, url, nil)
	other := open(t, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mf, err := s.Feed(ctx, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	f := mf.(*feed)
	pid := f.listenerPID()
	var killed bool
	if err := other.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener %d: %v, %v", pid, killed, err)
	}
	post := func(body string) message.Message {
		m, err := mailbox.NewPoster(other, []string{"backend"}, nil).Post(ctx, message.Draft{From: "operator", To: "backend", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := post("while nobody listened")
	if err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if f.dropped != 1 || f.listenerPID() == 0 || f.listenerPID() == pid {
		t.Fatalf("dropped=%d listener=%d (was %d): want one drop and a new listener", f.dropped, f.listenerPID(), pid)
	}
	if ms, err := s.MessagesSince(ctx, m.ID-1, 10); err != nil || len(ms) != 1 {
		t.Fatalf("the reader re-reads: %+v, %v", ms, err)
	}
	// The new listener hears the next commit.
	done := make(chan error, 1)
	go func() { done <- f.Wait(ctx) }()
	post("after the reconnect")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.dropped != 1 {
		t.Fatalf("dropped = %d after the reconnect", f.dropped)
	}
}

// ownCluster starts a cluster of the test's own, so that restarting it cuts
// no other test's connections, and returns it with a database's URL. It
// skips (or fails, when required) without PostgreSQL.
func ownCluster(t *testing.T) (*pgtest.Cluster, string) {
	t.Helper()
	pgtest.NewDB(t)
	c, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	url, err := c.CreateDB()
	if err != nil {
		t.Fatal(err)
	}
	return c, url
}

// restartTwice restarts c twice (pg_ctl restart) in the background; the
// channel gets the first error, or nil once both are done.
func restartTwice(c *pgtest.Cluster) <-chan error {
	restarted := make(chan error, 1)
	go func() {
		var err error
		for range 2 {
			if err = c.Restart(); err != nil {
				break
			}
		}
		restarted <- err
	}()
	return restarted
}

// TestOpenWaitsForARestart opens the store again and again while its
// server restarts (pg_ctl restart, on a cluster of its own so the other
// tests' connections are not cut): every open must succeed, whether it
// met a refused connection, a server starting up (57P03) or a connection
// the shutting-down server ended (57P01) halfway through migrating.
func TestOpenWaitsForARestart(t *testing.T) {
	c, url := ownCluster(t)
	ctx := context.Background()
	restarted := restartTwice(c)
	opened := 0
	for done := false; !done; {
		select {
		case err := <-restarted:
			if err != nil {
				t.Fatalf("pg_ctl restart: %v", err)
			}
			done = true
		default:
		}
		s, err := Open(ctx, url, Options{OpenTimeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("open %d during a restart: %v", opened+1, err)
		}
		if _, err := s.NewestMessageID(ctx); err != nil && !s.Unavailable(err) {
			t.Fatalf("query after open %d: %v", opened+1, err)
		}
		s.Close()
		opened++
	}
	t.Logf("%d opens across two restarts", opened)
}

// TestSendWaitsForARestart posts mail in a loop through one open store
// while its server restarts twice (pg_ctl restart): a post whose
// statement never reached the server (no connection could be made while
// it was down) is tried again until it is back; one cut off after it was
// sent is returned as unavailable, never retried, so nothing is stored
// twice; every post that succeeded is stored.
func TestSendWaitsForARestart(t *testing.T) {
	c, url := ownCluster(t)
	ctx := context.Background()
	s, err := Open(ctx, url, Options{OpenTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := mailbox.NewPoster(s, []string{"backend"}, nil)
	// A supervisor follows the feed, whose listener sees the restart first.
	f, err := s.Feed(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	fctx, stopFeed := context.WithCancel(ctx)
	var feedDone sync.WaitGroup
	feedDone.Go(func() {
		for f.Wait(fctx) == nil {
		}
	})
	defer func() { stopFeed(); feedDone.Wait(); f.Close() }()
	restarted := restartTwice(c)
	var ok, cut int
	for done := false; !done; {
		select {
		case err := <-restarted:
			if err != nil {
				t.Fatalf("pg_ctl restart: %v", err)
			}
			done = true
		default:
		}
		_, err := p.Post(ctx, message.Draft{From: "operator", To: "backend", Body: fmt.Sprintf("during the restart %d", ok+cut)})
		switch {
		case err == nil:
			ok++
		case s.Unavailable(err) && !notCommitted(err):
			cut++ // sent, then cut off: it may have committed, and the caller is told
		default:
			t.Fatalf("post %d during a restart: %v", ok+cut+1, err)
		}
	}
	n, err := s.NewestMessageID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int(n) < ok || int(n) > ok+cut {
		t.Fatalf("%d posts succeeded and %d were cut off, but %d messages are stored", ok, cut, n)
	}
	t.Logf("%d posts stored across two restarts, %d cut off after sending", ok, cut)
}

// Every connection's statements are bounded: a statement waiting on
// another connection's row lock fails with lock_timeout (55P03), a long
// one with statement_timeout (57014), instead of holding its caller (a
// shutdown's bookkeeping write) for ever. The defaults apply unless the
// URL sets its own.
func TestBoundedStatements(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	show := func(s *Store, name string) string {
		t.Helper()
		var v string
		if err := s.pool.QueryRow(ctx, `SHOW `+name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	def := open(t, url, nil)
	if st, lt := show(def, "statement_timeout"), show(def, "lock_timeout"); st != "30s" || lt != "10s" {
		t.Fatalf("default statement_timeout %s, lock_timeout %s; want 30s, 10s", st, lt)
	}
	own := open(t, url+"&lock_timeout=2500", nil)
	if lt := show(own, "lock_timeout"); lt != "2500ms" {
		t.Fatalf("the URL's lock_timeout = %s, want 2500ms", lt)
	}

	s, err := Open(ctx, url, Options{LockTimeout: 100 * time.Millisecond, StatementTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetMeta(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	tx, err := def.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // releases the row lock
	if _, err := tx.Exec(ctx, `SELECT value FROM meta WHERE key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a regression from hanging the test: it is
	// far beyond the lock_timeout the write must fail by.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.SetMeta(wctx, "k", "w"); pgCode(err) != "55P03" {
		t.Fatalf("a write blocked on a row lock: %v, want lock_timeout (55P03)", err)
	}
	if _, err := s.pool.Exec(wctx, `SELECT pg_sleep(10)`); pgCode(err) != "57014" {
		t.Fatalf("a long statement: %v, want statement_timeout (57014)", err)
	}
}
