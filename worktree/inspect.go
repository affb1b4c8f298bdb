package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Info is what Inspect found about an agent's worktree and branch.
type Info struct {
	Worktree
	Registered bool   // git lists a worktree at Path
	Exists     bool   // a directory is at Path
	Locked     bool   // the registered worktree is locked
	Head       string // the branch checked out there; "" when detached or unregistered
	HasBranch  bool   // swarm/<agent> exists
	// Elsewhere is the path of another worktree that has swarm/<agent>
	// checked out, if any.
	Elsewhere string
}

// Valid reports whether the agent has a working worktree at Path: registered,
// present, with its .git file.
func (i Info) Valid() bool {
	if !i.Registered || !i.Exists {
		return false
	}
	_, err := os.Lstat(filepath.Join(i.Path, ".git"))
	return err == nil
}

// Inspect reports the state of agent's worktree and branch without changing
// anything.
func (m *Manager) Inspect(ctx context.Context, agent string) (Info, error) {
	if err := checkAgent(agent); err != nil {
		return Info{}, err
	}
	return m.inspect(ctx, agent)
}

// lockAgent checks agent's name, takes the manager's lock and inspects the
// agent's worktree. The caller releases the lock with the returned func on
// every path.
func (m *Manager) lockAgent(ctx context.Context, agent string) (Info, func(), error) {
	if err := checkAgent(agent); err != nil {
		return Info{}, func() {}, err
	}
	m.mu.Lock()
	info, err := m.inspect(ctx, agent)
	return info, m.mu.Unlock, err
}

func (m *Manager) inspect(ctx context.Context, agent string) (Info, error) {
	entries, err := m.list(ctx)
	if err != nil {
		return Info{Worktree: Worktree{Agent: agent, Path: m.Path(agent), Branch: Branch(agent)}}, err
	}
	return m.inspectIn(ctx, agent, entries)
}

// inspectIn is inspect with the worktree list already read (under m.mu,
// with nothing changed since): one `git worktree list` serves every agent
// of a Recover instead of one each.
func (m *Manager) inspectIn(ctx context.Context, agent string, entries []entry) (Info, error) {
	info := listed(m.Path(agent), agent, entries)
	var err error
	info.HasBranch, err = m.ok(ctx, m.root, "rev-parse", "--verify", "-q", branchRef(agent)+"^{commit}")
	if err != nil {
		return info, err
	}
	return info, nil
}

// listed is what the worktree list says of agent's worktree at path, and
// whether it exists; HasBranch is left unknown (false).
func listed(path, agent string, entries []entry) Info {
	info := Info{Worktree: Worktree{Agent: agent, Path: path, Branch: Branch(agent)}}
	want := canon(info.Path)
	for _, e := range entries {
		switch {
		case canon(e.path) == want:
			info.Registered = true
			info.Locked = e.locked
			info.Head = strings.TrimPrefix(e.branch, "refs/heads/")
		case e.branch == branchRef(agent):
			info.Elsewhere = e.path
		}
	}
	if _, err := os.Lstat(info.Path); err == nil {
		info.Exists = true
	}
	return info
}

type entry struct {
	path   string
	branch string // refs/heads/..., empty when detached
	locked bool
}

// list parses `git worktree list --porcelain`.
func (m *Manager) list(ctx context.Context) ([]entry, error) {
	out, err := m.run(ctx, m.root, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var list []entry
	for _, block := range strings.Split(out, "\n\n") {
		var e entry
		for _, line := range strings.Split(block, "\n") {
			key, val, _ := strings.Cut(line, " ")
			switch key {
			case "worktree":
				e.path = unquote(val)
			case "branch":
				e.branch = val
			case "locked":
				e.locked = true
			}
		}
		if e.path != "" {
			list = append(list, e)
		}
	}
	return list, nil
}

// unquote undoes the C-style quoting newer git applies to unusual paths.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// canon resolves symlinks in the longest existing prefix of p, so paths
// git reports compare equal to the ones swarm builds (/tmp vs /private/tmp).
func canon(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(canon(parent), filepath.Base(p))
}
