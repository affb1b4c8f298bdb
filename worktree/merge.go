package worktree

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/swarmhq/swarm/proc"
)

// Result is what Keep, Merge, Squash or Discard did for one agent.
type Result struct {
	Agent  string
	Branch string
	Path   string // the worktree, whether or not it still exists
	// AutoCommit is the commit that saved uncommitted work first, if any.
	AutoCommit string
	// Commits are the branch's commits that were not on the base branch
	// before the operation, newest first: "<short hash> <subject>".
	Commits []string
	// Commit is the merge or squash commit made on the base branch; empty
	// when there was nothing to merge.
	Commit string
	// Removed reports that the worktree was removed and the branch deleted.
	Removed bool
	// Uncommitted are the changes in the worktree that were not committed
	// ("XY path" as in git status --short): Discard lists the ones it
	// dropped, so a discard never drops work silently.
	Uncommitted []string
	// Ignored are the files and directories git ignores in the worktree
	// ("node_modules/"), which removing it deletes: with
	// Options.DeleteIgnored they were deleted, else the worktree was kept.
	Ignored []string
	// Recovered is what was finished or undone of an interrupted run
	// first; print it.
	Recovered []Recovery
}

// ConflictError is a merge or squash that conflicted. The merge was
// aborted: the base branch and the main worktree are as they were, and the
// agent's branch and worktree are kept.
type ConflictError struct {
	Agent  string
	Branch string
	Base   string
	Files  []string // the conflicted paths, relative to the repository root
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merging %s into %s conflicts in %s; the merge was aborted and %s and its worktree were kept", e.Branch, e.Base, strings.Join(e.Files, ", "), e.Branch)
}

// UnmergedCommits lists the commits of swarm/<agent> that are not on the
// base branch, newest first, "<short hash> <subject>". No branch means none.
func (m *Manager) UnmergedCommits(ctx context.Context, agent string) ([]string, error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return nil, err
	}
	return m.unmerged(ctx, base, agent)
}

func (m *Manager) unmerged(ctx context.Context, base, agent string) ([]string, error) {
	has, err := m.ok(ctx, m.root, "rev-parse", "--verify", "-q", branchRef(agent)+"^{commit}")
	if err != nil || !has {
		return nil, err
	}
	out, err := m.run(ctx, m.root, "log", "--no-decorate", "--format=%h %s", "refs/heads/"+base+".."+branchRef(agent), "--")
	if err != nil {
		return nil, fmt.Errorf("list unmerged commits of %s: %w", Branch(agent), err)
	}
	if out == "" {
		return []string{}, nil
	}
	return strings.Split(out, "\n"), nil
}

// CheckBase returns nil when the main worktree can take merges: it is on
// the base branch, with no merge in progress and no uncommitted changes to
// tracked files (untracked files are fine). A merge or squash that an
// interrupted run left half applied there passes when all its changes are
// the merge's: Merge and Squash roll it back before they start. The errors
// wrap ErrNotOnBase or ErrBaseDirty and say what to do. It only reads.
func (m *Manager) CheckBase(ctx context.Context) error {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return err
	}
	err = m.checkBase(ctx, base)
	if errors.Is(err, ErrBaseDirty) {
		// An interrupted landing's half-done update, or the MERGE_HEAD of
		// a merge that committed before git could clear it: the recovery
		// that runs first finishes either.
		if m.landingExplains(ctx, base) {
			return nil
		}
		if h, herr := readHead(m.root); herr == nil {
			if _, ok := m.leftoverMergeHead(ctx, base, h.Hash); ok {
				return nil
			}
			ok, unexplained := m.interruptedMerge(ctx, base, h.Hash)
			if ok {
				return nil
			}
			if unexplained != "" {
				return fmt.Errorf("%w (an interrupted swarm down %s; they are left for you to look at)", err, unexplained)
			}
		}
	}
	return err
}

