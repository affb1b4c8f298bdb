package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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

// addNew creates the worktree of an agent that has none, and no trace of
// one (no directory, no journal entry), without reading the worktree list
// first: git refuses the add itself when its path is registered or its
// branch is checked out elsewhere, and made is then false, for register's
// full look (the list, the repairs, the errors that say what to do) to
// take over. Journaled first, as register does.
func (m *Manager) addNew(ctx context.Context, agent, base string) (Worktree, bool) {
	wt := Worktree{Agent: agent, Path: m.Path(agent), Branch: Branch(agent)}
	if _, err := os.Lstat(wt.Path); !errors.Is(err, fs.ErrNotExist) {
		return wt, false
	}
	if _, have, err := m.readJournal(agent); err != nil || have {
		return wt, false
	}
	// git answers before anything is made (no git: nothing is created).
	if err := m.exclude(ctx, m.dir); err != nil {
		return wt, false
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return wt, false
	}
	if err := m.writeJournal(ctx, journal{Agent: agent, State: statePopulating, Op: opEnsure, Base: base}); err != nil {
		return wt, false
	}
	if err := m.addWorktree(ctx, agent, base); err != nil {
		return wt, false
	}
	return wt, true
}

// addWorktree registers agent's worktree without a checkout. A new
// agent's branch is made with it; one that exists already (its worktree
// was removed) makes -b fail, before git creates anything, and the branch
// is checked out as it is: one git run fewer for every new agent than
// asking first.
func (m *Manager) addWorktree(ctx context.Context, agent, base string) error {
	path, branch := m.Path(agent), Branch(agent)
	newBranch := true
	_, err := m.run(ctx, m.root, "worktree", "add", "--no-checkout", "-b", branch, path, "refs/heads/"+base)
	if err != nil {
		if has, herr := m.ok(ctx, m.root, "rev-parse", "--verify", "-q", branchRef(agent)+"^{commit}"); herr == nil && has {
			newBranch = false
			_, err = m.run(ctx, m.root, "worktree", "add", "--no-checkout", path, branch)
		}
	}
	if err == nil {
		slog.Debug("created worktree", "agent", agent, "path", path, "branch", branch, "new_branch", newBranch)
	}
	return err
}
