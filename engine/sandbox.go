package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sandbox confines the file tools to one directory tree, the worktree.
//
// Every path is resolved the way the kernel would follow it: the deepest
// ancestor that exists is passed through filepath.EvalSymlinks and the
// not-yet-existing rest is joined back on, so a symlink anywhere on the way
// (the file itself or any parent) is judged by where it really points.
// What remains is a time-of-check race: a process that swaps a directory for
// a symlink between the check and the use wins. Only the agent's own bash
// tool could do that, and bash already runs with the user's rights.
type sandbox struct {
	root string // absolute, symlinks resolved
	raw  string // absolute, as configured (absolute paths may use either)
}

func newSandbox(dir string) (*sandbox, error) {
	if dir == "" {
		return nil, errors.New("session has no worktree")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("worktree %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("worktree %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("worktree %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("worktree %s is not a directory", dir)
	}
	return &sandbox{root: real, raw: filepath.Clean(abs)}, nil
}

// resolve returns the real absolute path that p names, or an error that
// tells the model why the path is refused. p may be relative to the
// worktree or absolute inside it; "" means the worktree itself.
func (sb *sandbox) resolve(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	var cand string
	switch {
	case p == "":
		cand = sb.root
	case filepath.IsAbs(p):
		cand = filepath.Clean(p)
		// An absolute path may be written against the worktree as
		// configured or as resolved; both name the same tree.
		if rel, ok := within(sb.raw, cand); ok {
			cand = filepath.Join(sb.root, rel)
		} else if _, ok := within(sb.root, cand); !ok {
			return "", fmt.Errorf("path %q is outside the worktree (%s): use a path relative to the worktree root", p, sb.raw)
		}
	default:
		cand = filepath.Join(sb.root, p)
		if _, ok := within(sb.root, cand); !ok {
			return "", fmt.Errorf("path %q leaves the worktree through '..': use a path inside the worktree, relative to its root", p)
		}
	}

	// Walk up to the deepest ancestor that exists (Lstat: a dangling
	// symlink exists and must be judged, not skipped).
	cur, rest := cand, []string(nil)
	for {
		if _, err := os.Lstat(cur); err == nil {
			break
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
	real, err := filepath.EvalSymlinks(cur)
	if err != nil {
		return "", fmt.Errorf("path %q: cannot resolve %s (a symlink whose target is missing?): file tools only follow symlinks that stay inside the worktree", p, sb.rel(cur))
	}
	for i := len(rest) - 1; i >= 0; i-- {
		real = filepath.Join(real, rest[i])
	}
	if _, ok := within(sb.root, real); !ok {
		return "", fmt.Errorf("path %q resolves through a symlink to %s, outside the worktree: file tools only work inside the worktree", p, real)
	}
	return real, nil
}

// rel shows a resolved path relative to the worktree root, for messages.
func (sb *sandbox) rel(abs string) string {
	if r, ok := within(sb.root, abs); ok {
		return r
	}
	return abs
}

// within reports whether p is root or below it, and p relative to root.
func within(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}