func (m *Manager) checkBase(ctx context.Context, base string) error {
	h, err := readHead(m.root)
	if err != nil {
		return err
	}
	if h.Ref != "refs/heads/"+base {
		return fmt.Errorf("%w: %s is on %s, and the agents' work goes into %s; run 'git switch %s' there first", ErrNotOnBase, m.root, h.describe(), base, base)
	}
	merging, err := m.ok(ctx, m.root, "rev-parse", "-q", "--verify", "MERGE_HEAD")
	if err != nil {
		return err
	}
	if merging {
		return fmt.Errorf("%w: a merge is in progress in %s; finish it (git commit) or abort it (git merge --abort) first", ErrBaseDirty, m.root)
	}
	res, err := m.runEnv(ctx, m.root, []string{"GIT_OPTIONAL_LOCKS=0"}, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return fmt.Errorf("status of %s: %w", m.root, err)
	}
	if out := strings.TrimRight(string(res.Stdout), "\n"); out != "" {
		var files []string
		for _, line := range strings.Split(out, "\n") {
			if len(line) > 3 {
				files = append(files, line[3:])
			}
		}
		return fmt.Errorf("%w to tracked files in %s (%s); commit or stash them first", ErrBaseDirty, m.root, strings.Join(files, ", "))
	}
	return nil
}

// Keep saves agent's uncommitted work with an auto-commit (checked, see
// AutoCommit) and unlocks the worktree; the worktree and branch stay for
// the next run. It first finishes what an interrupted run left half done.
func (m *Manager) Keep(ctx context.Context, agent string) (res Result, err error) {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	res = Result{Agent: agent, Branch: info.Branch, Path: info.Path}
	if err != nil {
		return res, err
	}
	var rec recoveries
	defer func() { res.Recovered = rec }()
	if _, err := m.recoverAgent(ctx, &info, recoverAll, &rec); err != nil {
		return res, err
	}
	if info.Valid() {
		if res.AutoCommit, err = m.autoCommit(ctx, agent, autoCommitMsg(agent)); err != nil {
			return res, err
		}
		if err := m.unlock(ctx, info); err != nil {
			return res, err
		}
	}
	// The list is informative; without a base branch there is none.
	if base, err := m.BaseBranch(ctx); err == nil {
		if res.Commits, err = m.unmerged(ctx, base, agent); err != nil {
			return res, err
		}
	}
	return res, nil
}

func autoCommitMsg(agent string) string {
	return fmt.Sprintf("swarm: save uncommitted work of %s", agent)
}

// mergeSubject and squashSubject start the commits Merge and Squash make
// on the base branch; recovery finds them by it.
func mergeSubject(agent string) string {
	return fmt.Sprintf("swarm: merge agent %s (branch %s)", agent, Branch(agent))
}

func squashSubject(agent string) string {
	return fmt.Sprintf("swarm: squash agent %s (branch %s)", agent, Branch(agent))
}

// Merge auto-commits agent's uncommitted work (checked, see AutoCommit),
// merges swarm/<agent> into the base branch with one merge commit naming
// the agent (--no-ff), then removes the worktree and deletes the branch.
// The main worktree must pass CheckBase. A conflict is aborted and returned
// as a *ConflictError, with the branch and worktree kept. A worktree
// holding files git ignores is kept, before anything is merged, unless
// Options.DeleteIgnored is set (Result.Ignored lists them).
//
// Each step is journaled, so a re-run after an interruption finishes the
// work: a merge left half applied in the main checkout is rolled back and
// done again; one that was committed is not done again, and the worktree
// is not auto-committed again (what an interrupted removal deleted there
// is put back instead). Result.Recovered says what was found.
func (m *Manager) Merge(ctx context.Context, agent string) (Result, error) {
	return m.integrate(ctx, agent, false)
}

// Squash is Merge with one ordinary commit on the base branch holding all of
// the agent's changes, authored swarm/<agent> and listing its commits.
func (m *Manager) Squash(ctx context.Context, agent string) (Result, error) {
	return m.integrate(ctx, agent, true)
}

