package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/proc"
)

// settleBase clears what an interrupted move of the base branch left
// before another one starts: a stale index.lock, then a half-done merge.
// The caller holds m.mu.
func (m *Manager) settleBase(ctx context.Context, rec *recoveries) error {
	if err := m.clearBaseLock(ctx, rec); err != nil {
		return err
	}
	return m.recoverBase(ctx, rec)
}

// recoverBase deals with every merge or squash an interrupted run left
// started in the main checkout (journal state merging): when its commit is
// on the base branch, the entry is marked merged; when the main checkout
// still holds a half-applied merge whose changes are all the merge's, it
// is rolled back to the recorded base tip; when it holds changes that are
// not the merge's, nothing is touched and the error says what to do.
// The caller holds m.mu.
func (m *Manager) recoverBase(ctx context.Context, rec *recoveries) error {
	agents, err := m.journaledAgents()
	if err != nil {
		return err
	}
	var merging []journal
	for _, a := range agents {
		j, ok, err := m.readJournal(a)
		if err != nil {
			return err
		}
		if ok && j.State == stateMerging {
			if ownerRunning(j) {
				return fmt.Errorf("%w: process %d is merging %s into %s right now; wait for it to finish, then run again", ErrBusy, j.PID, j.Branch, j.Base)
			}
			merging = append(merging, j)
		}
	}
	if len(merging) == 0 {
		return nil
	}
	// Newest first: merges run one at a time, so the newest is the one
	// whose changes may be in the checkout.
	sort.Slice(merging, func(a, b int) bool { return merging[a].Time.After(merging[b].Time) })
	if err := m.clearBaseLock(ctx, rec); err != nil {
		return err
	}
	for _, j := range merging {
		if err := m.recoverMerge(ctx, j, rec); err != nil {
			return err
		}
	}
	return nil
}

