package mailbox

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/swarmhq/swarm/message"
)

// BenchmarkSend measures one validated, transactional Send.
func BenchmarkSend(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
	d := message.Draft{From: "operator", To: "backend", Body: "the /users endpoint returns 500"}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Send(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBroadcast10 sends one message to 10 agents in one transaction.
func BenchmarkBroadcast10(b *testing.B) {
	agents := []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"}
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "swarm.db"), Options{Agents: agents})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	d := message.Draft{From: "operator", Body: "standup in 5"}
	for b.Loop() {
		if _, err := s.Broadcast(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawInsert is the floor Send is compared with: a plain insert of
// the same row shape, with the same pragmas, in its own transaction.
func BenchmarkRawInsert(b *testing.B) {
	db, err := sql.Open("sqlite", DSN(filepath.Join(b.TempDir(), "raw.db")))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, thread_id INTEGER NOT NULL,
		reply_to INTEGER, sender TEXT NOT NULL, recipient TEXT NOT NULL, kind TEXT NOT NULL, urgency TEXT NOT NULL,
		body TEXT NOT NULL, payload TEXT, created_at INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'queued',
		session_seq INTEGER, shown INTEGER NOT NULL DEFAULT 0)`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := db.Exec(`INSERT INTO messages (thread_id, sender, recipient, kind, urgency, body, created_at)
			VALUES (1, 'operator', 'backend', 'message', 'normal', 'the /users endpoint returns 500', 1)`); err != nil {
			b.Fatal(err)
		}
	}
}
