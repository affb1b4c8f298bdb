package worktree

import (
	"context"
	"regexp"
)

var hexHash = regexp.MustCompile(`^[0-9a-f]{4,64}$`)

// CommitExists reports whether the repository has the commit hash (full
// or abbreviated hex): the check behind a task_result's commit_hash. An
// ambiguous abbreviation counts as missing. Agents' branches share the
// repository's objects, so their commits are found from the root.
func (m *Manager) CommitExists(ctx context.Context, hash string) (bool, error) {
	if !hexHash.MatchString(hash) {
		return false, nil
	}
	_, ok, err := m.revParse(ctx, m.root, hash)
	return ok, err
}
