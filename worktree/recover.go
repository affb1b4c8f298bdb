package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/swarmhq/swarm/proc"
)

// Recovery is one thing a run did, or found, about an operation that an
// interrupted run (Ctrl-C, kill -9, a crash) left half done: a checkout
// redone, a merge rolled back or found finished, files an interrupted
// removal deleted put back, a stale index.lock removed.
type Recovery struct {
	// Agent is the agent concerned; "" for the main checkout alone.
	Agent string
	// Text is one sentence for the operator, naming the agent and what was
	// done; print it as it is.
	Text string
}

// String is the line to print.
func (r Recovery) String() string { return r.Text }

// RecoveredLogMessage is the message of the log record each Recovery line
// is also logged with, for the callers that do not print them; a caller
// that prints them may leave those records out.
const RecoveredLogMessage = "recovered from an interrupted run"

// recoveries collects what a recovery did; every line is logged too, for
// the callers that do not print them.
type recoveries []Recovery

func (rs *recoveries) add(agent, format string, args ...any) {
	r := Recovery{Agent: agent, Text: fmt.Sprintf(format, args...)}
	slog.Warn(RecoveredLogMessage, "agent", agent, "what", r.Text)
	*rs = append(*rs, r)
}

// alreadyMerged reports, once, that an interrupted run had merged j's
// branch: the worktree is not saved nor merged again.
func (rs *recoveries) alreadyMerged(j journal) {
	what := "merged"
	if j.Op == opSquash {
		what = "squashed"
	}
	as := ""
	if j.Commit != "" {
		as = " as " + short(j.Commit)
	}
	text := fmt.Sprintf("%s: an interrupted run had already %s %s into %s%s; it is not saved nor merged again", j.Agent, what, j.Branch, j.Base, as)
	for _, r := range *rs {
		if r.Text == text {
			return
		}
	}
	rs.add(j.Agent, "%s", text)
}

// Recover finishes or rolls back what interrupted runs left half done, for
// every agent with a journal entry and for the agents named:
//   - a first checkout that never finished is redone completely;
//   - a merge or squash half applied in the main checkout is rolled back to
//     the base tip recorded before it started (only when every change
//     there is the merge's), or, when it had committed, recorded as done,
//     so the agent's worktree is not auto-committed and merged again;
//   - a merge whose commit landed before git cleared MERGE_HEAD gets its
//     MERGE_HEAD cleared (committing "again" would merge twice);
//   - a landing (land.go) that had not moved the base branch is dropped;
//     one that had gets the operator's checkout brought forward;
//   - an agent's branch being brought up to date (current.go) is finished
//     when its worktree holds only the merge's changes;
//   - files that an interrupted `git worktree remove` deleted are put back
//     from the index, so they do not look like the agent's deletions;
//   - stale index.lock files, of those worktrees and of the main checkout,
//     are removed when no running git holds them.
//
// It returns what it did, one line each, for the caller to print, and the
// problems it could not solve joined in one error (each says what to do);
// it carries on with the other agents after a problem. Call it when no
// other swarm process works on the repository: at the start of `swarm up`,
// and in `swarm down` once the supervisor has stopped. Ensure, Keep, Merge,
// Squash, Discard, Remove and AutoCommit recover their own agent (and the
// main checkout) first anyway, and report it in their results.
func (m *Manager) Recover(ctx context.Context, agents ...string) ([]Recovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rec recoveries
	var errs []error
	if err := m.clearBaseLock(ctx, &rec); err != nil {
		errs = append(errs, err)
	}
	if err := m.recoverBase(ctx, &rec); err != nil {
		errs = append(errs, err)
	}
	if _, err := m.recoverLandings(ctx, &rec, ""); err != nil {
		errs = append(errs, err)
	}
	if err := m.recoverCurrents(ctx, &rec); err != nil {
		errs = append(errs, err)
	}
	names, err := m.journaledAgents()
	if err != nil {
		errs = append(errs, err)
	}
	for _, a := range agents {
		if err := checkAgent(a); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, a)
	}
	sort.Strings(names)
	// One worktree list for every agent, read again only after a recovery
	// changed something.
	var entries []entry
	for i, agent := range names {
		if i > 0 && names[i-1] == agent {
			continue
		}
		// A worktree in place is read from its own files (own.go): with
		// the list, each agent's look was linear in the agents.
		info, ok := m.ownInfo(ctx, agent)
		var err error
		if !ok && entries == nil {
			entries, err = m.list(ctx)
		}
		if !ok && err == nil {
			info, err = m.inspectIn(ctx, agent, entries)
		}
		if err == nil {
			before := len(rec)
			var r recovered
			r, err = m.recoverAgent(ctx, &info, recoverAll, &rec)
			// Whatever recovery did (it says so in rec, or the journal had
			// an operation in progress) may have changed the list.
			if len(rec) != before || (r.have && inProgress(r.j.State)) {
				entries = nil
			}
		}
		if err != nil {
			entries = nil
			errs = append(errs, fmt.Errorf("recover %s: %w", agent, err))
		}
	}
	return rec, errors.Join(errs...)
}

