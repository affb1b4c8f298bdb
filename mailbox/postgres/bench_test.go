package postgres

import (
	"context"
	"testing"

	"github.com/swarmhq/swarm/internal/pgtest"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// BenchmarkSend is one Poster.Post (validate, one INSERT … RETURNING with
// the message lock, autocommit) against BenchmarkRawInsert, the floor.
func BenchmarkSend(b *testing.B) {
	s := open(b, pgtest.NewDB(b), nil)
	p := mailbox.NewPoster(s, []string{"backend"}, nil)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.Post(ctx, message.Draft{From: "operator", To: "backend", Body: "benchmark message"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawInsert(b *testing.B) {
	r, err := OpenRaw(context.Background(), pgtest.NewDB(b))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if err := r.Insert(ctx, "operator", "backend", "benchmark message"); err != nil {
			b.Fatal(err)
		}
	}
}
