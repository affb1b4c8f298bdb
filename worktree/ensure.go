package worktree

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Ensure returns agent's worktree, creating it on swarm/<agent> from the
// base branch's tip, or reusing it after checking it is on swarm/<agent>.
// An existing branch is checked out as it is, never reset. It repairs a
// registered worktree whose directory is gone (unlock, prune, recreate),
// moves aside a directory that is in the way but not a worktree (and
// refuses anything else in the way), and finishes what an interrupted run
// left half done (Worktree.Recovered says what): a first checkout cut short
// is redone completely, so truncated files are mended.
func (m *Manager) Ensure(ctx context.Context, agent string) (Worktree, error) {
	if err := checkAgent(agent); err != nil {
		return Worktree{}, err
	}
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return Worktree{}, err
	}
	wt, state, err := m.register(ctx, agent, base)
	if err != nil || state == checkedOut {
		return wt, err
	}
	// The checkout runs outside the lock, so the agents' checkouts overlap:
	// on a real repository they are most of the start-up time.
	if err := m.populate(ctx, wt.Path, state); err != nil {
		return wt, fmt.Errorf("check out worktree %s: %w", agent, err)
	}
	if state == redo {
		var rec recoveries
		rec.add(agent, "%s: redid the checkout of its worktree %s, which an interrupted run had left incomplete", agent, wt.Path)
		wt.Recovered = append(wt.Recovered, rec...)
	}
	m.mu.Lock()
	err = m.writeJournal(ctx, journal{Agent: agent, State: statePopulated, Op: opEnsure})
	m.mu.Unlock()
	return wt, err
}

// checkout says what register left for Ensure to do.
type checkout int

const (
	checkedOut checkout = iota // nothing: the worktree is complete
	fresh                      // just made: an empty directory to fill
	partial                    // made before the journal, its checkout unfinished: fill in what is missing
	redo                       // its first checkout was cut short: do it again completely
)

// register makes sure git knows agent's worktree, creating it without a
// checkout when needed, and reports what checking out is left to do.
// Registering stays under the lock: concurrent 'git worktree add' runs
// were seen to fail (reading .git/worktrees/<x>/commondir).
func (m *Manager) register(ctx context.Context, agent, base string) (Worktree, checkout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A worktree already in place is read from its own files (own.go);
	// git's list is for everything else. Whether the branch exists is
	// asked only if creating it fails.
	info, ok := m.ownInfo(ctx, agent)
	if !ok {
		if wt, made := m.addNew(ctx, agent, base); made {
			return wt, fresh, nil
		}
		entries, err := m.list(ctx)
		if err != nil {
			return Worktree{}, checkedOut, fmt.Errorf("ensure worktree %s: %w", agent, err)
		}
		info = listed(m.Path(agent), agent, entries)
	}
	wt := info.Worktree
	if info.Elsewhere != "" {
		return wt, checkedOut, fmt.Errorf("%w: %s is checked out in %s, not in %s; move that worktree (git worktree move %q %q) or remove it", ErrElsewhere, wt.Branch, info.Elsewhere, wt.Path, info.Elsewhere, wt.Path)
	}
	var rec recoveries
	r, err := m.recoverAgent(ctx, &info, recoverForEnsure, &rec)
	wt.Recovered = rec
	if err != nil {
		return wt, checkedOut, fmt.Errorf("ensure worktree %s: %w", agent, err)
	}
	if info.Valid() {
		if info.Head != wt.Branch {
			return wt, checkedOut, m.wrongBranch(agent, wt.Path, info.Head)
		}
		if r.checkout != checkedOut {
			return wt, r.checkout, nil
		}
		// In use again: whatever an earlier `swarm down` recorded (merged,
		// say) no longer describes it.
		if r.have && (r.j.State != statePopulated || r.j.Merged) {
			if err := m.writeJournal(ctx, journal{Agent: agent, State: statePopulated, Op: opEnsure}); err != nil {
				return wt, checkedOut, err
			}
		}
		return wt, checkedOut, nil
	}
	if info.Registered {
		// Deleted (or gutted) but still registered, maybe locked by a
		// supervisor that died: forget it, then create it again.
		slog.Warn("worktree directory is gone; pruning it", "agent", agent, "path", wt.Path)
		if info.Locked {
			if _, err := m.run(ctx, m.root, "worktree", "unlock", wt.Path); err != nil {
				return wt, checkedOut, fmt.Errorf("repair worktree %s: %w", agent, err)
			}
		}
		if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
			return wt, checkedOut, fmt.Errorf("repair worktree %s: %w", agent, err)
		}
		if again, err := m.inspect(ctx, agent); err != nil {
			return wt, checkedOut, err
		} else if again.Registered {
			return wt, checkedOut, fmt.Errorf("repair worktree %s: git still lists %s after 'git worktree prune'; run 'git worktree remove --force %q'", agent, wt.Path, wt.Path)
		}
	}
	if _, err := os.Lstat(wt.Path); err == nil {
		if wt.MovedAside, err = m.moveAside(ctx, agent, wt.Path); err != nil {
			return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
		}
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	if err := m.exclude(ctx, m.dir); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	// Journaled first: a run interrupted from here on left a checkout that
	// no agent has worked in, which the next run redoes completely.
	if err := m.writeJournal(ctx, journal{Agent: agent, State: statePopulating, Op: opEnsure, Base: base}); err != nil {
		return wt, checkedOut, err
	}
	if err := m.addWorktree(ctx, agent, base); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	return wt, fresh, nil
}

