package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ownAdmin finds agent's worktree from its own files alone: the .git file
// at its path names its admin directory under .git/worktrees, whose gitdir
// file points back at the path, and whose HEAD is the agent's branch. It
// answers only for a worktree that is checked out, registered where swarm
// put it and on its branch (ok false otherwise: the caller asks git). Git
// keeps a branch in one worktree at a time, so such a worktree cannot have
// its branch checked out elsewhere.
//
// `git worktree list` (and `git worktree lock`) read every worktree's
// admin directory: one per agent made `swarm up` quadratic in the agents,
// under the manager's lock (500 agents: about 25 ms of CPU each, twice).
func (m *Manager) ownAdmin(ctx context.Context, agent string) (gitdir string, ok bool) {
	path := m.Path(agent)
	gitdir, ok = linkedGitDir(path)
	if !ok {
		return "", false
	}
	back, err := os.ReadFile(filepath.Join(gitdir, "gitdir"))
	if err != nil {
		return "", false
	}
	wt := strings.TrimSpace(string(back))
	if !filepath.IsAbs(wt) {
		wt = filepath.Join(gitdir, wt)
	}
	if filepath.Base(wt) != ".git" || canon(filepath.Dir(wt)) != canon(path) {
		return "", false
	}
	// Registered in this repository: the admin directory is one of its
	// .git/worktrees entries.
	common, err := m.commonDir(ctx)
	if err != nil || canon(filepath.Dir(gitdir)) != canon(filepath.Join(common, "worktrees")) {
		return "", false
	}
	head, err := os.ReadFile(filepath.Join(gitdir, "HEAD"))
	if err != nil || strings.TrimSpace(string(head)) != "ref: "+branchRef(agent) {
		return "", false
	}
	return gitdir, true
}

// ownInfo is Info for a worktree ownAdmin vouches for, read from its own
// admin directory: the register step's look without `git worktree list`.
func (m *Manager) ownInfo(ctx context.Context, agent string) (Info, bool) {
	gitdir, ok := m.ownAdmin(ctx, agent)
	if !ok {
		return Info{}, false
	}
	info := Info{Worktree: Worktree{Agent: agent, Path: m.Path(agent), Branch: Branch(agent)},
		Registered: true, Exists: true, Head: Branch(agent), HasBranch: true}
	_, err := os.Lstat(filepath.Join(gitdir, "locked"))
	info.Locked = err == nil
	return info, true
}

// lockOwn locks agent's worktree as `git worktree lock --reason` does (its
// admin directory's locked file holds the reason), without git reading
// every worktree to find it. done is false when ownAdmin does not vouch for
// the worktree or it is locked already: then git decides.
func (m *Manager) lockOwn(ctx context.Context, agent, reason string) (done bool, err error) {
	gitdir, ok := m.ownAdmin(ctx, agent)
	if !ok {
		return false, nil
	}
	f, err := os.OpenFile(filepath.Join(gitdir, "locked"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := fmt.Fprintln(f, reason); err != nil {
		f.Close()
		return true, err
	}
	return true, f.Close()
}

// unlockOwn is `git worktree unlock` for a worktree ownAdmin vouches for.
// done is false when git should decide (not vouched for, or not locked).
func (m *Manager) unlockOwn(ctx context.Context, agent string) (done bool, err error) {
	gitdir, ok := m.ownAdmin(ctx, agent)
	if !ok {
		return false, nil
	}
	err = os.Remove(filepath.Join(gitdir, "locked"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
