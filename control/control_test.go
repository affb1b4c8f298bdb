package control

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/repo"
)

func serve(t *testing.T, l repo.Layout, h Handler) (*Server, func()) {
	t.Helper()
	srv, err := Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, h) }()
	return srv, func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestCallAndPoke(t *testing.T) {
	l := repo.At(t.TempDir(), "")
	os.MkdirAll(l.State, 0o755)
	pokes := make(chan struct{}, 1)
	_, stop := serve(t, l, func(ctx context.Context, req Request, send func(any) error) Response {
		switch req.Op {
		case OpPoke:
			pokes <- struct{}{}
			return Response{OK: true}
		case OpPing:
			d, _ := json.Marshal(map[string]int{"pid": 42})
			return Response{OK: true, Data: d}
		}
		return Response{Error: "unknown op " + req.Op}
	})
	Poke(l, nil)
	<-pokes
	resp, err := Call(context.Background(), l, Request{Op: OpPing})
	if err != nil || !strings.Contains(string(resp.Data), "42") {
		t.Fatalf("ping = %+v, %v", resp, err)
	}
	if _, err := Call(context.Background(), l, Request{Op: "dance"}); err == nil || !strings.Contains(err.Error(), "unknown op") {
		t.Fatalf("bad op: %v", err)
	}
	stop()
	if _, err := os.Stat(l.Socket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("socket file left behind")
	}
	if _, err := Call(context.Background(), l, Request{Op: OpPing}); !errors.Is(err, ErrNoSupervisor) {
		t.Fatalf("after stop: %v", err)
	}
	Poke(l, nil) // no supervisor: silently nothing
}

func TestLongPathUsesAddrFile(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	l := repo.At(deep, "")
	os.MkdirAll(l.State, 0o755)
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	srv, stop := serve(t, l, func(ctx context.Context, req Request, send func(any) error) Response {
		return Response{OK: true}
	})
	if len(srv.Path()) > maxSocketPath || SocketPath(l) != srv.Path() {
		t.Fatalf("socket %q, addr file says %q", srv.Path(), SocketPath(l))
	}
	if _, err := Call(context.Background(), l, Request{Op: OpPing}); err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := os.Stat(l.ControlAddr()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("control.addr left behind")
	}
}
