package control

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/repo"
)

// TestDoor: a door is a 0600 socket in its own 0700 directory; it answers
// as its handler says, and Serve's end removes the socket and its
// directory, so a leftover client finds nothing to connect to.
func TestDoor(t *testing.T) {
	l := repo.At(t.TempDir(), "")
	if err := os.MkdirAll(l.State, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := ListenDoor(l, "dev-3")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(srv.Path())
	for p, want := range map[string]os.FileMode{dir: 0o700, srv.Path(): 0o600} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v; want %v", p, err, fi.Mode().Perm(), want)
		}
	}
	if !strings.HasPrefix(filepath.Base(dir), "dev-3-") {
		t.Errorf("door directory %s does not name its session", dir)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(ctx, func(ctx context.Context, req Request, send func(any) error) Response {
			return Response{OK: true, Data: []byte(`"` + req.Op + `"`)}
		})
	}()
	resp, err := CallAt(context.Background(), srv.Path(), Request{Op: OpPing})
	if err != nil || string(resp.Data) != `"ping"` {
		t.Fatalf("ping: %+v, %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the door's directory outlived it: %v", err)
	}
	if _, err := CallAt(context.Background(), srv.Path(), Request{Op: OpPing}); err == nil {
		t.Error("a closed door answered")
	}
	if err := RemoveDoors(l); err != nil {
		t.Error(err)
	}
}

// TestDoorDeepRepo: a repository too deep for a socket path gets its doors
// in the user's private runtime directory.
func TestDoorDeepRepo(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	l := repo.At(deep, "")
	if err := os.MkdirAll(l.State, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := ListenDoor(l, "a-long-agent-name-for-the-door-1")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if strings.HasPrefix(srv.Path(), deep) || len(srv.Path()) > maxSocketPath {
		t.Errorf("door %s is not in the runtime directory", srv.Path())
	}
	if err := RemoveDoors(l); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(srv.Path())); !os.IsNotExist(err) {
		t.Errorf("RemoveDoors left %s", filepath.Dir(srv.Path()))
	}
}
