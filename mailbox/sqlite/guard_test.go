package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// holdWriteLock takes the database's write lock from another connection,
// as a second process in the middle of a long write would, and returns
// the function that lets it go.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := openDB(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(context.Background(), nil) // immediate: the write lock
	if err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			tx.Rollback()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// TestBusyIsWaitedOut: a write that finds another connection holding the
// write lock beyond busy_timeout waits, retrying, until the lock is let
// go, both a transaction (a runner's transition) and a lone statement (its
// activity); neither fails with "database is locked" (issue 28 item 8).
func TestBusyIsWaitedOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swarm.db")
	busy := make(chan struct{}, 64)
	s, err := Open(context.Background(), path, Options{BusyTimeout: 10 * time.Millisecond,
		Busy: func() {
			select {
			case busy <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.RegisterAgent(ctx, mailbox.AgentInfo{Name: "bravo", Mode: "code", Engine: "script"}); err != nil {
		t.Fatal(err)
	}
	writes := map[string]func() error{
		"transition": func() error {
			return s.InTx(ctx, func(tx mailbox.Tx) error {
				_, err := tx.Transition(fsm.Change{Kind: fsm.SubjectAgent, Subject: "bravo", From: string(lifecycle.Stopped), To: string(lifecycle.Initializing), Cause: "start"})
				return err
			})
		},
		"activity": func() error { return s.SetActivity(ctx, "bravo", "reading") },
	}
	for what, write := range writes {
		release := holdWriteLock(t, path)
		done := make(chan error, 1)
		go func() { done <- write() }()
		// Two busy rounds: the write waited busy_timeout twice and is
		// still waiting, not failed.
		for range 2 {
			select {
			case <-busy:
			case err := <-done:
				t.Fatalf("%s under another connection's write lock = %v, want it to wait", what, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s never found the database busy", what)
			}
		}
		release()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s once the lock was let go = %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waits after the lock was let go", what)
		}
	}
	a, err := s.Agent(ctx, "bravo")
	if err != nil || a.State != lifecycle.Initializing || a.Activity != "reading" {
		t.Fatalf("bravo after the busy writes: %+v, %v", a, err)
	}
}

// TestBusyBeyondTheWaitIsUnavailable: once the store's own retries are
// spent, the error is one Unavailable reports, so a runner waits on
// instead of stopping its agent.
func TestBusyBeyondTheWaitIsUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swarm.db")
	s, err := Open(context.Background(), path, Options{BusyTimeout: 5 * time.Millisecond, BusyWait: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holdWriteLock(t, path)
	err = s.SetMeta(context.Background(), "k", "v")
	if err == nil || !s.Unavailable(err) {
		t.Fatalf("a write busy beyond BusyWait = %v, Unavailable %v; want an error Unavailable reports", err, s.Unavailable(err))
	}
	if s.Unavailable(errors.New("other")) {
		t.Fatal("Unavailable says yes to any error")
	}
}

// TestDatabaseDeletedOrReplaced: the supervisor's poll (the change feed)
// and every transaction notice that the file they opened was deleted or
// replaced, and stop with ErrDatabaseGone naming it (issue 28 item 4).
func TestDatabaseDeletedOrReplaced(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "swarm.db")
			s := open(t, path, nil)
			f, err := s.Feed(ctx, 5*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(path + suffix)
			}
			if how == "replaced" {
				other := filepath.Join(dir, "other.db")
				o := open(t, other, nil)
				o.Close()
				if err := os.Rename(other, path); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err = f.Wait(wctx)
			if !errors.Is(err, mailbox.ErrDatabaseGone) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), how) {
				t.Fatalf("the feed after the database was %s = %v, want ErrDatabaseGone naming %s", how, err, path)
			}
			err = s.InTx(ctx, func(tx mailbox.Tx) error { return nil })
			if !errors.Is(err, mailbox.ErrDatabaseGone) {
				t.Fatalf("a transaction after the database was %s = %v, want ErrDatabaseGone", how, err)
			}
			if _, err := s.Check(ctx); !errors.Is(err, mailbox.ErrDatabaseGone) {
				t.Fatalf("Check after the database was %s = %v, want ErrDatabaseGone", how, err)
			}
		})
	}
}

// TestDiskFull fills a small tmpfs: the write that finds no space says the
// disk is full, names the database, and stored nothing (issue 28 item 7).
func TestDiskFull(t *testing.T) {
	dir := mountTiny(t, "640k")
	path := filepath.Join(dir, "swarm.db")
	s := open(t, path, nil)
	ctx := context.Background()
	p := mailbox.NewPoster(s, []string{"bravo"}, nil)
	body := strings.Repeat("x", 4000)
	var err error
	var stored int
	for ; stored < 10_000; stored++ {
		if _, err = p.Post(ctx, message.Draft{From: "operator", To: "bravo", Body: body}); err != nil {
			break
		}
	}
	var full *mailbox.DiskFullError
	if !errors.As(err, &full) || full.Path != path {
		t.Fatalf("posting into a full disk = %v, want a DiskFullError naming %s", err, path)
	}
	msg := err.Error()
	for _, want := range []string{"send to bravo: ", "the disk is full", path, "nothing of this was stored", "free space"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not say %q", msg, want)
		}
	}
	// A transaction (a runner's) says the same.
	err = s.InTx(ctx, func(tx mailbox.Tx) error {
		for range 200 {
			if err := tx.StartSession(mailbox.SessionStart{Agent: "bravo", Seq: int64(len(body)), Engine: "script", Prompt: body}); err != nil {
				return err
			}
			body += "y"
		}
		return nil
	})
	if !errors.As(err, &full) {
		t.Fatalf("a transaction into a full disk = %v, want a DiskFullError", err)
	}
	q, err := s.Queued(ctx, "bravo")
	if err != nil || len(q) != stored {
		t.Fatalf("queued after the full disk: %d, %v; want the %d stored before it", len(q), err, stored)
	}
}

// mountTiny mounts a tmpfs of size under the test's temp dir, and skips
// the test where that cannot be done (not root, no mount namespace).
func mountTiny(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root; the disk-full path is not exercised")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs (%v); the disk-full path is not exercised", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
