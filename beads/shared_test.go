package beads

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gatedBD is a fake bd that counts its runs in a file, then blocks reading
// a fifo until the test releases it, then prints the ready fixture.
type gatedBD struct {
	client *Client
	count  string
	fifo   string
}

func newGatedBD(t *testing.T) *gatedBD {
	t.Helper()
	dir := t.TempDir()
	g := &gatedBD{count: filepath.Join(dir, "count"), fifo: filepath.Join(dir, "gate")}
	if err := syscall.Mkfifo(g.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join(fixtures, "ready.json"))
	if err != nil {
		t.Fatal(err)
	}
	bin := fakeBD(t, dir, `echo run >> '`+g.count+`'
read line < '`+g.fifo+`'
cat '`+abs+`'`)
	g.client = &Client{Dir: dir, Actor: "backend", Bin: bin, Timeout: time.Minute}
	return g
}

// release lets one blocked bd run finish. Opening the fifo for writing
// blocks until bd opens it for reading, so no sleep is needed; the timer
// only turns a broken fake into a failure instead of a hang.
func (g *gatedBD) release(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(g.fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("go\n")
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the fake bd never reached its gate")
	}
}

func (g *gatedBD) runs(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(g.count)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

func TestSharedRunsOneBDForConcurrentCallers(t *testing.T) {
	g := newGatedBD(t)
	s := NewShared(g.client)
	const callers = 10
	var joined sync.WaitGroup
	joined.Add(callers)
	s.joined = joined.Done

	type result struct {
		issues []Issue
		err    error
	}
	results := make(chan result, callers)
	for range callers {
		go func() {
			issues, err := s.Ready(context.Background())
			results <- result{issues, err}
		}()
	}
	// Every caller is waiting on the one call, which cannot finish before
	// the release.
	joined.Wait()
	g.release(t)
	var first []Issue
	for range callers {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !slices.Equal(ids(r.issues), parseCases["ready.json"]) {
			t.Fatalf("ids = %v", ids(r.issues))
		}
		if first == nil {
			first = r.issues
		} else if &first[0] == &r.issues[0] {
			t.Fatal("callers share one slice")
		}
	}
	if n := g.runs(t); n != 1 {
		t.Fatalf("bd ran %d times for %d concurrent callers, want 1", n, callers)
	}

	// Nothing is cached: a later call runs bd again.
	s.joined = nil
	done := make(chan error, 1)
	go func() { _, err := s.Ready(context.Background()); done <- err }()
	g.release(t)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := g.runs(t); n != 2 {
		t.Fatalf("bd ran %d times, want 2", n)
	}
}

// A caller that gives up returns at once; the shared call carries on for
// the others.
func TestSharedCallerCancel(t *testing.T) {
	g := newGatedBD(t)
	s := NewShared(g.client)
	var joined sync.WaitGroup
	joined.Add(2)
	s.joined = joined.Done

	ctx, cancel := context.WithCancelCause(context.Background())
	quitter := make(chan error, 1)
	go func() { _, err := s.Ready(ctx); quitter <- err }()
	stayer := make(chan []Issue, 1)
	go func() { issues, _ := s.Ready(context.Background()); stayer <- issues }()
	joined.Wait()

	giveUp := errors.New("prompt build timed out")
	cancel(giveUp)
	if err := <-quitter; !errors.Is(err, giveUp) {
		t.Fatalf("cancelled caller err = %v", err)
	}
	g.release(t)
	if issues := <-stayer; len(issues) != 3 {
		t.Fatalf("the remaining caller got %v", ids(issues))
	}
	if n := g.runs(t); n != 1 {
		t.Fatalf("bd ran %d times, want 1", n)
	}
}

func TestSharedPassesErrors(t *testing.T) {
	c, _ := replay(t, "nodb_ready.json")
	s := NewShared(c)
	if s.Client() != c {
		t.Fatal("Client() is not the shared client")
	}
	if _, err := s.Ready(context.Background()); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("err = %v", err)
	}
}

// Close ends the call in flight that no caller owns any more, and waits
// for it: nothing is left running when the supervisor exits.
func TestSharedCloseEndsTheCallInFlight(t *testing.T) {
	g := newGatedBD(t)
	s := NewShared(g.client)
	var joined sync.WaitGroup
	joined.Add(1)
	s.joined = joined.Done

	ctx, cancel := context.WithCancel(context.Background())
	caller := make(chan error, 1)
	go func() { _, err := s.Ready(ctx); caller <- err }()
	joined.Wait()
	// Wait (bounded) until bd is running, so Close has a process to end.
	for i := 0; ; i++ {
		// Its line written, not only the file created: the shell makes
		// the file before it writes, and Close could land in between.
		if b, err := os.ReadFile(g.count); err == nil && len(b) > 0 {
			break
		}
		if i == 3000 {
			t.Fatal("the fake bd never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // the only caller gives up; bd runs on, blocked on its gate
	<-caller
	s.joined = nil

	s.Close() // returns only once bd has ended: it never reaches the gate again
	if _, err := s.Ready(context.Background()); !errors.Is(err, errClosed) {
		t.Fatalf("Ready after Close = %v, want errClosed", err)
	}
	if n := g.runs(t); n != 1 {
		t.Fatalf("bd ran %d times, want 1", n)
	}
}

// bd list, which the graph strategies read for every prompt, is shared
// the same way: one run for the callers that arrive while it runs.
func TestSharedListRunsOneBD(t *testing.T) {
	g := newGatedBD(t)
	s := NewShared(g.client)
	const callers = 5
	var joined sync.WaitGroup
	joined.Add(callers)
	s.joined = joined.Done
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := s.List(context.Background())
			errs <- err
		}()
	}
	joined.Wait()
	g.release(t)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := g.runs(t); n != 1 {
		t.Fatalf("bd ran %d times for %d concurrent list callers, want 1", n, callers)
	}
}
