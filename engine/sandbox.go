package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// sandbox confines the file tools to one directory tree, the worktree.
//
// Confinement has two layers. resolve checks a path the way the kernel
// would follow it: the deepest ancestor that exists is passed through
// filepath.EvalSymlinks and the not-yet-existing rest is joined back on, so
// a symlink anywhere on the way (the file itself or any parent) is judged by
// where it really points, and a refusal can say which rule the path broke.
// That check alone is a time-of-check race: a symlink swapped in after it
// (by the agent's own bash, or any process) wins, and in tests did dozens
// to hundreds of times in 2,000 writes. So every use then goes through dir,
// an os.Root opened on the worktree: each component is opened relative to
// the descriptor of the one before, and a symlink that leads out is
// refused at the moment of use, whatever was checked before.
type sandbox struct {
	root string   // absolute, symlinks resolved
	raw  string   // absolute, as configured (absolute paths may use either)
	dir  *os.Root // the worktree, opened once so that moving it cannot redirect us
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
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("worktree %s: %w", dir, err)
	}
	return &sandbox{root: real, raw: filepath.Clean(abs), dir: root}, nil
}

// close releases the worktree's descriptor.
func (sb *sandbox) close() error { return sb.dir.Close() }

// resolve returns the real absolute path that p names, or an error that
// tells the model why the path is refused. p may be relative to the
// worktree or absolute inside it; "" means the worktree itself.
//
// The result is only a check: open it through name and sb.dir, never by
// its absolute path, or the race described on sandbox comes back.
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

// name checks p with resolve and returns it relative to the worktree, the
// form sb.dir opens; "." is the worktree itself. Because resolve followed
// every symlink, the name normally has none: os.Root refuses absolute
// symlinks even when they point back inside, and this keeps such paths
// working.
func (sb *sandbox) name(p string) (string, error) {
	real, err := sb.resolve(p)
	if err != nil {
		return "", err
	}
	rel, ok := within(sb.root, real)
	if !ok { // resolve promises otherwise; refuse rather than trust it
		return "", fmt.Errorf("path %q resolves to %s, outside the worktree: file tools only work inside the worktree", p, real)
	}
	return rel, nil
}

// useError explains a failure to use p through sb.dir. The usual cause of
// a refusal there (an escape, or ELOOP or ENOTDIR from a component that is
// suddenly a symlink) is a symlink swapped in after resolve passed the
// path, so the path is judged again first: if it now leads out, the model
// gets the same explanation as for one that led out from the start. Other
// errors still resolve and are reported as they are.
func (sb *sandbox) useError(op, p string, err error) error {
	if _, rerr := sb.resolve(p); rerr != nil {
		return rerr
	}
	if isEscape(err) {
		return fmt.Errorf("%s %s: a symlink on the path led outside the worktree while the tool ran: file tools only work inside the worktree", op, p)
	}
	return pathError(op, p, err)
}

// isEscape reports whether err is os.Root refusing a path that leads out
// of it. os keeps that error unexported, so its text is the only handle.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// walk calls fn for name and, when it is a directory, everything below it
// in lexical order, opening each directory through sb.dir. It does not
// follow symlinks. fn gets a nil DirEntry for name itself, may return
// fs.SkipDir to skip a directory (or, for any other entry, nothing) and
// fs.SkipAll to stop; walk returns fs.SkipAll as nil. An error reading
// name itself is returned; directories below that cannot be read are
// skipped, as the tools skip what they cannot read.
//
// os.Root.FS with fs.WalkDir would do much the same, but io/fs refuses
// names that are not valid UTF-8, and a worktree may hold such files.
func (sb *sandbox) walk(name string, fn func(name string, d fs.DirEntry) error) error {
	err := fn(name, nil)
	if err == nil {
		var des []fs.DirEntry
		if des, err = sb.readDir(name); err == nil {
			err = sb.walkEntries(name, des, fn)
		}
	}
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func (sb *sandbox) walkEntries(dir string, des []fs.DirEntry, fn func(name string, d fs.DirEntry) error) error {
	for _, d := range des {
		child := filepath.Join(dir, d.Name())
		err := fn(child, d)
		if err == nil && d.IsDir() {
			if sub, rerr := sb.readDir(child); rerr == nil {
				err = sb.walkEntries(child, sub, fn)
			}
		}
		if err != nil && !errors.Is(err, fs.SkipDir) {
			return err
		}
	}
	return nil
}

// readDir lists the directory name through sb.dir, sorted by name.
func (sb *sandbox) readDir(name string) ([]fs.DirEntry, error) {
	f, err := sb.dir.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return des, err
}

// linkCount is the number of hard links to the file fi describes, or 1
// where the platform does not say.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
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
