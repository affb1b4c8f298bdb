package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// exclude makes sure git ignores dir when it lies inside the main worktree:
// a nested worktree would otherwise show as untracked, and a `git add -A`
// there would add it as an embedded repository.
func (m *Manager) exclude(ctx context.Context, dir string) error {
	if m.excluded[dir] {
		return nil // checked under the lock already: spare two git runs
	}
	if err := m.excludeOnce(ctx, dir); err != nil {
		return err
	}
	if m.excluded == nil {
		m.excluded = map[string]bool{}
	}
	m.excluded[dir] = true
	return nil
}

func (m *Manager) excludeOnce(ctx context.Context, dir string) error {
	top, err := m.run(ctx, m.root, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(canon(top), canon(dir))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil
	}
	rel = filepath.ToSlash(rel)
	ignored, err := m.ok(ctx, top, "check-ignore", "-q", rel+"/")
	if err != nil || ignored {
		return err
	}
	common, err := m.run(ctx, top, "rev-parse", "--git-common-dir")
	if err != nil {
		return err
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(top, common)
	}
	return AddExclude(filepath.Join(common, "info", "exclude"), "/"+rel+"/", "swarm: agents' worktrees")
}

// AddExclude appends pattern, under a comment line, to the git exclude
// file at path, unless the pattern (with or without its slashes) is
// already there. swarm init and the worktree manager share it.
func AddExclude(path, pattern, comment string) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, l := range strings.Split(string(data), "\n") {
		switch strings.TrimSpace(l) {
		case pattern, strings.TrimPrefix(pattern, "/"), strings.TrimSuffix(pattern, "/"), strings.Trim(pattern, "/"):
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	prefix := ""
	if len(data) > 0 && data[len(data)-1] != '\n' {
		prefix = "\n"
	}
	if _, err := fmt.Fprintf(f, "%s# %s\n%s\n", prefix, comment, pattern); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
