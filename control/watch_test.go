package control

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/swarmhq/swarm/repo"
)

// notice stands in for swarm.Notice, whose JSON has no "ok".
type notice struct {
	Agent string
	Kind  string
}

func TestWatchStreamsUntilTheSupervisorEndsIt(t *testing.T) {
	l := repo.At(t.TempDir(), "")
	os.MkdirAll(l.State, 0o755)
	release := make(chan struct{})
	_, stop := serve(t, l, func(ctx context.Context, req Request, send func(any) error) Response {
		if req.Op != OpWatch {
			return Response{Error: "unexpected " + req.Op}
		}
		send(Response{OK: true})
		send(notice{Agent: "backend", Kind: "transition"})
		send(notice{Agent: "frontend", Kind: "message"})
		<-release
		return Response{OK: true} // what the supervisor sends when it stops
	})
	defer stop()

	s, err := Watch(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, want := range []string{`{"Agent":"backend","Kind":"transition"}`, `{"Agent":"frontend","Kind":"message"}`} {
		got, err := s.Next()
		if err != nil || string(got) != want {
			t.Fatalf("Next = %s, %v; want %s", got, err, want)
		}
	}
	close(release)
	if got, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the supervisor ended the stream: %s, %v; want io.EOF", got, err)
	}
}

func TestWatchEndsWithItsContext(t *testing.T) {
	l := repo.At(t.TempDir(), "")
	os.MkdirAll(l.State, 0o755)
	_, stop := serve(t, l, func(ctx context.Context, req Request, send func(any) error) Response {
		send(Response{OK: true})
		<-ctx.Done() // a quiet supervisor: no notices until it stops
		return Response{OK: true}
	})
	defer stop()

	cause := errors.New("operator left")
	ctx, cancel := context.WithCancelCause(context.Background())
	s, err := Watch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.Next()
		done <- err
	}()
	cancel(cause)
	select {
	case err := <-done:
		if !errors.Is(err, cause) {
			t.Fatalf("Next after cancel = %v, want the context's cause", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after its context ended")
	}
}

func TestWatchWithoutSupervisor(t *testing.T) {
	l := repo.At(t.TempDir(), "")
	os.MkdirAll(l.State, 0o755)
	if _, err := Watch(context.Background(), l); !errors.Is(err, ErrNoSupervisor) {
		t.Fatalf("Watch with nothing listening = %v, want ErrNoSupervisor", err)
	}
}

func TestWatchRefused(t *testing.T) {
	l := repo.At(t.TempDir(), "")
	os.MkdirAll(l.State, 0o755)
	_, stop := serve(t, l, func(ctx context.Context, req Request, send func(any) error) Response {
		return Response{Error: "shutting down"}
	})
	defer stop()
	if _, err := Watch(context.Background(), l); err == nil || errors.Is(err, ErrNoSupervisor) || err.Error() != "control watch: shutting down" {
		t.Fatalf("refused watch = %v", err)
	}
}
