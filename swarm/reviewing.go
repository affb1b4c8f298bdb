package swarm

import (
	"context"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/workflow"
	"github.com/swarmhq/swarm/worktree"
)

// reviewsOf lists the commits agent is asked to review now: the dev-review
// items in review whose reviewer it is. A session's read-only git tools
// read only these (DESIGN §13.3). A store that cannot say leaves the
// tools with nothing to read, and the session still runs.
func (s *Supervisor) reviewsOf(ctx context.Context, agent string) []engine.Review {
	var out []engine.Review
	base := ""
	for _, w := range s.cfg.Workflows {
		if w.Kind != workflow.DevReview || w.Reviewer != agent {
			continue
		}
		items, err := s.store.Items(ctx, w.Name)
		if err != nil {
			s.log.Warn("read the items to review", "agent", agent, "workflow", w.Name, "err", err)
			continue
		}
		for _, it := range items {
			if it.State != workflow.InReview || it.ReviewCommit == "" {
				continue
			}
			if base == "" {
				b, _, err := s.store.Meta(ctx, worktree.MetaBaseBranch)
				if err != nil || b == "" {
					s.log.Warn("read the base branch for a review", "agent", agent, "err", err)
					return nil
				}
				base = b
			}
			out = append(out, engine.Review{Item: it.ID, Dev: w.Dev, Commit: it.ReviewCommit, Base: base})
		}
	}
	return out
}
