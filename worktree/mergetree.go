package worktree

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/proc"
)

// mergeTreeSupported refuses a git without `merge-tree --write-tree`.
func (m *Manager) mergeTreeSupported(ctx context.Context) error {
	major, minor, out, err := m.gitVersion(ctx)
	if err != nil {
		return err
	}
	if major < 2 || major == 2 && minor < 38 {
		return fmt.Errorf("%w: landing a commit needs git 2.38 or newer (git merge-tree --write-tree), and this is %s; update git, or merge with 'swarm down --merge'", ErrGitTooOld, out)
	}
	return nil
}

// mergeTree builds the merge of ours and theirs in memory: the tree, or
// the conflicted files.
func (m *Manager) mergeTree(ctx context.Context, ours, theirs string) (string, []string, error) {
	res, err := m.runEnv(ctx, m.root, nil, "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, theirs)
	var ee *proc.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode == 1) {
		return "", nil, fmt.Errorf("merge %s into %s: %w", text.Short(theirs, 12), text.Short(ours, 12), err)
	}
	parts := strings.Split(strings.TrimRight(string(res.Stdout), "\x00"), "\x00")
	tree := strings.TrimSpace(parts[0])
	var files []string
	for _, f := range parts[1:] {
		if f != "" {
			files = append(files, f)
		}
	}
	if err != nil && len(files) == 0 {
		return "", nil, fmt.Errorf("merge %s into %s: %w", text.Short(theirs, 12), text.Short(ours, 12), err)
	}
	return tree, files, nil
}

// runStdin2 runs git in the main checkout with extra environment and
// stdin, returning its trimmed stdout.
func (m *Manager) runStdin2(ctx context.Context, extra []string, stdin string, args ...string) (string, error) {
	res, err := proc.Run(ctx, proc.Spec{Dir: m.root, Env: m.env(extra...), Stdin: []byte(stdin), Pass: m.pass}, "git", safeArgs(args)...)
	if err != nil {
		return "", gitError(args, err)
	}
	return strings.TrimRight(string(res.Stdout), "\n"), nil
}