// recoverMode says what the caller leaves for itself.
type recoverMode int

const (
	recoverAll        recoverMode = iota // finish everything, the checkout included
	recoverForEnsure                     // leave an unfinished checkout to Ensure (it checks out outside the lock)
	recoverForDiscard                    // leave a half-removed worktree to Discard, and redo no checkout
)

// recovered is the agent's state after recoverAgent.
type recovered struct {
	j    journal // the agent's entry; meaningful when have
	have bool
	// checkout is what is left to check out, in recoverForEnsure and
	// recoverForDiscard modes.
	checkout checkout
}

// merged reports whether the interrupted run had put the branch's work on
// the base branch.
func (r recovered) merged() bool { return r.have && r.j.Merged }

// recoverAgent finishes or rolls back what an interrupted run left half
// done in agent's worktree, under m.mu. info is updated when the worktree
// changed.
func (m *Manager) recoverAgent(ctx context.Context, info *Info, mode recoverMode, rec *recoveries) (recovered, error) {
	agent := info.Agent
	var r recovered
	var err error
	if r.j, r.have, err = m.readJournal(agent); err != nil {
		return r, err
	}
	if r.have && inProgress(r.j.State) && ownerRunning(r.j) {
		return r, fmt.Errorf("%w: process %d is %s %s's worktree right now (journal %s); wait for it to finish, or stop it, then run again",
			ErrBusy, r.j.PID, r.j.State, agent, m.journalPath(agent))
	}
	if info.Valid() {
		// A lock in use is left alone: it may be the operator's git, and a
		// step that needs the lock fails with an error naming its holder.
		if lock, removed, err := removeAgentLock(info.Path, false); err != nil {
			slog.Info("left an index.lock in place", "agent", agent, "err", err)
		} else if removed {
			rec.add(agent, "%s: removed the stale %s that a killed git left in its worktree", agent, lock)
		}
	}
	if r.have && r.j.State == stateMerging {
		if err := m.recoverBase(ctx, rec); err != nil {
			return r, err
		}
		if r.j, r.have, err = m.readJournal(agent); err != nil {
			return r, err
		}
	}
	changed := false
	if r.have {
		switch r.j.State {
		case statePopulating:
			switch {
			case !info.Registered:
				// `worktree add` never ran, or the worktree was pruned since:
				// Ensure creates it again, from the start.
				if err := m.clearJournal(agent); err != nil {
					return r, err
				}
				r.have = false
			case info.Valid() && populated(info.Path):
				// Checked out; only the journal entry saying so was lost.
				if r.j, err = m.setState(ctx, r.j, statePopulated); err != nil {
					return r, err
				}
			case info.Head != info.Branch:
				// `worktree add` itself was cut short: git left it locked
				// ("initializing") with no HEAD. Nothing was checked out
				// there, let alone worked on: remove it, and Ensure makes
				// it again.
				if _, err := m.run(ctx, m.root, "worktree", "remove", "--force", "--force", info.Path); err != nil {
					return r, fmt.Errorf("remove the half-made worktree of %s: %w; run 'git worktree remove --force --force %q' yourself", agent, err, info.Path)
				}
				if err := m.clearJournal(agent); err != nil {
					return r, err
				}
				r.have, changed = false, true
				rec.add(agent, "%s: removed its worktree %s, whose creation an interrupted run had cut short (nothing had been checked out there)", agent, info.Path)
			}
		case stateRemoving:
			if mode != recoverForDiscard {
				if r.j, err = m.restoreRemoving(ctx, *info, r.j, rec); err != nil {
					return r, err
				}
				changed = true
			}
		}
	}
	if changed {
		if *info, err = m.inspect(ctx, agent); err != nil {
			return r, err
		}
	}
	if !info.Valid() || populated(info.Path) {
		return r, nil
	}
	r.checkout = partial
	if (r.have && r.j.State == statePopulating) || !hasIndex(info.Path) {
		// The first checkout was cut short: no agent has worked here (Ensure
		// had not returned), so redoing it completely loses nothing, and
		// it is the only way to mend files it left truncated.
		r.checkout = redo
	}
	if mode != recoverAll {
		return r, nil
	}
	if err := m.populate(ctx, info.Path, r.checkout); err != nil {
		return r, fmt.Errorf("finish the checkout of %s: %w", agent, err)
	}
	if r.checkout == redo {
		rec.add(agent, "%s: redid the checkout of its worktree %s, which an interrupted run had left incomplete", agent, info.Path)
	}
	r.checkout = checkedOut
	if r.have {
		r.j, err = m.setState(ctx, r.j, statePopulated)
	}
	return r, err
}