func (m *Manager) integrate(ctx context.Context, agent string, squash bool) (res Result, err error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return Result{}, err
	}
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	res = Result{Agent: agent, Branch: info.Branch, Path: info.Path}
	if err != nil {
		return res, err
	}
	var rec recoveries
	defer func() { res.Recovered = rec }()
	// Any agent's half-applied merge blocks this one: settle them first.
	if err := m.recoverBase(ctx, &rec); err != nil {
		return res, err
	}
	r, err := m.recoverAgent(ctx, &info, recoverAll, &rec)
	if err != nil {
		return res, err
	}
	op := opMerge
	if squash {
		op = opSquash
	}
	j := journal{Agent: agent, Op: op}
	if r.have {
		j = r.j
	}
	if !info.HasBranch {
		if r.merged() && !info.Registered {
			// The interrupted run had got as far as deleting the branch.
			res.Commit, res.Commits, res.Removed = j.Commit, j.Commits, true
			if j.Commit != "" {
				m.recordMove(ctx, "refs/heads/"+j.Base, j.BaseTip, j.Commit)
			}
			if j.Tip != "" {
				m.recordMove(ctx, branchRef(agent), j.Tip, "")
			}
			rec.add(agent, "%s: the interrupted run had finished with it: %s is on %s and its worktree and branch are gone", agent, j.Branch, j.Base)
			return res, m.clearJournal(agent)
		}
		return res, fmt.Errorf("%w: %s does not exist", ErrNoBranch, info.Branch)
	}
	if !r.merged() {
		if err := m.checkBase(ctx, base); err != nil {
			return res, err
		}
	}
	// Refuse before merging: a merge whose worktree cannot be removed
	// leaves the agent's branch merged and still checked out.
	if res.Ignored, err = m.checkIgnored(ctx, info, "merged"); err != nil {
		return res, err
	}
	if info.Valid() {
		// Refuses any change when the interrupted run had merged already.
		if res.AutoCommit, err = m.autoCommit(ctx, agent, autoCommitMsg(agent)); err != nil {
			return res, err
		}
	}
	if r.merged() {
		rec.alreadyMerged(j)
		res.Commit, res.Commits = j.Commit, j.Commits
		squash = j.Op == opSquash
		// The interrupted run may have died before recording its move;
		// recording it twice excuses the same commits.
		if j.Commit != "" {
			m.recordMove(ctx, "refs/heads/"+j.Base, j.BaseTip, j.Commit)
		}
	} else {
		j.Op = op
		if res.Commits, err = m.unmerged(ctx, base, agent); err != nil {
			return res, err
		}
		if len(res.Commits) > 0 {
			if j, err = m.mergeJournaled(ctx, j, base, op, res.Commits); err != nil {
				return res, err
			}
			res.Commit = j.Commit
			if res.Commit != "" {
				m.recordMove(ctx, "refs/heads/"+base, j.BaseTip, res.Commit)
			}
		}
	}
	if err := m.removeJournaled(ctx, info, j, false); err != nil {
		return res, fmt.Errorf("%s is on %s, but: %w", info.Branch, base, err)
	}
	// After a real merge git can verify the branch is merged (-d); a squash
	// leaves it unmerged by ancestry although its changes are on the base.
	del := "-d"
	if squash {
		del = "-D"
	}
	tip, err := m.resolveRef(ctx, branchRef(agent))
	if err != nil {
		return res, fmt.Errorf("%s is on %s, but: %w", info.Branch, base, err)
	}
	if _, err := m.run(ctx, m.root, "branch", del, info.Branch); err != nil {
		return res, fmt.Errorf("%s is on %s, but deleting the branch failed: %w", info.Branch, base, err)
	}
	m.recordMove(ctx, branchRef(agent), tip, "")
	res.Removed = true
	return res, m.clearJournal(agent)
}

