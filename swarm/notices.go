package swarm

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/swarmhq/swarm/lifecycle"
)

// noticeBus fans notices out to the Notify callback and to watchers. It
// keeps notices in the order they were emitted; a slow watcher misses
// notices rather than stalling the agents.
type noticeBus struct {
	clock    Clock
	notify   func(lifecycle.Notice)
	mu       sync.Mutex // guards watchers and the order of notices
	watchers map[chan lifecycle.Notice]struct{}
	watching sync.WaitGroup // watch connections still sending
}

func (b *noticeBus) init(clock Clock, notify func(lifecycle.Notice)) {
	b.clock, b.notify = clock, notify
	b.watchers = map[chan lifecycle.Notice]struct{}{}
}

func (b *noticeBus) emit(n lifecycle.Notice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n.At.IsZero() {
		n.At = b.clock.Now()
	}
	if b.notify != nil {
		b.notify(n)
	}
	for ch := range b.watchers {
		select {
		case ch <- n:
		default: // a slow watcher misses notices rather than stalling agents
		}
	}
}

// watch returns a channel of notices until ctx ends or the bus closes.
func (b *noticeBus) watch(ctx context.Context) <-chan lifecycle.Notice {
	ch := make(chan lifecycle.Notice, 256)
	b.mu.Lock()
	b.watchers[ch] = struct{}{}
	b.mu.Unlock()
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		if _, ok := b.watchers[ch]; ok {
			delete(b.watchers, ch)
			close(ch)
		}
		b.mu.Unlock()
	})
	return ch
}

func (b *noticeBus) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.watchers)
}

func (b *noticeBus) closeWatchers() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.watchers {
		close(ch)
		delete(b.watchers, ch)
	}
}

// waitWatchers gives the watch connections up to d to send what their
// closed channels still hold: stopping the socket first would cut the last
// notices, "stopped" among them. A watcher that reads too slowly is cut.
func (b *noticeBus) waitWatchers(d time.Duration, log *slog.Logger) {
	done := make(chan struct{})
	go func() { b.watching.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		log.Warn("a watcher did not take the last notices in time")
	}
}
