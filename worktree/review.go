package worktree

import (
	"context"
	"fmt"
)

// This file serves the workflows (DESIGN §9.3): the commit a review is
// computed at. Its diff against the base branch is in reviewdiff.go. The
// merge of exactly that commit, keeping the agent's worktree and branch,
// is a landing (land.go).

// Tip returns the commit swarm/<agent> points at.
func (m *Manager) Tip(ctx context.Context, agent string) (string, error) {
	if err := checkAgent(agent); err != nil {
		return "", err
	}
	tip, err := m.resolveRef(ctx, branchRef(agent))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", Branch(agent), err)
	}
	return tip, nil
}
