package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readEntry, for every kind of journal entry: none is not an error; a
// torn, foreign or newer entry is ErrInterrupted saying which file and
// what to do; a whole one reads back.
func TestReadEntry(t *testing.T) {
	dir := t.TempDir()
	check := func(j landJournal) (int, bool) { return j.Version, j.Key == "k" && j.State != "" }
	path := filepath.Join(dir, "k.json")
	if _, ok, err := readEntry(path, "the landing journal of k", dir, check); ok || err != nil {
		t.Fatalf("no entry: ok %v, err %v", ok, err)
	}
	for _, tc := range []struct{ text, want string }{
		{`{"key": "k", "sta`, "is unreadable"},
		{`{"key": "other", "state": "moving"}`, "is unreadable"},
		{`{"key": "k", "state": "moving", "version": 99}`, "newer swarm (format 99)"},
	} {
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, ok, err := readEntry(path, "the landing journal of k", dir, check)
		if ok || !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: ok %v, err %v; want ErrInterrupted naming %s and %q", tc.text, ok, err, path, tc.want)
		}
	}
	if err := os.WriteFile(path, []byte(`{"key": "k", "state": "moving", "version": 1, "old": "abc"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	j, ok, err := readEntry(path, "the landing journal of k", dir, check)
	if !ok || err != nil || j.Old != "abc" || j.State != landMoving {
		t.Fatalf("a whole entry: %+v, ok %v, err %v", j, ok, err)
	}
}
