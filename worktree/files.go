package worktree

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// This file answers which files a reservation's glob may match (the files
// tracked on a branch) and which files a session's commits changed (what
// the guard checks against teammates' exclusive reservations, DESIGN §14).

// TrackedFiles lists the files tracked at the tip of agent's branch, or of
// the base branch when agent is "" or has no branch yet, as paths from the
// repository root with / separators.
func (m *Manager) TrackedFiles(ctx context.Context, agent string) ([]string, error) {
	ref := ""
	if agent != "" {
		if _, ok, err := m.revParse(ctx, m.root, branchRef(agent)); err != nil {
			return nil, err
		} else if ok {
			ref = branchRef(agent)
		}
	}
	if ref == "" {
		base, err := m.BaseBranch(ctx)
		if err != nil {
			return nil, err
		}
		ref = "refs/heads/" + base
	}
	out, err := m.run(ctx, m.root, "ls-tree", "-r", "-z", "--name-only", "--full-tree", ref)
	if err != nil {
		return nil, fmt.Errorf("list the files of %s: %w", strings.TrimPrefix(ref, "refs/heads/"), err)
	}
	return splitZ(out), nil
}

// Committed lists, sorted, the files the session's own commits changed:
// those on the agent's branch since the guard was made, leaving out merge
// commits and commits the base branch has (a merge of the base brings
// teammates' work, not the session's). Nil when the branch did not move.
func (g *SessionGuard) Committed(ctx context.Context) ([]string, error) {
	ref := branchRef(g.agent)
	from := g.start.Refs[ref]
	if from == "" {
		from = g.BaseTip()
	}
	to, ok, err := g.m.revParse(ctx, g.m.root, ref)
	if err != nil || !ok || to == from || from == "" {
		return nil, err
	}
	args := []string{"log", "--no-merges", "-z", "--format=", "--name-only", "--no-renames", to, "^" + from}
	if base, ok, err := g.m.revParse(ctx, g.m.root, "refs/heads/"+g.base); err != nil {
		return nil, err
	} else if ok {
		args = append(args, "^"+base)
	}
	out, err := g.m.run(ctx, g.m.root, append(args, "--")...)
	if err != nil {
		return nil, fmt.Errorf("list the files %s's session committed: %w", g.agent, err)
	}
	files := splitZ(out)
	slices.Sort(files)
	return slices.Compact(files), nil
}

// splitZ splits git's -z output, dropping empty entries.
func splitZ(out string) []string {
	var files []string
	for f := range strings.SplitSeq(out, "\x00") {
		if f = strings.Trim(f, "\n"); f != "" {
			files = append(files, f)
		}
	}
	return files
}
