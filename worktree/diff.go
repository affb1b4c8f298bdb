package worktree

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoBase means no base branch is recorded yet: no agent has had a
// worktree, so there is nothing to compare.
var ErrNoBase = errors.New("no base branch recorded yet")

// FileChange is one file an agent changed.
type FileChange struct {
	Path    string `json:"path"`
	Status  string `json:"status"` // A added, M modified, D deleted, T type changed
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary"`
}

// Changes is an agent's work against the base branch: what its branch
// holds (committed), and what its worktree holds on top (uncommitted).
type Changes struct {
	Agent  string `json:"agent"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
	// Commits are the branch's commits not on the base branch, newest
	// first, "<short hash> <subject>".
	Commits []string `json:"commits"`
	// Files are what the branch changed since it left the base branch
	// (git diff <base>...swarm/<agent>).
	Files []FileChange `json:"files"`
	// Worktree is the agent's worktree, "" when it has none.
	Worktree string `json:"worktree"`
	// Uncommitted are tracked files changed in the worktree and not
	// committed (git diff HEAD there); Untracked are new files git does not
	// track yet. 'swarm down' commits both.
	Uncommitted []FileChange `json:"uncommitted"`
	Untracked   []string     `json:"untracked"`
}

// noPrograms are diff options that keep git from running programs a
// repository's config or attributes name (external diff drivers, textconv
// filters): an agent could have planted them.
var noPrograms = []string{"--no-ext-diff", "--no-textconv"}

// Changes reports agent's work against the recorded base branch. It only
// reads. An agent with no branch is an error naming it.
func (m *Manager) Changes(ctx context.Context, agent string) (Changes, error) {
	c := Changes{Agent: agent, Branch: Branch(agent), Commits: []string{}, Files: []FileChange{}, Uncommitted: []FileChange{}, Untracked: []string{}}
	info, base, err := m.diffable(ctx, agent)
	if err != nil {
		return c, err
	}
	c.Base = base
	if c.Commits, err = m.unmerged(ctx, base, agent); err != nil {
		return c, err
	}
	if c.Files, err = m.fileChanges(ctx, m.root, "refs/heads/"+base+"..."+branchRef(agent)); err != nil {
		return c, err
	}
	if !info.Valid() {
		return c, nil
	}
	c.Worktree = info.Path
	if c.Uncommitted, err = m.fileChanges(ctx, info.Path, "HEAD"); err != nil {
		return c, err
	}
	out, err := m.run(ctx, info.Path, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return c, fmt.Errorf("list untracked files of %s: %w", agent, err)
	}
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			c.Untracked = append(c.Untracked, p)
		}
	}
	return c, nil
}

// DiffText is git diff's own output of agent's work, with extra flags
// (--stat, --color=always): the branch against the base branch, or with
// uncommitted, the worktree against its HEAD ("" when it has no worktree).
func (m *Manager) DiffText(ctx context.Context, agent string, uncommitted bool, flags ...string) (string, error) {
	info, base, err := m.diffable(ctx, agent)
	if err != nil {
		return "", err
	}
	args := append(append([]string{"diff"}, noPrograms...), flags...)
	dir := m.root
	if uncommitted {
		if !info.Valid() {
			return "", nil
		}
		dir, args = info.Path, append(args, "HEAD", "--")
	} else {
		args = append(args, "refs/heads/"+base+"..."+branchRef(agent), "--")
	}
	out, err := m.run(ctx, dir, args...)
	if err != nil {
		return "", fmt.Errorf("diff %s: %w", Branch(agent), err)
	}
	return out, nil
}

// diffable checks that agent has a branch and the base branch is known.
func (m *Manager) diffable(ctx context.Context, agent string) (Info, string, error) {
	info, err := m.Inspect(ctx, agent)
	if err != nil {
		return info, "", err
	}
	base, ok, err := m.recordedBase(ctx)
	if err != nil {
		return info, "", err
	}
	if !ok || !info.HasBranch {
		why := fmt.Sprintf("%s has no branch yet (%s): it has not run", agent, Branch(agent))
		if !ok {
			return info, "", fmt.Errorf("%w: %s; 'swarm up' starts it", ErrNoBase, why)
		}
		return info, "", fmt.Errorf("%s; 'swarm up' starts it", why)
	}
	return info, base, nil
}

// fileChanges lists what git diff <rev> changes in dir, file by file.
func (m *Manager) fileChanges(ctx context.Context, dir, rev string) ([]FileChange, error) {
	common := append([]string{"diff", "--no-renames", "-z"}, noPrograms...)
	status, err := m.run(ctx, dir, append(common, "--name-status", rev, "--")...)
	if err != nil {
		return nil, fmt.Errorf("list changed files: %w", err)
	}
	counts, err := m.run(ctx, dir, append(common, "--numstat", rev, "--")...)
	if err != nil {
		return nil, fmt.Errorf("count changed lines: %w", err)
	}
	out := []FileChange{}
	at := map[string]int{}
	f := strings.Split(strings.TrimSuffix(status, "\x00"), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		at[f[i+1]] = len(out)
		out = append(out, FileChange{Path: f[i+1], Status: f[i][:1]})
	}
	for _, rec := range strings.Split(counts, "\x00") {
		parts := strings.SplitN(rec, "\t", 3)
		if len(parts) != 3 {
			continue
		}
		i, ok := at[parts[2]]
		if !ok {
			continue
		}
		if parts[0] == "-" {
			out[i].Binary = true
			continue
		}
		out[i].Added, _ = strconv.Atoi(parts[0])
		out[i].Deleted, _ = strconv.Atoi(parts[1])
	}
	return out, nil
}