// recoverMerge settles one interrupted merge or squash.
func (m *Manager) recoverMerge(ctx context.Context, j journal, rec *recoveries) error {
	agent, what := j.Agent, "merge"
	if j.Op == opSquash {
		what = "squash"
	}
	baseRef := "refs/heads/" + j.Base
	baseNow, err := m.resolveRef(ctx, baseRef)
	if err != nil {
		return err
	}
	if baseNow != "" {
		done, commit, err := m.mergeLanded(ctx, j, baseNow)
		if err != nil {
			return err
		}
		if done {
			// git writes MERGE_HEAD before its merge commit and removes it
			// after: killed in between, it leaves the merge "in progress"
			// although HEAD holds it, and committing again would merge
			// twice. It is git's leftover, cleared here.
			if h, err := readHead(m.root); err == nil && h.Ref == baseRef {
				if mh, ok := m.leftoverMergeHead(ctx, j.Base, h.Hash); ok && mh == j.Tip {
					if err := m.clearMergeState(ctx); err != nil {
						return err
					}
					rec.add(agent, "%s: cleared the MERGE_HEAD that an interrupted run's merge of %s left in %s after its commit (HEAD holds it)", agent, j.Branch, m.root)
				}
			}
			j.Merged, j.Commit = true, commit
			if _, err := m.setState(ctx, j, stateMerged); err != nil {
				return err
			}
			rec.alreadyMerged(j)
			return nil
		}
	}
	h, err := readHead(m.root)
	if err != nil {
		return err
	}
	if h.Ref != baseRef || h.Hash != j.BaseTip || baseNow != j.BaseTip {
		// The checkout has moved on since (the operator switched or
		// committed): whatever the merge left was dealt with then.
		if _, err := m.setState(ctx, j, statePopulated); err != nil {
			return err
		}
		rec.add(agent, "%s: an interrupted run had started to %s %s into %s, but %s has moved on since (now %s), so nothing was undone; if in doubt, look with 'git -C %q status'", agent, what, j.Branch, j.Base, m.root, h.describe(), m.root)
		return nil
	}
	lo, err := m.mergeLeftovers(ctx, j)
	if err != nil {
		return err
	}
	owned := len(lo.tracked) > 0 || len(lo.added) > 0 || lo.mergeHead
	if len(lo.foreign) > 0 && owned {
		return fmt.Errorf("%w: an interrupted run left a %s of %s half applied in %s, and these changes there are not the %s's: %s. swarm touched nothing. Look with 'git -C %q status'; save what is yours (git stash), then undo the %s (git -C %q reset --merge, or 'git reset --hard %s' if nothing there is yours), and run again",
			ErrInterrupted, what, j.Branch, m.root, what, text.ListSome(lo.foreign, 10), m.root, what, m.root, text.Short(j.BaseTip, 7))
	}
	// Without a trace of the merge, any changes there are the operator's:
	// they are left alone (CheckBase then asks to commit or stash them).
	if len(lo.tracked) > 0 || lo.mergeHead {
		if _, err := m.run(ctx, m.root, "reset", "-q", "--hard", j.BaseTip); err != nil {
			return fmt.Errorf("roll back the interrupted %s of %s: %w; run 'git -C %q reset --merge' yourself", what, j.Branch, err, m.root)
		}
	}
	for _, p := range lo.added {
		if err := os.Remove(filepath.Join(m.root, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("roll back the interrupted %s of %s: %w", what, j.Branch, err)
		}
		removeEmptyParents(m.root, filepath.Dir(filepath.Join(m.root, p)))
	}
	if err := m.removeMergeMsgs(ctx); err != nil {
		return err
	}
	if _, err := m.setState(ctx, j, statePopulated); err != nil {
		return err
	}
	if n := len(lo.tracked) + len(lo.added); n > 0 || lo.mergeHead {
		rec.add(agent, "%s: rolled back the %s of %s into %s that an interrupted run left half applied in %s (%s put back as at %s)", agent, what, j.Branch, j.Base, m.root, text.Plural(n, "file", "files"), text.Short(j.BaseTip, 7))
	} else {
		rec.add(agent, "%s: an interrupted run had started to %s %s into %s but changed nothing there", agent, what, j.Branch, j.Base)
	}
	return nil
}

// resolveRef resolves ref to a commit in the main checkout; "" when it does not exist.
func (m *Manager) resolveRef(ctx context.Context, ref string) (string, error) {
	out, err := m.run(ctx, m.root, "rev-parse", "--verify", "-q", ref+"^{commit}")
	var ee *proc.ExitError
	if errors.As(err, &ee) && ee.ExitCode == 1 {
		return "", nil
	}
	return out, err
}

// mergeLanded reports whether j's merge or squash commit is on the base
// branch (at baseNow), and which commit it is. A merge landed when the
// merged tip is an ancestor; a squash when a commit with swarm's squash
// subject for the agent follows the recorded base tip.
func (m *Manager) mergeLanded(ctx context.Context, j journal, baseNow string) (bool, string, error) {
	if baseNow == j.BaseTip {
		return false, "", nil
	}
	if j.Op != opSquash {
		ok, err := m.ok(ctx, m.root, "merge-base", "--is-ancestor", j.Tip, baseNow)
		if err != nil || !ok {
			return false, "", err
		}
	}
	subject := mergeSubject(j.Agent)
	if j.Op == opSquash {
		subject = squashSubject(j.Agent)
	}
	out, err := m.run(ctx, m.root, "log", "--first-parent", "--format=%H %s", j.BaseTip+".."+baseNow, "--")
	if err != nil {
		// The recorded tip may be gone (history rewritten): not landed.
		return false, "", nil
	}
	for _, line := range strings.Split(out, "\n") {
		hash, subj, _ := strings.Cut(line, " ")
		if subj == subject {
			return true, hash, nil
		}
	}
	// Merged by ancestry, by other means than swarm's commit.
	return j.Op != opSquash, "", nil
}

// removeMergeMsgs removes the messages a merge or squash leaves for the
// next commit; older gits keep them after a reset, and they would prefill
// the operator's next commit message.
func (m *Manager) removeMergeMsgs(ctx context.Context) error {
	for _, name := range []string{"SQUASH_MSG", "MERGE_MSG"} {
		p, err := m.gitPath(ctx, name)
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// leftoverMergeHead reports whether the main checkout's MERGE_HEAD (also
// returned) is what a swarm merge left after committing: an interrupted
// merge is journaled (merging into base) with that tip, HEAD (at head)
// already holds it, and no tracked file differs from HEAD. Only then is
// the "merge in progress" over in all but name.
func (m *Manager) leftoverMergeHead(ctx context.Context, base, head string) (string, bool) {
	mh, err := m.resolveRef(ctx, "MERGE_HEAD")
	if err != nil || mh == "" || head == "" {
		return "", false
	}
	agents, err := m.journaledAgents()
	if err != nil {
		return "", false
	}
	ours := false
	for _, a := range agents {
		j, ok, err := m.readJournal(a)
		if err == nil && ok && j.State == stateMerging && j.Base == base && j.Tip == mh && j.Op != opSquash {
			ours = true
		}
	}
	if !ours {
		return "", false
	}
	if in, err := m.isAncestor(ctx, mh, head); err != nil || !in {
		return "", false
	}
	if clean, err := m.ok(ctx, m.root, "diff-index", "--quiet", "HEAD", "--"); err != nil || !clean {
		return "", false
	}
	return mh, true
}

// clearMergeState removes what git keeps for a merge in progress, as
// `git merge --quit` would (git 2.23 and later), leaving the index and the
// files as they are.
func (m *Manager) clearMergeState(ctx context.Context) error {
	for _, name := range []string{"MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_RR"} {
		p, err := m.gitPath(ctx, name)
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("clear the finished merge's %s: %w", name, err)
		}
	}
	return nil
}

// removeEmptyParents removes dir and its parents while they are empty,
// stopping at root.
func removeEmptyParents(root, dir string) {
	for dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// interruptedMerge reports whether the changes in the main checkout are
// all an interrupted merge's that Merge rolls back (journaled as merging
// at this base tip); when one is journaled but does not explain them, it
// also says which changes are not the merge's, for the refusal.
func (m *Manager) interruptedMerge(ctx context.Context, base, head string) (bool, string) {
	agents, err := m.journaledAgents()
	if err != nil {
		return false, ""
	}
	unexplained := ""
	for _, a := range agents {
		j, ok, err := m.readJournal(a)
		if err != nil || !ok || j.State != stateMerging || j.Base != base || j.BaseTip != head {
			continue
		}
		lo, err := m.mergeLeftovers(ctx, j)
		if err == nil && len(lo.foreign) == 0 && (len(lo.tracked) > 0 || lo.mergeHead) {
			return true, ""
		}
		if err == nil && len(lo.foreign) > 0 {
			var lines []string
			for _, f := range lo.foreign {
				lines = append(lines, strings.TrimSpace(f))
			}
			unexplained = fmt.Sprintf("was merging %s, and these changes are not what that merge writes: %s", j.Branch, strings.Join(lines, ", "))
		}
	}
	return false, unexplained
}
