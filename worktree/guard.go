package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FindingKind names what a SessionGuard found.
type FindingKind string

const (
	// FindingLeftBranch: the worktree is no longer on swarm/<agent>
	// (git switch -c other, git checkout --detach, or its .git is gone).
	FindingLeftBranch FindingKind = "left_branch"
	// FindingBaseCommits: the base branch gained commits authored
	// swarm/<agent> during the session (git -C <root> commit).
	FindingBaseCommits FindingKind = "base_commits"
)

// Finding is one breach of base-branch protection.
type Finding struct {
	Kind  FindingKind
	Agent string
	// Message is one line for the operator: what happened and what to do.
	Message string
	// Head is where the worktree is now (left_branch), like "branch other"
	// or "a detached HEAD at 1a2b3c4".
	Head string
	// Commits are the offending base commits (base_commits), newest first,
	// "<short hash> <subject>".
	Commits []string
}

func (f Finding) String() string { return f.Message }

// GuardError is a session that broke base-branch protection.
type GuardError struct {
	Agent    string
	Findings []Finding
}

func (e *GuardError) Error() string {
	msgs := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		msgs[i] = f.Message
	}
	return "base-branch protection: " + strings.Join(msgs, "; ")
}

// SessionGuard holds what a session started from: the base branch's tip and
// the worktree's branch.
type SessionGuard struct {
	m       *Manager
	agent   string
	path    string
	base    string
	baseTip string
}

// Guard records the base tip before one of agent's sessions. It fails when
// the worktree is missing or already off swarm/<agent> (Ensure checks that
// too): a session must not start there.
func (m *Manager) Guard(ctx context.Context, agent string) (*SessionGuard, error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return nil, err
	}
	path, err := m.worktreeDir(agent)
	if err != nil {
		return nil, err
	}
	h, err := readHead(path)
	if err != nil {
		return nil, fmt.Errorf("guard %s: %w", agent, err)
	}
	if h.Ref != branchRef(agent) {
		return nil, m.wrongBranch(agent, path, strings.TrimPrefix(h.Ref, "refs/heads/"))
	}
	tip, ok, err := refHash(m.root, "refs/heads/"+base)
	if err != nil {
		return nil, fmt.Errorf("guard %s: %w", agent, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrBaseMissing, base)
	}
	return &SessionGuard{m: m, agent: agent, path: path, base: base, baseTip: tip}, nil
}

// BaseTip is the base branch's commit when the guard was made.
func (g *SessionGuard) BaseTip() string { return g.baseTip }

// Check reports, after the session, whether the worktree left swarm/<agent>
// and whether the base branch gained commits authored swarm/<agent>. No
// findings means the session kept to its branch. The error is for failing
// to look, not for what was found.
func (g *SessionGuard) Check(ctx context.Context) ([]Finding, error) {
	var found []Finding
	branch := Branch(g.agent)
	if _, err := os.Lstat(filepath.Join(g.path, ".git")); err != nil {
		found = append(found, Finding{
			Kind: FindingLeftBranch, Agent: g.agent, Head: "no worktree",
			Message: fmt.Sprintf("%s's worktree %s is gone; it is recreated from %s at the next session", g.agent, g.path, branch),
		})
	} else {
		h, err := readHead(g.path)
		if err != nil {
			return nil, fmt.Errorf("check %s's worktree: %w", g.agent, err)
		}
		if h.Ref != branchRef(g.agent) {
			found = append(found, Finding{
				Kind: FindingLeftBranch, Agent: g.agent, Head: h.describe(),
				Message: fmt.Sprintf("%s left its branch: its worktree %s is on %s, not %s; save that work and run 'git -C %q switch %s'", g.agent, g.path, h.describe(), branch, g.path, branch),
			})
		}
	}
	tip, ok, err := refHash(g.m.root, "refs/heads/"+g.base)
	if err != nil {
		return nil, fmt.Errorf("check the base branch: %w", err)
	}
	if !ok {
		return found, fmt.Errorf("%w: %s disappeared during %s's session", ErrBaseMissing, g.base, g.agent)
	}
	if tip == g.baseTip {
		return found, nil
	}
	commits, err := g.authoredOnBase(ctx, tip)
	if err != nil {
		return nil, err
	}
	if len(commits) > 0 {
		found = append(found, Finding{
			Kind: FindingBaseCommits, Agent: g.agent, Commits: commits,
			Message: fmt.Sprintf("%s committed on the base branch %s during its session (%s); agents commit only on %s. Review them on %s: keep them or revert them", g.agent, g.base, strings.Join(commits, "; "), branch, g.base),
		})
	}
	return found, nil
}

// Err is Check as an error: nil, a *GuardError, or the failure to check.
func (g *SessionGuard) Err(ctx context.Context) error {
	found, err := g.Check(ctx)
	if len(found) == 0 {
		return err
	}
	ge := &GuardError{Agent: g.agent, Findings: found}
	if err != nil {
		return errors.Join(ge, err)
	}
	return ge
}

// authoredOnBase lists the commits reachable from tip but not from the
// recorded tip whose author is swarm/<agent>. The range query runs the git
// CLI: it needs git's exact a..b semantics across merges, and it runs only
// when the base moved.
func (g *SessionGuard) authoredOnBase(ctx context.Context, tip string) ([]string, error) {
	out, err := g.m.run(ctx, g.m.root, "log", "--no-decorate", "--format=%an%x00%h %s", tip, "^"+g.baseTip, "--")
	if err != nil {
		return nil, fmt.Errorf("check the base branch: %w", err)
	}
	var commits []string
	for _, line := range strings.Split(out, "\n") {
		author, c, ok := strings.Cut(line, "\x00")
		if ok && author == Branch(g.agent) {
			commits = append(commits, c)
		}
	}
	return commits, nil
}