// populatedMarker, in a linked worktree's git dir, says its files were
// checked out completely. An index alone does not: a checkout cut short
// by a crash leaves one behind.
const populatedMarker = "swarm-populated"

// populate checks out a registered worktree's files, then writes the
// marker:
//   - fresh: the directory holds only its .git file, so one reset fills it;
//   - redo: the first checkout was cut short (journaled, or no index): no
//     agent has worked there, so it is done again completely, without the
//     old index, whose stat data could hide a file left truncated;
//   - partial: a worktree made before the journal, with an index, whose
//     marker is missing. An agent may have worked there, so it never
//     overwrites a file: it checks out only the tracked files that are
//     missing.
func (m *Manager) populate(ctx context.Context, path string, state checkout) error {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return fmt.Errorf("%s is not a linked worktree (no .git file)", path)
	}
	switch state {
	case redo:
		if _, _, err := removeAgentLock(path, false); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(gitdir, "index")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		fallthrough
	case fresh:
		// Without an index, reset --hard writes every tracked file,
		// overwriting what an interrupted checkout left.
		if _, err := m.run(ctx, path, "reset", "-q", "--hard", "HEAD"); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(gitdir, populatedMarker), nil, 0o644)
	}
	if _, err := os.Stat(filepath.Join(gitdir, "index")); errors.Is(err, os.ErrNotExist) {
		if _, err := m.run(ctx, path, "read-tree", "HEAD"); err != nil {
			return err
		}
	}
	out, err := m.run(ctx, path, "ls-files", "-z")
	if err != nil {
		return err
	}
	var missing []string
	for _, f := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(path, f)); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		if _, err := m.runStdin(ctx, path, strings.Join(missing, "\x00")+"\x00", "checkout-index", "--index", "-z", "--stdin"); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(gitdir, populatedMarker), nil, 0o644)
}

// populated reports whether the worktree at path was checked out
// completely. A worktree swarm cannot read counts as populated, so it is
// left alone.
func populated(path string) bool {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return true
	}
	_, err := os.Stat(filepath.Join(gitdir, populatedMarker))
	return err == nil
}

// RemoveStaleLock removes the index.lock that a git process killed in the
// middle of a write (a crashed session's git commit, an interrupted
// checkout) left in agent's worktree, in .git/worktrees/<agent>; while it
// is there every later commit fails. Where /proc can be read it removes the
// lock only when no live process has it open and no git process runs in
// the worktree (lockcheck.go), and otherwise returns an error wrapping
// ErrLockHeld that names the process. Without /proc it cannot check, so
// call it only when nothing of the agent can be running: after recovery
// killed the crashed sessions' process groups. It reports whether there
// was one and it is gone.
func (m *Manager) RemoveStaleLock(agent string) (bool, error) {
	if err := checkAgent(agent); err != nil {
		return false, err
	}
	_, removed, err := removeAgentLock(m.Path(agent), true)
	if err != nil {
		return false, fmt.Errorf("remove the stale index.lock of %s: %w", agent, err)
	}
	return removed, nil
}

// linkedGitDir reads the git dir of the linked worktree at path from its
// .git file.
func linkedGitDir(path string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(path, ".git"))
	if err != nil {
		return "", false
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", false
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(path, gitdir)
	}
	return gitdir, true
}

func (m *Manager) wrongBranch(agent, path, head string) error {
	if err := midRebaseError(agent, path); err != nil {
		return err // a rebase detaches HEAD; "git switch" is the wrong advice
	}
	where := "a detached HEAD"
	if head != "" {
		where = "branch " + head
	}
	return fmt.Errorf("%w: %s's worktree %s is on %s, not %s; save what is there, then run 'git -C %q switch %s'", ErrWrongBranch, agent, path, where, Branch(agent), path, Branch(agent))
}

// moveAside moves the directory at path, which is in the way of agent's
// worktree, to the orphans directory; an empty directory is simply
// removed, as there is nothing to keep. Anything that is not a directory
// (a file, a symlink) is refused and left where it is: it is not a
// worktree's remains, so it is someone's, and moving a file the operator
// put there would lose it as surely as deleting it.
func (m *Manager) moveAside(ctx context.Context, agent, path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is %s, not a directory, and it is where %s's worktree goes; swarm does not delete it. Move it away (mv %q %q) and run again",
			ErrInTheWay, path, fileKind(fi), agent, path, path+".old")
	}
	if err := os.Remove(path); err == nil {
		return "", nil // it was empty
	}
	if err := os.MkdirAll(m.orphans, 0o755); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	if err := m.exclude(ctx, m.orphans); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	stamp := m.now().UTC().Format("20060102-150405")
	dst := filepath.Join(m.orphans, agent+"-"+stamp)
	for i := 2; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		dst = filepath.Join(m.orphans, fmt.Sprintf("%s-%s-%d", agent, stamp, i))
	}
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("move %s aside to %s: %w; move it away yourself and try again", path, dst, err)
	}
	slog.Warn("moved a directory that git does not know as a worktree aside", "agent", agent, "from", path, "to", dst)
	return dst, nil
}

// fileKind names what fi is, for messages.
func fileKind(fi os.FileInfo) string {
	switch t := fi.Mode().Type(); {
	case t == 0:
		return "a regular file"
	case t&os.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "a special file (" + t.String() + ")"
	}
}
