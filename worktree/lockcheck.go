package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// git writes the index through index.lock: created exclusively, filled,
// then renamed over the index. A git killed in between (kill -9, a crash,
// a killed session) leaves the lock behind, and every later git that
// writes the index fails with "Unable to create index.lock: File exists".
// Removing it is safe once nothing is writing it: the real index is
// untouched until the rename, so only the unfinished new one is dropped.
//
// "Nothing is writing it" is checked in /proc (Linux): the lock is held
// while some live process has the file open, or while a live git process
// (command name git or git-*) has its current directory in the checkout the
// lock belongs to (git chdirs to the worktree, and `git commit` keeps the
// lock while the editor is open). Processes of other users and of other
// pid namespaces cannot be seen; without /proc nothing can be said, and the
// lock of the main checkout is then left for the operator.

// holder is a live process that may be writing through a lock.
type holder struct {
	pid  int
	comm string
	cwd  string
	open bool // has the lock file open
}

func (h holder) String() string {
	if h.open {
		return fmt.Sprintf("process %d (%s), which has it open", h.pid, h.comm)
	}
	return fmt.Sprintf("git process %d, running in %s", h.pid, h.cwd)
}

// lockHolder looks for a holder of lock: a process with it open, or a git
// process whose current directory is under one of dirs but not under one
// of skip. checked is false when /proc cannot be read.
func lockHolder(lock string, dirs, skip []string) (h holder, found, checked bool) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return holder{}, false, false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return holder{}, false, false
	}
	lock = canon(lock)
	for i := range dirs {
		dirs[i] = canon(dirs[i])
	}
	for i := range skip {
		skip[i] = canon(skip[i])
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		base := "/proc/" + p.Name()
		comm := ""
		if b, err := os.ReadFile(base + "/comm"); err == nil {
			comm = strings.TrimSpace(string(b))
		}
		if fds, err := os.ReadDir(base + "/fd"); err == nil {
			for _, fd := range fds {
				if t, err := os.Readlink(base + "/fd/" + fd.Name()); err == nil && t == lock {
					return holder{pid: pid, comm: comm, open: true}, true, true
				}
			}
		}
		if comm != "git" && !strings.HasPrefix(comm, "git-") {
			continue
		}
		cwd, err := os.Readlink(base + "/cwd")
		if err != nil {
			continue
		}
		if under(cwd, dirs) && !under(cwd, skip) {
			return holder{pid: pid, comm: comm, cwd: cwd}, true, true
		}
	}
	return holder{}, false, true
}

// under reports whether path is one of dirs or inside one.
func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// removeLock removes lock when no live process holds it. It reports
// whether there was a lock and it is gone now. When /proc cannot be read,
// trustCaller decides: true removes it anyway (the caller knows nothing of
// swarm runs there), false leaves it and returns an error saying what to do.
func removeLock(lock string, dirs, skip []string, trustCaller bool) (bool, error) {
	if _, err := os.Lstat(lock); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	h, found, checked := lockHolder(lock, dirs, skip)
	switch {
	case found:
		return false, fmt.Errorf("%w: %s is held by %s; let it finish (or stop it), then run again", ErrLockHeld, lock, h)
	case !checked && !trustCaller:
		return false, fmt.Errorf("%w: %s is left from an earlier git run, and swarm cannot check (no /proc) whether a git process still uses it; if no git is running there, delete it (rm %q) and run again", ErrLockHeld, lock, lock)
	}
	err := os.Remove(lock)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // its git just finished
	}
	if err != nil {
		return false, fmt.Errorf("remove the stale %s: %w", lock, err)
	}
	return true, nil
}

// removeAgentLock removes the stale index.lock of the linked worktree at
// path (in .git/worktrees/<agent>), checked as described above.
func removeAgentLock(path string, trustCaller bool) (string, bool, error) {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return "", false, nil
	}
	lock := filepath.Join(gitdir, "index.lock")
	removed, err := removeLock(lock, []string{path, gitdir}, nil, trustCaller)
	return lock, removed, err
}

// clearBaseLock is removeBaseLock saying in rec what it removed.
func (m *Manager) clearBaseLock(ctx context.Context, rec *recoveries) error {
	lock, removed, err := m.removeBaseLock(ctx)
	if removed {
		rec.add("", "removed the stale %s that a killed git left in %s", lock, m.root)
	}
	return err
}

// removeBaseLock removes the stale index.lock of the main checkout. Git
// processes in the agents' worktrees (which may lie under the root) do not
// hold it.
func (m *Manager) removeBaseLock(ctx context.Context) (string, bool, error) {
	lock, err := m.gitPath(ctx, "index.lock")
	if err != nil {
		return "", false, err
	}
	common, err := m.gitCommonDir(ctx)
	if err != nil {
		return "", false, err
	}
	removed, err := removeLock(lock, []string{m.root, filepath.Dir(lock)}, []string{m.dir, filepath.Join(common, "worktrees")}, false)
	return lock, removed, err
}

// gitPath resolves a path inside the main checkout's git dir.
func (m *Manager) gitPath(ctx context.Context, name string) (string, error) {
	p, err := m.run(ctx, m.root, "rev-parse", "--git-path", name)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(m.root, p)
	}
	return p, nil
}

func (m *Manager) gitCommonDir(ctx context.Context) (string, error) {
	p, err := m.run(ctx, m.root, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(m.root, p)
	}
	return p, nil
}
