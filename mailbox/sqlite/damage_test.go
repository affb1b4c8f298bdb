package sqlite

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// A file that is not a database fails Open with mailbox.ErrDamaged.
func TestNotADatabaseIsDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swarm.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a database. "), 512), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), path, Options{})
	if !errors.Is(err, mailbox.ErrDamaged) || !Damaged(err) {
		t.Fatalf("Open = %v; want an error wrapping mailbox.ErrDamaged", err)
	}
}

// Damage found by a read long after Open (a query's rows) wraps
// mailbox.ErrDamaged too, whichever method it comes through; other errors
// do not.
func TestDamageInAReadIsDamaged(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "swarm.db")
	st, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := mailbox.NewPoster(st, []string{"alpha"}, nil)
	body := strings.Repeat("a body to fill pages. ", 10)
	for range 1500 {
		if _, err := p.Post(ctx, message.Draft{From: "operator", To: "alpha", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Inbox(ctx, "nobody-here", mailbox.Filter{}); errors.Is(err, mailbox.ErrDamaged) {
		t.Fatalf("a healthy read says damaged: %v", err)
	}
	st.Close() // checkpoints the WAL into the file
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	for off := fi.Size() / 2; off < fi.Size(); off += 4096 { // the message pages, written last
		f.WriteAt(bytes.Repeat([]byte{0xde, 0xad}, 300), off)
	}
	f.Close()

	st, err = Open(ctx, path, Options{})
	if err != nil {
		if !errors.Is(err, mailbox.ErrDamaged) {
			t.Fatalf("Open = %v; want nil or mailbox.ErrDamaged", err)
		}
		return
	}
	defer st.Close()
	_, err = st.Inbox(ctx, "alpha", mailbox.Filter{})
	if !errors.Is(err, mailbox.ErrDamaged) {
		t.Fatalf("Inbox = %v; want an error wrapping mailbox.ErrDamaged", err)
	}
}
