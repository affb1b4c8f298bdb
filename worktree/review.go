package worktree

import (
	"context"
	"fmt"
	"strings"
)

// This file serves the workflows (DESIGN §9.3): the commit a review is
// computed at and its diff against the base branch. The merge of exactly
// that commit, keeping the agent's worktree and branch, is a landing
// (land.go).

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

// ReviewDiff is `git diff <base>...<commit>`: what commit changes since it
// left the base branch, cut at max bytes (a note says so).
func (m *Manager) ReviewDiff(ctx context.Context, commit string, max int) (string, error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return "", err
	}
	out, err := m.run(ctx, m.root, "diff", "--no-color", "--no-ext-diff", "refs/heads/"+base+"..."+commit, "--")
	if err != nil {
		return "", fmt.Errorf("diff %s...%s: %w", base, shortHash(commit), err)
	}
	if len(out) > max {
		cut := strings.LastIndexByte(out[:max], '\n')
		if cut < 0 {
			cut = max
		}
		out = out[:cut] + fmt.Sprintf("\n[diff cut at %d of %d bytes: run git diff %s...%s for the rest]\n", cut, len(out), base, shortHash(commit))
	}
	return out, nil
}
