package beads

import (
	"context"
	"errors"
	"slices"
	"sync"

	"golang.org/x/sync/singleflight"
)

// Shared runs one `bd ready` (and one `bd list`) at a time for all its
// callers: a caller that arrives while a call is running waits for that
// call's answer instead of starting another bd. Nothing is cached; a
// caller arriving after a call ended starts a new one.
//
// The supervisor makes one Shared for the swarm, over a Client in the repo
// root: the ready list is the same from every worktree.
type Shared struct {
	client *Client
	group  singleflight.Group

	// life ends when the owner closes Shared: the call in flight, which no
	// single caller owns, is cancelled with it and waited for.
	life   context.Context
	close  context.CancelFunc
	mu     sync.Mutex // guards closed and the start of a call
	closed bool
	calls  sync.WaitGroup

	// joined is called once a caller has joined the in-flight call; tests
	// use it to release the fake bd only when every caller is waiting.
	joined func()
}

// NewShared shares c's Ready calls. Close it to stop a call in flight.
func NewShared(c *Client) *Shared {
	life, cancel := context.WithCancel(context.Background())
	return &Shared{client: c, life: life, close: cancel}
}

// Close cancels the bd call in flight, if any, and waits for it to end (its
// process group is killed). Ready calls after Close fail at once.
func (s *Shared) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.close()
	s.calls.Wait()
}

var errClosed = errors.New("bd: shared calls are closed")

// Client returns the client whose calls are shared.
func (s *Shared) Client() *Client { return s.client }

// Ready returns the ready issues, from the call in flight if there is one.
// A caller whose ctx ends stops waiting at once, but the shared bd runs on
// for the others, bounded by the client's timeout. The slice is the
// caller's own; the issues in it must be treated as read-only.
func (s *Shared) Ready(ctx context.Context) ([]Issue, error) {
	return s.do(ctx, "ready", s.client.Ready)
}

// List returns every open issue with its dependencies (`bd list --json`,
// what the dag, intelligent-batching and tree strategies plan from),
// shared the same way as Ready.
func (s *Shared) List(ctx context.Context) ([]Issue, error) {
	return s.do(ctx, "list", s.client.List)
}

// do runs call once for every caller that arrives while it runs.
func (s *Shared) do(ctx context.Context, key string, call func(context.Context) ([]Issue, error)) ([]Issue, error) {
	// Checked before joining too: singleflight forgets a call only after
	// its function returned, so a caller right after Close could join the
	// call Close cancelled and get its "context canceled".
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	ch := s.group.DoChan(key, func() (any, error) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		s.calls.Add(1)
		s.mu.Unlock()
		defer s.calls.Done()
		// Not tied to the first caller's cancellation: the others still
		// want the answer. It ends with Shared's life instead.
		callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(s.life, cancel)
		defer stop()
		return call(callCtx)
	})
	if s.joined != nil {
		s.joined()
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return slices.Clone(r.Val.([]Issue)), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
