package engine

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// maxSwaps bounds the swapper, so a tool that hangs cannot keep the test
// spinning for ever; the calls finish long before it is reached.
const maxSwaps = 50_000_000

// TestSandboxSymlinkSwapRace swaps a directory inside the worktree with a
// symlink to an outside directory (renameat2 RENAME_EXCHANGE, so the name
// always exists and is one or the other) in a tight loop while the file
// tools write, edit and read under that name. A check-then-use sandbox
// lost this race 56 to 100 times in 2,000 writes here; opening through the
// worktree's os.Root must lose it never. Calls may fail (the path really is
// a symlink that leaves the worktree at times); they must not escape.
func TestSandboxSymlinkSwapRace(t *testing.T) {
	dir := t.TempDir()
	wt := filepath.Join(dir, "wt")
	outside := filepath.Join(dir, "outside")
	writeFile(t, filepath.Join(wt, "d", "r.txt"), "inside\n")
	writeFile(t, filepath.Join(wt, "d", "e.txt"), "END\n")
	writeFile(t, filepath.Join(outside, "r.txt"), "OUTSIDE\n")
	writeFile(t, filepath.Join(outside, "e.txt"), "END\n")
	if err := os.Symlink(outside, filepath.Join(wt, "swap")); err != nil {
		t.Fatal(err)
	}
	tb, err := newToolbox(newSession(wt, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.close()
	run := func(name string, args map[string]any) ToolResult {
		return tb.run(context.Background(), ToolCall{ID: "x", Name: name, Args: args})
	}

	a, b := filepath.Join(wt, "d"), filepath.Join(wt, "swap")
	for range 2 { // there and back, so the layout starts as made
		if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
			t.Skipf("this filesystem cannot exchange names: %v", err)
		}
	}
	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		defer func() { swapped <- n }()
		for ; n < maxSwaps; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("rename exchange: %v", err)
				return
			}
		}
	}()

	const writes, reads, edits = 2000, 200, 200
	var wrote, read, edited, readEscapes int
	for i := range writes {
		// Each call writes its own name, so every escape is counted.
		path := fmt.Sprintf("d/w%d.txt", i)
		if i%4 == 0 {
			path = fmt.Sprintf("d/n%d/w.txt", i) // also races the directory creation
		}
		if r := run("write_file", map[string]any{"path": path, "content": "from the tool\n"}); r.Error == "" {
			wrote++
		}
		if i%(writes/reads) == 0 {
			r := run("read_file", map[string]any{"path": "d/r.txt"})
			if strings.Contains(r.Output, "OUTSIDE") {
				readEscapes++
			}
			if r.Error == "" {
				read++
			}
		}
		if i%(writes/edits) == 0 {
			if r := run("edit_file", map[string]any{"path": "d/e.txt", "old": "END", "new": "xEND"}); r.Error == "" {
				edited++
			}
		}
	}
	close(stop)
	swaps := <-swapped

	// Each entry outside other than its two files is a write (or the
	// directory of one) that escaped; each x before END an edit that did.
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	writeEscapes := len(entries) - 2
	editEscapes := strings.Count(readFile(t, filepath.Join(outside, "e.txt")), "x")
	if got := readFile(t, filepath.Join(outside, "r.txt")); got != "OUTSIDE\n" {
		t.Errorf("the outside file read_file raced for changed: %q", got)
	}
	t.Logf("%d swaps; succeeded: %d/%d writes, %d/%d reads, %d/%d edits; escaped: %d writes, %d reads, %d edits",
		swaps, wrote, writes, read, reads, edited, edits, writeEscapes, readEscapes, editEscapes)
	if writeEscapes != 0 || editEscapes != 0 {
		t.Errorf("%d of %d writes and %d of %d edits escaped the worktree", writeEscapes, writes, editEscapes, edits)
	}
	if readEscapes > 0 {
		t.Errorf("%d of %d reads returned the outside file", readEscapes, reads)
	}
	// Whether a given read lands in the window is chance, so only the
	// swapping and the 2,000 writes are required to have happened.
	if swaps == 0 || wrote == 0 {
		t.Errorf("the race did not run: %d swaps, %d writes succeeded", swaps, wrote)
	}
	// Failed writes must not leave their temporary files behind.
	filepath.WalkDir(wt, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), tempMark) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// TestFIFORefused checks that the file tools refuse a named pipe rather
// than block on it: opening one for reading waits for a writer that never
// comes, and write_file must not replace one with a file.
func TestFIFORefused(t *testing.T) {
	wt := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(wt, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSession(wt, nil)
	for _, c := range []toolCall{
		{"read_file", map[string]any{"path": "pipe"}},
		{"write_file", map[string]any{"path": "pipe", "content": "x"}},
		{"edit_file", map[string]any{"path": "pipe", "old": "a", "new": "b"}},
	} {
		if r := runTool(t, s, c.tool, c.args); !strings.Contains(r.Error, "not a regular file") {
			t.Errorf("%s on a FIFO: %+v", c.tool, r)
		}
	}
	if r := runTool(t, s, "grep", map[string]any{"pattern": "x", "path": "pipe"}); r.Error != "" || r.Output != "no matches\n" {
		t.Errorf("grep on a FIFO: %+v", r)
	}
	if fi, err := os.Lstat(filepath.Join(wt, "pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi, err)
	}
}
