package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// worktreeDir returns agent's worktree path after making sure it is a
// worktree: without its .git file, git run there would find the enclosing
// main worktree instead, and commit there.
func (m *Manager) worktreeDir(agent string) (string, error) {
	if err := checkAgent(agent); err != nil {
		return "", err
	}
	path := m.Path(agent)
	if _, err := os.Lstat(filepath.Join(path, ".git")); err != nil {
		return "", fmt.Errorf("%w: %s has no worktree at %s", ErrNoWorktree, agent, path)
	}
	return path, nil
}

// Lock locks agent's worktree with reason, so `git worktree prune` and
// `remove` leave it alone while the swarm runs. A previous lock is
// replaced, so the reason is current.
//
// It asks git directly rather than listing the worktrees first: every
// session start locks, and a list per agent, under the manager's lock,
// was most of a 50-agent restart.
func (m *Manager) Lock(ctx context.Context, agent, reason string) error {
	if err := checkAgent(agent); err != nil {
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	path := m.Path(agent)
	if done, err := m.lockOwn(ctx, agent, reason); done || err != nil {
		if err != nil {
			return fmt.Errorf("lock worktree %s: %w", agent, err)
		}
		return nil
	}
	lock := func() error {
		_, err := m.run(ctx, m.root, "worktree", "lock", "--reason", reason, path)
		return err
	}
	if lock() == nil {
		return nil
	}
	// Refused: find out why from the list (git's words depend on its
	// locale), replace an old lock, or say there is no worktree.
	info, err := m.inspect(ctx, agent)
	switch {
	case err != nil:
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	case !info.Registered:
		return fmt.Errorf("lock worktree %s: %w at %s", agent, ErrNoWorktree, info.Path)
	case info.Locked:
		if _, err := m.run(ctx, m.root, "worktree", "unlock", path); err != nil {
			return fmt.Errorf("lock worktree %s: %w", agent, err)
		}
	}
	if err := lock(); err != nil {
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	}
	return nil
}

// Unlock unlocks agent's worktree. An unlocked or missing worktree is not
// an error.
func (m *Manager) Unlock(ctx context.Context, agent string) error {
	if err := checkAgent(agent); err != nil {
		return fmt.Errorf("unlock worktree %s: %w", agent, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if done, err := m.unlockOwn(ctx, agent); done || err != nil {
		if err != nil {
			return fmt.Errorf("unlock worktree %s: %w", agent, err)
		}
		return nil
	}
	// As Lock: git first, the list only to explain a refusal.
	if _, err := m.run(ctx, m.root, "worktree", "unlock", m.Path(agent)); err == nil {
		return nil
	}
	info, err := m.inspect(ctx, agent)
	if err != nil {
		return fmt.Errorf("unlock worktree %s: %w", agent, err)
	}
	return m.unlock(ctx, info)
}

func (m *Manager) unlock(ctx context.Context, info Info) error {
	if !info.Registered || !info.Locked {
		return nil
	}
	if _, err := m.run(ctx, m.root, "worktree", "unlock", info.Path); err != nil {
		return fmt.Errorf("unlock worktree %s: %w", info.Agent, err)
	}
	return nil
}