// inProgress reports whether state is the middle of an operation rather
// than a resting state.
func inProgress(state string) bool {
	return state == statePopulating || state == stateMerging || state == stateRemoving
}

// hasIndex reports whether the linked worktree at path has an index: a
// checkout writes it last, so one cut short leaves none.
func hasIndex(path string) bool {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return true
	}
	_, err := os.Stat(filepath.Join(gitdir, "index"))
	return err == nil
}

// restoreRemoving deals with a worktree that an interrupted run was
// removing. `git worktree remove` only deletes, so a worktree whose only
// changes are deleted tracked files gets them back from its index (it was
// clean when the removal started: Remove and Merge check that). A worktree
// whose .git is gone already is pruned and its remains moved aside.
// Anything else is left as it is, with an error saying what to look at.
func (m *Manager) restoreRemoving(ctx context.Context, info Info, j journal, rec *recoveries) (journal, error) {
	agent := info.Agent
	back := statePopulated
	if j.Merged {
		back = stateMerged
	}
	switch {
	case info.Valid():
		chs, err := m.status(ctx, info.Path, "normal", false)
		if err != nil {
			return j, err
		}
		var deleted []string
		var other []string
		for _, c := range chs {
			switch {
			case c.x == ' ' && c.y == 'D':
				deleted = append(deleted, c.path)
			case c.x == ' ' && c.y == 'M' && j.Restoring:
				// A file swarm's own restore was writing when it was
				// cut short: the worktree was clean when the removal
				// began (git refuses to remove it otherwise), so the
				// index holds its content.
				deleted = append(deleted, c.path)
			default:
				other = append(other, c.String())
			}
		}
		if len(deleted) > 0 && len(other) > 0 {
			return j, fmt.Errorf("%w: an interrupted run was removing %s's worktree %s, which now lacks %s and also holds changes that removing does not make (%s); swarm left it as it is. Look with 'git -C %q status': commit what you want to keep, put the rest back (git -C %q restore .), then run again",
				ErrInterrupted, agent, info.Path, plural(len(deleted), "a file", "files"), listSome(other, 10), info.Path, info.Path)
		}
		if len(deleted) > 0 {
			if !j.Restoring {
				j.Restoring = true
				if err := m.writeJournal(ctx, j); err != nil {
					return j, err
				}
			}
			if _, err := m.runStdin(ctx, info.Path, strings.Join(deleted, "\x00")+"\x00", "checkout-index", "-f", "-z", "--stdin"); err != nil {
				return j, fmt.Errorf("put back the files of %s: %w", agent, err)
			}
			rec.add(agent, "%s: put back %s that an interrupted removal had deleted from its worktree %s (they were committed; swarm does not save them as deletions)", agent, plural(len(deleted), "a file", "files"), info.Path)
		}
		return m.setState(ctx, j, back)
	case info.Registered:
		// The removal got as far as the .git file: git cannot work there
		// any more. Forget the worktree and keep what is left of it.
		if err := m.unlock(ctx, info); err != nil {
			return j, err
		}
		if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
			return j, fmt.Errorf("prune the worktree of %s: %w", agent, err)
		}
		fallthrough
	default:
		if info.Exists {
			dst, err := m.moveAside(ctx, agent, info.Path)
			if err != nil {
				return j, err
			}
			if dst != "" {
				rec.add(agent, "%s: moved what an interrupted removal left of its worktree to %s (its branch %s holds the committed work)", agent, dst, info.Branch)
			}
		}
		return m.setState(ctx, j, stateRemoved)
	}
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
			ErrInterrupted, what, j.Branch, m.root, what, listSome(lo.foreign, 10), m.root, what, m.root, short(j.BaseTip))
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
		rec.add(agent, "%s: rolled back the %s of %s into %s that an interrupted run left half applied in %s (%s put back as at %s)", agent, what, j.Branch, j.Base, m.root, plural(n, "a file", "files"), short(j.BaseTip))
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

