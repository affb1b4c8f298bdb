package worktree

import (
	"context"
	"errors"
	"fmt"
)

// This file serves the workflows (DESIGN §9.3): the commit a review is
// computed at and the merge of exactly that commit, keeping the agent's
// worktree and branch. The review's diff is in reviewdiff.go.

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

// MergeCommit merges commit, which must be on swarm/<agent>, into the base
// branch with a merge commit whose subject is subject, and returns the
// merge commit. The agent's worktree and branch stay. It refuses while the
// main checkout is off the base branch or dirty (ErrNotOnBase,
// ErrBaseDirty), and a conflict is aborted and returned as
// *ConflictError with nothing changed. A commit already on the base branch
// merges nothing and returns "".
func (m *Manager) MergeCommit(ctx context.Context, agent, commit, subject string) (string, error) {
	if err := checkAgent(agent); err != nil {
		return "", err
	}
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkBase(ctx, base); err != nil {
		return "", err
	}
	if on, err := m.ok(ctx, m.root, "merge-base", "--is-ancestor", commit, branchRef(agent)); err != nil || !on {
		if err == nil {
			err = fmt.Errorf("commit %s is not on %s (was the branch reset?); merge it by hand or start the item again", shortHash(commit), Branch(agent))
		}
		return "", err
	}
	if merged, err := m.ok(ctx, m.root, "merge-base", "--is-ancestor", commit, "refs/heads/"+base); err != nil || merged {
		return "", err
	}
	before, err := m.resolveRef(ctx, "refs/heads/"+base)
	if err != nil {
		return "", err
	}
	env := m.identity(ctx, m.root, "", "")
	if _, err := m.runEnv(ctx, m.root, env, "merge", "--no-ff", "--no-edit", "-m", subject, commit); err != nil {
		files, ferr := m.conflicted(ctx)
		if merging, _ := m.ok(ctx, m.root, "rev-parse", "-q", "--verify", "MERGE_HEAD"); merging {
			if _, aerr := m.run(ctx, m.root, "merge", "--abort"); aerr != nil {
				return "", errors.Join(err, fmt.Errorf("'git merge --abort' failed too (%w); run it yourself in %s", aerr, m.root))
			}
		}
		if ferr == nil && len(files) > 0 {
			return "", &ConflictError{Agent: agent, Branch: Branch(agent), Base: base, Files: files}
		}
		return "", refused("merge", agent, base, err)
	}
	after, err := m.run(ctx, m.root, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	m.recordMove(ctx, "refs/heads/"+base, before, after)
	return after, nil
}
