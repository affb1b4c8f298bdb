package worktree

import (
	"context"
	"fmt"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// Dirty reports whether agent's worktree has uncommitted changes, untracked
// files included.
func (m *Manager) Dirty(ctx context.Context, agent string) (bool, error) {
	path, err := m.worktreeDir(agent)
	if err != nil {
		return false, err
	}
	return m.dirty(ctx, path)
}

func (m *Manager) dirty(ctx context.Context, path string) (bool, error) {
	// No optional locks: an agent may be running git in there right now.
	res, err := m.runEnv(ctx, path, []string{"GIT_OPTIONAL_LOCKS=0"}, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return false, fmt.Errorf("status of %s: %w", path, err)
	}
	return len(strings.TrimSpace(string(res.Stdout))) > 0, nil
}

// AutoCommit commits everything in agent's worktree, untracked files
// included (ignored files are not), on swarm/<agent>, authored and committed
// as swarm/<agent> with the user's address or FallbackEmail. It reports
// whether it made a commit: a clean worktree is left alone. It first
// finishes what an interrupted run left half done in the worktree. It
// refuses, leaving the work where it is, a worktree that is not on
// swarm/<agent> (so work never lands on another branch), and work that
// looks like damage (ErrUnsafeAutoCommit): a nested repository, deletions
// of more than MaxAutoDeletePercent of the branch's files, any deletion in
// a worktree that was never completely checked out, any change in one
// being removed or whose branch an interrupted run already merged.
func (m *Manager) AutoCommit(ctx context.Context, agent, msg string) (bool, error) {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	if err != nil {
		return false, fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	var rec recoveries
	if _, err := m.recoverAgent(ctx, &info, recoverAll, &rec); err != nil {
		return false, fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	hash, err := m.autoCommit(ctx, agent, msg)
	return hash != "", err
}

// autoCommit returns the new commit, or "" when there was nothing to commit.
// The caller holds m.mu and has run recoverAgent.
func (m *Manager) autoCommit(ctx context.Context, agent, msg string) (string, error) {
	path, err := m.worktreeDir(agent)
	if err != nil {
		return "", err
	}
	h, err := readHead(path)
	if err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	if h.Ref != branchRef(agent) {
		return "", m.wrongBranch(agent, path, strings.TrimPrefix(h.Ref, "refs/heads/"))
	}
	chs, err := m.status(ctx, path, "all", false)
	if err != nil || len(chs) == 0 {
		return "", err
	}
	j, have, err := m.readJournal(agent)
	if err != nil {
		return "", err
	}
	if have {
		switch {
		case j.Merged:
			return "", fmt.Errorf("%w: an interrupted run already merged %s into %s, so the changes now in its worktree %s (%s) are not work to merge again; swarm committed nothing and left them there. Look with 'git -C %q status'; commit what you want to keep yourself, put the rest back (git -C %q restore .), then run again",
				ErrUnsafeAutoCommit, Branch(agent), j.Base, path, text.ListSome(changeList(chs), 10), path, path)
		case j.State == stateRemoving:
			return "", fmt.Errorf("%w: %s's worktree %s was being removed by an interrupted run, so its changes (%s) are not work; swarm committed nothing. Look with 'git -C %q status', then run again",
				ErrUnsafeAutoCommit, agent, path, text.ListSome(changeList(chs), 10), path)
		}
	}
	complete := populated(path) && !(have && j.State == statePopulating)
	if err := m.checkSave(ctx, agent, path, chs, complete); err != nil {
		return "", err
	}
	if _, err := m.run(ctx, path, "add", "-A"); err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	clean, err := m.ok(ctx, path, "diff", "--cached", "--quiet")
	if err != nil || clean {
		return "", err
	}
	// --no-verify: this is a safety snapshot of the agent's work; a failing
	// project hook must not be the reason work is lost at shutdown.
	env := m.identity(ctx, path, Branch(agent), Branch(agent))
	if _, err := m.runEnv(ctx, path, env, "commit", "--no-verify", "-q", "-m", msg); err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	hash, err := m.run(ctx, path, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	return hash, nil
}

func changeList(chs []change) []string {
	out := make([]string, len(chs))
	for i, c := range chs {
		out[i] = c.String()
	}
	return out
}
