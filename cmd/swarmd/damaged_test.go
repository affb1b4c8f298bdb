package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

// Damage to the database can show in any query, long after it opened:
// every command then names the file and the way out, not just the SQLite
// error.
func TestDamagedDatabaseSaysWhatToDo(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "swarm.toml"), []byte("[defaults]\nengine = \"script\"\n[[agent]]\nname = \"alpha\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, l.DB, sqlite.Options{})
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
	st.Close() // checkpoints the WAL into the file
	// Scribble over the second half of the file: message pages, written
	// last. Each page's header goes (an invalid page type), so SQLite
	// reports the damage whatever the schema's page layout; a scribble
	// inside the cells could read as a huge record ("out of memory").
	f, err := os.OpenFile(l.DB, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	for off := fi.Size() / 2; off < fi.Size(); off += 4096 {
		f.WriteAt(bytes.Repeat([]byte{0xde, 0xad}, 300), off)
	}
	f.Close()

	for _, args := range [][]string{{"status"}, {"inbox", "alpha", "--limit", "0"}} {
		var out, errb bytes.Buffer
		app := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: downEnv{}, Cwd: root}
		if code := run(ctx, app, args); code != exitError {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		for _, want := range []string{"malformed", l.DB, "swarm doctor", ".recover"} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, errb.String())
			}
		}
	}
}