// mergeJournaled merges or squashes agent's branch into base between the
// journal states merging (with both tips recorded, for the rollback) and
// merged.
func (m *Manager) mergeJournaled(ctx context.Context, j journal, base, op string, commits []string) (journal, error) {
	agent := j.Agent
	baseTip, err := m.resolveRef(ctx, "refs/heads/"+base)
	if err != nil {
		return j, err
	}
	tip, err := m.resolveRef(ctx, branchRef(agent))
	if err != nil {
		return j, err
	}
	j.Op, j.Base, j.BaseTip, j.Tip, j.Commits = op, base, baseTip, tip, commits
	if j, err = m.setState(ctx, j, stateMerging); err != nil {
		return j, err
	}
	var commit string
	if op == opSquash {
		commit, err = m.squashInto(ctx, base, agent, commits)
	} else {
		commit, err = m.mergeInto(ctx, base, agent)
	}
	if err != nil {
		// A conflict or a refusal was undone, and the journal goes back to
		// populated. After anything else (an interrupt: ctx cancelled and
		// git killed) the merge may be half applied, or committed: the
		// entry stays, and the next run sorts it out.
		if ctx.Err() == nil {
			if now, rerr := m.resolveRef(ctx, "refs/heads/"+base); rerr == nil && now == baseTip && m.checkBase(ctx, base) == nil {
				if _, jerr := m.setState(ctx, j, statePopulated); jerr != nil {
					return j, errors.Join(err, jerr)
				}
			}
		}
		return j, err
	}
	j.Merged, j.Commit = true, commit
	return m.setState(ctx, j, stateMerged)
}

func (m *Manager) mergeInto(ctx context.Context, base, agent string) (string, error) {
	msg := mergeSubject(agent)
	env := m.identity(ctx, m.root, "", "")
	_, err := m.runEnv(ctx, m.root, env, "merge", "--no-ff", "--no-edit", "-m", msg, branchRef(agent))
	if err == nil {
		return m.run(ctx, m.root, "rev-parse", "HEAD")
	}
	files, ferr := m.conflicted(ctx)
	if ferr != nil {
		return "", errors.Join(err, ferr)
	}
	merging, verr := m.ok(ctx, m.root, "rev-parse", "-q", "--verify", "MERGE_HEAD")
	if verr != nil {
		return "", errors.Join(err, verr)
	}
	if merging {
		if _, aerr := m.run(ctx, m.root, "merge", "--abort"); aerr != nil {
			return "", fmt.Errorf("merge %s into %s failed (%v), and so did 'git merge --abort' (%w); run it yourself in %s", Branch(agent), base, err, aerr, m.root)
		}
	}
	if len(files) > 0 {
		return "", &ConflictError{Agent: agent, Branch: Branch(agent), Base: base, Files: files}
	}
	// git refused before merging (say, an untracked file in the way), or a
	// hook stopped it; either way nothing is left in progress.
	return "", refused("merge", agent, base, err)
}

// refused explains a merge or squash git would not start. Its usual reason,
// files in the base checkout that the merge would overwrite, is listed on
// lines of git's stderr below the message; the error names them and says
// what to do.
func refused(op, agent, base string, err error) error {
	var ee *proc.ExitError
	if errors.As(err, &ee) && strings.Contains(ee.Stderr, "would be overwritten by merge") {
		var files []string
		for _, line := range strings.Split(ee.Stderr, "\n") {
			if strings.HasPrefix(line, "\t") {
				files = append(files, strings.TrimSpace(line))
			}
		}
		return fmt.Errorf("%s %s into %s: files in your checkout of %s would be overwritten: %s; move them aside or commit them, then run 'swarm down --%s' again",
			op, Branch(agent), base, base, strings.Join(files, ", "), op)
	}
	return fmt.Errorf("%s %s into %s: %w", op, Branch(agent), base, err)
}