// leftovers sorts what a half-applied merge left in the main checkout.
type leftovers struct {
	mergeHead bool
	tracked   []string // changed tracked paths, each the merge's doing
	added     []string // untracked files the merge wrote, as on the branch
	foreign   []string // changes that are not the merge's ("XY path")
}

// mergeLeftovers compares the main checkout, whose HEAD is at j.BaseTip,
// with what merging j.Tip into it can produce. A change is the merge's when
// every version of the path, in the index and in the working tree, is the
// base's, the branch's, or (for a path both changed) git's clean 3-way
// merge of the two; a conflicted path counts when its index stages are the
// three versions. An untracked file is the merge's when it is exactly the
// branch's version of a file the base lacks; other untracked files are the
// operator's and are not touched.
func (m *Manager) mergeLeftovers(ctx context.Context, j journal) (leftovers, error) {
	var lo leftovers
	var err error
	if lo.mergeHead, err = m.ok(ctx, m.root, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err != nil {
		return lo, err
	}
	chs, err := m.status(ctx, m.root, "all", false)
	if err != nil {
		return lo, err
	}
	if len(chs) == 0 {
		return lo, nil
	}
	mb, err := m.run(ctx, m.root, "merge-base", j.BaseTip, j.Tip)
	if err != nil {
		return lo, fmt.Errorf("find where %s left %s: %w", j.Branch, j.Base, err)
	}
	base, err := m.treeBlobs(ctx, j.BaseTip)
	if err != nil {
		return lo, err
	}
	tip, err := m.treeBlobs(ctx, j.Tip)
	if err != nil {
		return lo, err
	}
	anc, err := m.treeBlobs(ctx, mb)
	if err != nil {
		return lo, err
	}
	index, err := m.indexBlobs(ctx)
	if err != nil {
		return lo, err
	}
	var paths []string
	for _, c := range chs {
		if !strings.HasSuffix(c.path, "/") {
			paths = append(paths, c.path)
		}
	}
	work, err := m.workBlobs(ctx, paths)
	if err != nil {
		return lo, err
	}
	for _, c := range chs {
		p := c.path
		if c.x == '?' {
			if b, ok := tip[p]; ok && base[p] == "" && work[p] == b {
				lo.added = append(lo.added, p)
			}
			continue
		}
		if strings.HasSuffix(p, "/") {
			lo.foreign = append(lo.foreign, c.String())
			continue
		}
		allowed := map[string]bool{base[p]: true, tip[p]: true}
		if unmerged(c) {
			ok := true
			for _, b := range index[p] {
				ok = ok && (b == base[p] || b == tip[p] || b == anc[p])
			}
			if ok {
				lo.tracked = append(lo.tracked, p)
			} else {
				lo.foreign = append(lo.foreign, c.String())
			}
			continue
		}
		if base[p] != "" && tip[p] != "" && anc[p] != "" && base[p] != anc[p] && tip[p] != anc[p] && base[p] != tip[p] {
			merged, err := m.mergeFile(ctx, anc[p], base[p], tip[p])
			if err != nil {
				return lo, err
			}
			if merged != "" {
				allowed[merged] = true
			}
		}
		idx := ""
		if bs := index[p]; len(bs) == 1 {
			idx = bs[0]
		}
		switch {
		case allowed[idx] && allowed[work[p]]:
			lo.tracked = append(lo.tracked, p)
		case allowed[idx] && base[p] != tip[p] && tip[p] != "" && m.halfWritten(ctx, p, tip[p]):
			// git writes a file in place: killed in the middle, it left the
			// start of the agent's version. Both versions are in git, so
			// the rollback loses nothing.
			lo.tracked = append(lo.tracked, p)
		case allowed[idx] && base[p] != tip[p] && work[p] == "":
			// git replaces a file by unlinking it and writing the new one:
			// killed in between, the file is missing. Both versions are
			// in git.
			lo.tracked = append(lo.tracked, p)
		default:
			lo.foreign = append(lo.foreign, c.String())
		}
	}
	return lo, nil
}

// maxHalfWritten bounds the files halfWritten compares.
const maxHalfWritten = 64 << 20

// halfWritten reports whether the main checkout's file p holds the start of
// blob, and no more: what a git killed while it wrote blob there leaves.
// An edit of the operator's is not a prefix of the agent's version.
func (m *Manager) halfWritten(ctx context.Context, p, blob string) bool {
	fi, err := os.Lstat(filepath.Join(m.root, p))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxHalfWritten {
		return false
	}
	have, err := os.ReadFile(filepath.Join(m.root, p))
	if err != nil {
		return false
	}
	want, err := m.runEnv(ctx, m.root, nil, "cat-file", "blob", blob)
	if err != nil {
		return false
	}
	return len(have) < len(want.Stdout) && bytes.HasPrefix(want.Stdout, have)
}

func unmerged(c change) bool {
	return c.x == 'U' || c.y == 'U' || c.x == 'A' && c.y == 'A' || c.x == 'D' && c.y == 'D'
}

// treeBlobs maps every path of commit's tree to its object.
func (m *Manager) treeBlobs(ctx context.Context, commit string) (map[string]string, error) {
	res, err := m.runEnv(ctx, m.root, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return nil, fmt.Errorf("read the files of %s: %w", short(commit), err)
	}
	out := map[string]string{}
	for _, rec := range strings.Split(string(res.Stdout), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			out[path] = f[2]
		}
	}
	return out, nil
}

