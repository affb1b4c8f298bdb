package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/swarmhq/swarm/internal/pgtest"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// A connection the server ended while it sat in the pool (a restart, an
// administrator's pg_terminate_backend) is found by the ping when it is
// next taken, so a post right after goes out on a fresh connection. Without
// the ping the post would be cut off after sending (57P01), its commit
// unknown, and the operator told the mail may be lost: the two_hosts
// journey's send just after pgrestart.
func TestPostAfterTheServerEndedAnIdleConnection(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := context.Background()
	s, err := Open(ctx, url, Options{MaxConns: 1, PingIdle: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := mailbox.NewPoster(s, []string{"backend"}, nil)
	if _, err := p.Post(ctx, message.Draft{From: "operator", To: "backend", Body: "before"}); err != nil {
		t.Fatal(err)
	}

	// End every connection of the store's pool from the outside, and wait
	// until the server says they are gone.
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const others = `FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'swarm' AND pid <> pg_backend_pid()`
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) `+others); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) `+others).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections of the store still there after pg_terminate_backend", n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if _, err := p.Post(ctx, message.Draft{From: "operator", To: "backend", Body: "after"}); err != nil {
		t.Fatalf("post after the server ended the pool's idle connection: %v", err)
	}
}
