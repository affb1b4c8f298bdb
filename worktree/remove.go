package worktree

import (
	"context"
	"fmt"
)

// Remove removes agent's worktree and keeps its branch, so nothing
// committed is lost and a later Ensure checks the branch out again. It
// refuses a worktree with uncommitted changes (AutoCommit first), and one
// holding files git ignores unless Options.DeleteIgnored is set. A missing
// worktree is not an error. It first finishes what an interrupted run left
// half done (logged).
func (m *Manager) Remove(ctx context.Context, agent string) error {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", agent, err)
	}
	var rec recoveries
	r, err := m.recoverAgent(ctx, &info, recoverAll, &rec)
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", agent, err)
	}
	if info.Valid() {
		dirty, err := m.dirty(ctx, info.Path)
		if err != nil {
			return err
		}
		if dirty {
			return fmt.Errorf("%w: %s's worktree %s; commit them first (swarm down auto-commits them)", ErrDirty, agent, info.Path)
		}
	}
	if _, err := m.checkIgnored(ctx, info, "removed"); err != nil {
		return err
	}
	j := journal{Agent: agent, Op: opRemove}
	if r.have {
		j = r.j
	}
	if err := m.removeJournaled(ctx, info, j, false); err != nil {
		return err
	}
	if j.Merged {
		// Keep the record that the branch is merged, for the swarm down
		// that deletes it.
		_, err = m.setState(ctx, j, stateRemoved)
		return err
	}
	return m.clearJournal(agent)
}

// removeJournaled removes the worktree (removeWorktree) between the
// journal states removing and removed.
func (m *Manager) removeJournaled(ctx context.Context, info Info, j journal, force bool) error {
	if !info.Registered {
		return nil
	}
	j, err := m.setState(ctx, j, stateRemoving)
	if err != nil {
		return err
	}
	if err := m.removeWorktree(ctx, info, force); err != nil {
		return err
	}
	_, err = m.setState(ctx, j, stateRemoved)
	return err
}

// removeWorktree unregisters and deletes agent's worktree; force discards
// uncommitted changes. A worktree whose .git is gone is pruned, and what is
// left of it moved aside to the orphans directory.
func (m *Manager) removeWorktree(ctx context.Context, info Info, force bool) error {
	if !info.Registered {
		// Not a worktree: whatever is there is left to Ensure, which moves
		// a directory aside and refuses anything else.
		return nil
	}
	if err := m.unlock(ctx, info); err != nil {
		return err
	}
	if !info.Valid() {
		if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
			return fmt.Errorf("remove worktree %s: %w", info.Agent, err)
		}
		if info.Exists {
			if _, err := m.moveAside(ctx, info.Agent, info.Path); err != nil {
				return fmt.Errorf("remove worktree %s: %w", info.Agent, err)
			}
		}
		return nil
	}
	args := []string{"worktree", "remove", info.Path}
	if force {
		args = []string{"worktree", "remove", "--force", info.Path}
	}
	if _, err := m.run(ctx, m.root, args...); err != nil {
		return fmt.Errorf("remove worktree %s: %w", info.Agent, err)
	}
	return nil
}
