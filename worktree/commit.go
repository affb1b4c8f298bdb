package worktree

import (
	"context"
	"regexp"
	"sync"
)

// hexHash is compiled on first use: its {4,64} unrolls into ~45 KB that
// every command would allocate at start-up (internal/deptest's budget).
var hexHash = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-f]{4,64}$`)
})

// CommitExists reports whether the repository has the commit hash (full
// or abbreviated hex): the check behind a task_result's commit_hash. An
// ambiguous abbreviation counts as missing. Agents' branches share the
// repository's objects, so their commits are found from the root.
func (m *Manager) CommitExists(ctx context.Context, hash string) (bool, error) {
	if !hexHash().MatchString(hash) {
		return false, nil
	}
	_, ok, err := m.revParse(ctx, m.root, hash)
	return ok, err
}
