package control

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

// Announce sends big batches in parts, with bodies cut, and returns every
// answer in order.
func TestAnnounce(t *testing.T) {
	l := repo.At(t.TempDir(), "")
	os.MkdirAll(l.State, 0o755)
	if _, err := Announce(context.Background(), l, []message.Message{{ID: 1}}); !errors.Is(err, ErrNoSupervisor) {
		t.Fatalf("with no supervisor: %v", err)
	}
	var mu sync.Mutex
	var sizes []int
	_, stop := serve(t, l, func(ctx context.Context, req Request, send func(any) error) Response {
		if req.Op != OpMail {
			return Response{Error: "unknown op " + req.Op}
		}
		mu.Lock()
		sizes = append(sizes, len(req.Mail))
		mu.Unlock()
		ds := make([]Delivery, len(req.Mail))
		for i, m := range req.Mail {
			if len(m.Body) > pokeBodyCap+len("…") {
				return Response{Error: "body not cut"}
			}
			ds[i] = Delivery{ID: m.ID, To: m.To, Started: true, Interrupted: m.ID%2 == 0}
		}
		d, _ := json.Marshal(ds)
		return Response{OK: true, Data: d}
	})
	defer stop()
	var mail []message.Message
	for i := range 450 {
		mail = append(mail, message.Message{ID: int64(i + 1), To: "alpha", Body: strings.Repeat("x", 5000)})
	}
	ds, err := Announce(context.Background(), l, mail)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 450 || ds[0].ID != 1 || ds[449].ID != 450 || !ds[1].Interrupted || ds[2].Interrupted {
		t.Fatalf("got %d deliveries: first %+v, last %+v", len(ds), ds[0], ds[len(ds)-1])
	}
	if len(sizes) != 3 || sizes[0] != announceBatch || sizes[2] != 50 {
		t.Fatalf("batches %v", sizes)
	}
	if mail[0].Body != strings.Repeat("x", 5000) {
		t.Fatal("the caller's messages were changed")
	}
}
