package worktree

import (
	"context"
	"maps"
	"sync"
	"unique"
)

// coalescer shares one run of a read among the callers that asked for it
// before it started: a caller joins the run waiting to start, else starts
// one, which waits for the run in progress to end first. What each caller
// gets was read after it asked, as if it had read it itself. The session
// guard snapshots this way: 500 agents starting at once made 500
// snapshots, each reading every agent's branch (and holding them), so the
// start was quadratic in the agents, in time and in memory.
type coalescer[T any] struct {
	mu      sync.Mutex
	pending *flight[T] // gathering callers, not started
	running *flight[T]
	joined  int // callers waiting on pending, for tests
}

type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// do returns a run of read that started after the call. The read runs
// without ctx's cancellation (others may be waiting on it); a caller whose
// ctx ends stops waiting.
func (c *coalescer[T]) do(ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	if f := c.pending; f != nil {
		c.joined++
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.val, f.err
		case <-ctx.Done():
			var zero T
			return zero, context.Cause(ctx)
		}
	}
	f := &flight[T]{done: make(chan struct{})}
	c.pending = f
	prev := c.running
	c.mu.Unlock()
	if prev != nil {
		<-prev.done
	}
	c.mu.Lock()
	c.pending, c.running, c.joined = nil, f, 0
	c.mu.Unlock()
	f.val, f.err = read(context.WithoutCancel(ctx))
	close(f.done)
	c.mu.Lock()
	if c.running == f {
		c.running = nil
	}
	c.mu.Unlock()
	return f.val, f.err
}

// waiting is how many callers wait to share the next run.
func (c *coalescer[T]) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return 0
	}
	return c.joined + 1
}

// sharedSnapshot is Snapshot shared among the guards asking at once (see
// coalescer). A snapshot is never changed once taken, so sharing it is
// safe.
func (m *Manager) sharedSnapshot(ctx context.Context) (*Snapshot, error) {
	return m.snaps.do(ctx, m.Snapshot)
}

// refsIntern shares guarded-ref maps among snapshots: each agent keeps its
// own baseline snapshot, so 500 agents held 500 maps of 500 branches.
// Snapshots that saw the same refs (most, while nothing is committed) get
// one map; the strings of the others are interned. A snapshot's Refs is
// never changed once taken.
type refsIntern struct {
	mu   sync.Mutex
	last map[string]string
}

func (r *refsIntern) intern(refs map[string]string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && maps.Equal(refs, r.last) {
		return r.last
	}
	out := make(map[string]string, len(refs))
	for k, v := range refs {
		out[unique.Make(k).Value()] = unique.Make(v).Value()
	}
	r.last = out
	return out
}
