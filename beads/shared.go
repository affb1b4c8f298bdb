package beads

import (
	"context"
	"slices"

	"golang.org/x/sync/singleflight"
)

// Shared runs one `bd ready` at a time for all its callers: a caller that
// arrives while a call is running waits for that call's answer instead of
// starting another bd. Nothing is cached; a caller arriving after a call
// ended starts a new one.
//
// The supervisor makes one Shared for the swarm, over a Client in the repo
// root: the ready list is the same from every worktree.
type Shared struct {
	client *Client
	group  singleflight.Group

	// joined is called once a caller has joined the in-flight call; tests
	// use it to release the fake bd only when every caller is waiting.
	joined func()
}

// NewShared shares c's Ready calls.
func NewShared(c *Client) *Shared { return &Shared{client: c} }

// Client returns the client whose calls are shared.
func (s *Shared) Client() *Client { return s.client }

// Ready returns the ready issues, from the call in flight if there is one.
// A caller whose ctx ends stops waiting at once, but the shared bd runs on
// for the others, bounded by the client's timeout. The slice is the
// caller's own; the issues in it must be treated as read-only.
func (s *Shared) Ready(ctx context.Context) ([]Issue, error) {
	ch := s.group.DoChan("ready", func() (any, error) {
		// Not tied to the first caller's cancellation: the others still
		// want the answer.
		return s.client.Ready(context.WithoutCancel(ctx))
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
