package swarm

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/repo"
)

// stuckStore is a store whose transactions, once stuck, never commit: they
// wait until their context ends, as a PostgreSQL server that stopped
// answering makes them.
type stuckStore struct {
	mailbox.Store
	once    sync.Once
	entered chan struct{} // closed when the first transaction got stuck
}

func (s *stuckStore) InTx(ctx context.Context, fn func(mailbox.Tx) error) error {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return ctx.Err()
}

// TestStuckStoreCannotHangShutdown: the workflows service stopped while an
// item's move waits on a stuck store returns once the move's bookkeeping
// deadline passes; without one it would wait forever.
func TestStuckStoreCannotHangShutdown(t *testing.T) {
	toml := baseConfig + "[[agent]]\nname = \"dev\"\n[[agent]]\nname = \"tester\"\n" +
		"[[workflow]]\nname = \"qa\"\nkind = \"dev-qa\"\ndev = \"dev\"\nqa = \"tester\"\n"
	sup, st, cfg := bookkeepingSupervisor(t, toml)
	if _, err := StartItem(context.Background(), st, cfg, StartRequest{Workflow: "qa", Item: "F-1", Title: "login", Caller: identity.Operator()}); err != nil {
		t.Fatal(err)
	}
	stuck := &stuckStore{Store: st, entered: make(chan struct{})}
	sup.flow.d.Store = stuck // the item's begin is the look's first write

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sup.flow.run(ctx) }()
	select {
	case <-stuck.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the workflows service never wrote")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the workflows service did not return: its write waits on the stuck store without a deadline")
	}
}

// TestStuckStoreCannotHangARunnersStop: a runner's transition while the
// runner is being stopped still writes (it must record the stop), but on
// a stuck store it gives up at the bookkeeping deadline instead of holding
// the swarm's shutdown for ever.
func TestStuckStoreCannotHangARunnersStop(t *testing.T) {
	sup, st, _ := bookkeepingSupervisor(t, baseConfig+"[[agent]]\nname = \"dev\"\n")
	stuck := &stuckStore{Store: st, entered: make(chan struct{})}
	sup.store = stuck
	r := sup.runners["dev"]

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the runner is being stopped
	done := make(chan error, 1)
	go func() { done <- r.move(ctx, lifecycle.Start, lifecycle.Initializing, "start") }()
	<-stuck.entered
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("move on a stuck store = %v, want the bookkeeping deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner's transition did not return: its write waits on the stuck store without a deadline")
	}
}

// bookkeepingSupervisor is a supervisor over a real SQLite store with the
// given swarm.toml, and a bookkeeping deadline short enough for a test.
func bookkeepingSupervisor(t *testing.T, toml string) (*Supervisor, mailbox.Store, *config.Config) {
	t.Helper()
	old := bookkeepingTimeout
	t.Cleanup(func() { bookkeepingTimeout = old })
	bookkeepingTimeout = 50 * time.Millisecond
	root := t.TempDir()
	cfg, err := config.Parse([]byte(toml), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	st, err := sqlite.Open(context.Background(), l.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sup, err := New(Options{Config: cfg, Layout: l, Store: st,
		Engines:   func(config.Agent) (engine.Engine, error) { return &fakeEngine{name: "script"}, nil },
		Worktrees: &fakeWorktrees{root: filepath.Join(root, "wt")}, Prompts: &fakePrompts{}})
	if err != nil {
		t.Fatal(err)
	}
	return sup, st, cfg
}