func (m *Manager) squashInto(ctx context.Context, base, agent string, commits []string) (string, error) {
	// git wants an identity even for a merge that does not commit.
	env := m.identity(ctx, m.root, Branch(agent), "")
	_, err := m.runEnv(ctx, m.root, env, "merge", "--squash", branchRef(agent))
	if err != nil {
		files, ferr := m.conflicted(ctx)
		// A squash leaves no MERGE_HEAD to abort; reset --merge puts back the
		// index and the files it touched, keeps untracked files, and drops
		// SQUASH_MSG.
		if rerr := m.undoSquash(ctx); rerr != nil {
			return "", errors.Join(err, ferr, rerr)
		}
		if ferr != nil {
			return "", errors.Join(err, ferr)
		}
		if len(files) > 0 {
			return "", &ConflictError{Agent: agent, Branch: Branch(agent), Base: base, Files: files}
		}
		return "", refused("squash", agent, base, err)
	}
	same, err := m.ok(ctx, m.root, "diff", "--cached", "--quiet")
	if err != nil {
		return "", errors.Join(err, m.undoSquash(ctx))
	}
	if same {
		// The changes are on the base already; nothing to commit.
		return "", m.undoSquash(ctx)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", squashSubject(agent))
	for _, c := range commits {
		fmt.Fprintf(&b, "* %s\n", c)
	}
	if _, err := m.runEnv(ctx, m.root, env, "commit", "-q", "-m", b.String()); err != nil {
		return "", errors.Join(fmt.Errorf("squash %s into %s: %w", Branch(agent), base, err), m.undoSquash(ctx))
	}
	return m.run(ctx, m.root, "rev-parse", "HEAD")
}

func (m *Manager) undoSquash(ctx context.Context) error {
	if _, err := m.run(ctx, m.root, "reset", "-q", "--merge"); err != nil {
		return fmt.Errorf("undo the squash: %w; run 'git reset --merge' in %s", err, m.root)
	}
	// Older gits keep SQUASH_MSG after a reset; it would prefill the
	// operator's next commit message.
	p, err := m.run(ctx, m.root, "rev-parse", "--git-path", "SQUASH_MSG")
	if err != nil {
		return err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(m.root, p)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// conflicted lists the unmerged paths in the main worktree's index.
func (m *Manager) conflicted(ctx context.Context) ([]string, error) {
	out, err := m.run(ctx, m.root, "diff", "--name-only", "--diff-filter=U", "-z")
	if err != nil {
		return nil, fmt.Errorf("list conflicted files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(out, "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// Discard removes agent's worktree, uncommitted changes included, and
// deletes swarm/<agent> whatever it holds. Result.Commits lists the commits
// that were dropped and Result.Uncommitted the uncommitted changes. Files
// git ignores keep the worktree unless Options.DeleteIgnored is set
// (Result.Ignored lists them). Asking first is the caller's job.
func (m *Manager) Discard(ctx context.Context, agent string) (res Result, err error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return Result{}, err
	}
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	res = Result{Agent: agent, Branch: info.Branch, Path: info.Path}
	if err != nil {
		return res, err
	}
	var rec recoveries
	defer func() { res.Recovered = rec }()
	r, err := m.recoverAgent(ctx, &info, recoverForDiscard, &rec)
	if err != nil {
		return res, err
	}
	if res.Commits, err = m.unmerged(ctx, base, agent); err != nil {
		return res, err
	}
	if info.Valid() {
		if r.checkout == redo {
			// A checkout cut short: its "changes" are missing files, not work.
			rec.add(agent, "%s: its worktree's first checkout had never finished, so it held no work", agent)
		} else if res.Uncommitted, err = m.uncommitted(ctx, info.Path); err != nil {
			return res, err
		}
	}
	if res.Ignored, err = m.checkIgnored(ctx, info, "discarded"); err != nil {
		return res, err
	}
	j := journal{Agent: agent}
	if r.have {
		j = r.j
	}
	j.Op = opDiscard
	if err := m.removeJournaled(ctx, info, j, true); err != nil {
		return res, err
	}
	if info.HasBranch {
		tip, err := m.resolveRef(ctx, branchRef(agent))
		if err != nil {
			return res, fmt.Errorf("discard %s: %w", agent, err)
		}
		if _, err := m.run(ctx, m.root, "branch", "-D", info.Branch); err != nil {
			return res, fmt.Errorf("discard %s: %w", agent, err)
		}
		m.recordMove(ctx, branchRef(agent), tip, "")
	}
	res.Removed = true
	return res, m.clearJournal(agent)
}

// recordMove is RecordMove for the merge path, which has made its move by
// then: a failure to record it is logged, not returned, as the work is
// done; at worst a session guard reports swarm's own move to the operator.
func (m *Manager) recordMove(ctx context.Context, ref, old, new string) {
	if err := m.RecordMove(ctx, ref, old, new); err != nil {
		slog.Warn("could not record swarm's own ref move for the session guard", "ref", ref, "err", err)
	}
}