// indexBlobs maps every path of the main checkout's index to its objects,
// one per stage.
func (m *Manager) indexBlobs(ctx context.Context) (map[string][]string, error) {
	res, err := m.runEnv(ctx, m.root, []string{"GIT_OPTIONAL_LOCKS=0"}, "ls-files", "-s", "-z")
	if err != nil {
		return nil, fmt.Errorf("read the index of %s: %w", m.root, err)
	}
	out := map[string][]string{}
	for _, rec := range strings.Split(string(res.Stdout), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			out[path] = append(out[path], f[1])
		}
	}
	return out, nil
}

// workBlobs hashes the working-tree files at paths (relative to the root)
// as git would store them; a missing file maps to "".
func (m *Manager) workBlobs(ctx context.Context, paths []string) (map[string]string, error) {
	out := map[string]string{}
	var files []string
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Join(m.root, p))
		switch {
		case err != nil:
			out[p] = ""
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(m.root, p))
			if err != nil {
				return nil, err
			}
			h, err := m.runStdin(ctx, m.root, target, "hash-object", "--stdin")
			if err != nil {
				return nil, err
			}
			out[p] = h
		case fi.Mode().IsRegular() && !strings.Contains(p, "\n") && !strings.HasPrefix(p, `"`):
			files = append(files, p)
		default:
			out[p] = "?" + p // a directory or an odd name: matches nothing
		}
	}
	if len(files) == 0 {
		return out, nil
	}
	// --stdin-paths applies the path's attributes (clean filters), as
	// `git add` would.
	hashes, err := m.runStdin(ctx, m.root, strings.Join(files, "\n")+"\n", "hash-object", "--stdin-paths")
	if err != nil {
		return nil, fmt.Errorf("hash the files in %s: %w", m.root, err)
	}
	hs := strings.Split(hashes, "\n")
	if len(hs) != len(files) {
		return nil, fmt.Errorf("hash the files in %s: %d hashes for %d files", m.root, len(hs), len(files))
	}
	for i, p := range files {
		out[p] = hs[i]
	}
	return out, nil
}

// mergeFile returns the object git's clean 3-way merge of the three blobs
// would store, or "" when they conflict.
func (m *Manager) mergeFile(ctx context.Context, anc, ours, theirs string) (string, error) {
	dir, err := os.MkdirTemp("", "swarm-merge-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	names := make([]string, 3)
	for i, blob := range []string{ours, anc, theirs} {
		res, err := m.runEnv(ctx, m.root, nil, "cat-file", "blob", blob)
		if err != nil {
			return "", err
		}
		names[i] = filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(names[i], res.Stdout, 0o600); err != nil {
			return "", err
		}
	}
	res, err := m.runEnv(ctx, m.root, nil, "merge-file", "-p", names[0], names[1], names[2])
	if err != nil {
		return "", nil // conflicts (or binary): no clean result to match
	}
	return m.runStdin(ctx, m.root, string(res.Stdout), "hash-object", "--stdin")
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
