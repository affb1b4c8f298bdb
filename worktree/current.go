package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/proc"
)

// Keeping an agent current (DESIGN §14): between two of its sessions, never
// during one, an agent whose branch is behind the base branch gets the base
// merged into swarm/<agent>, so it works on what its teammates landed:
//
//  1. the merge is built in memory (`git merge-tree --write-tree`): a
//     conflict is never merged, it is returned for the agent to resolve;
//  2. the worktree must be clean (the session's auto-commit ran); a dirty
//     one is left alone this time;
//  3. the merge commit is made (`commit-tree`: objects only), or, when the
//     branch has no commit of its own, the branch fast-forwards;
//  4. journaled (<Journal>/current/<agent>.json), the worktree's index and
//     files go from the old tip to the new one (`read-tree -m -u`, the
//     two-tree switch, which refuses before writing anything), and only
//     then the branch moves with a compare-and-set `update-ref`.
//
// So a kill -9 anywhere leaves the branch at its old or its new commit and
// never a MERGE_HEAD (no `git merge` runs); the next KeepCurrent (or
// Recover) finishes the switch when every change in the worktree is the
// merge's, else leaves it and says what to do.

// currentStep, when set (by tests), is called after each step of
// KeepCurrent with its name: a test kills the process there.
var currentStep func(step string)

func currentHook(step string) {
	if currentStep != nil {
		currentStep(step)
	}
}

// currentJournal is one agent's keep-current entry, written before its
// worktree and branch move from Old to New.
type currentJournal struct {
	Version  int       `json:"version"`
	Agent    string    `json:"agent"`
	Base     string    `json:"base"`
	BaseTip  string    `json:"base_tip"`
	Old      string    `json:"old"`
	New      string    `json:"new"`
	PID      int       `json:"pid"`
	PIDStart uint64    `json:"pid_start,omitempty"`
	Time     time.Time `json:"time"`
}

// Current is what KeepCurrent did for one agent.
type Current struct {
	Agent string
	Base  string
	// BaseTip is the base commit the branch was compared with; "" when
	// there was nothing to compare (no worktree, no branch).
	BaseTip string
	// Behind counts the base's commits (merges left out) that were not on
	// the branch; 0 means it was up to date. Authors wrote them, newest
	// first, without the "swarm/" of an agent's name.
	Behind  int
	Authors []string
	// Old and New are the branch before and after; New is "" when the
	// branch did not move. FastForward: the branch had no commit of its
	// own, so it now is the base's tip.
	Old, New    string
	FastForward bool
	// Why the branch, behind, was not brought up to date: the files a merge
	// conflicts in, or the worktree's uncommitted changes ("XY path"), or
	// another reason (off its branch, mid-rebase).
	Conflicts []string
	Dirty     []string
	Skipped   string
	// Recovered is what was finished of an interrupted run first.
	Recovered []Recovery
}

// Merged reports whether the branch was brought up to date.
func (c Current) Merged() bool { return c.New != "" }

// CurrentSubject is the message of the merge commit that brings agent's
// branch up to date with base at tip.
func CurrentSubject(agent, base, tip string) string {
	return fmt.Sprintf("swarm: bring %s up to date with %s (%s)", Branch(agent), base, text.Short(tip, 7))
}

func (m *Manager) currentDir() string { return filepath.Join(m.journal, "current") }

func (m *Manager) currentPath(agent string) string {
	return filepath.Join(m.currentDir(), agent+".json")
}

func (m *Manager) readCurrent(agent string) (currentJournal, bool, error) {
	return readEntry(m.currentPath(agent), "the journal bringing "+agent+" up to date", m.Path(agent),
		func(j currentJournal) (int, bool) { return j.Version, j.Agent == agent && j.Old != "" && j.New != "" })
}

func (m *Manager) writeCurrent(ctx context.Context, j currentJournal) error {
	j.Version, j.PID, j.PIDStart, j.Time = m.stamp()
	if err := m.writeEntry(ctx, m.currentDir(), m.currentPath(j.Agent), j); err != nil {
		return fmt.Errorf("journal bringing %s up to date: %w", j.Agent, err)
	}
	return nil
}

func (m *Manager) clearCurrent(agent string) error {
	err := os.Remove(m.currentPath(agent))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clear the journal of %s: %w", agent, err)
	}
	return syncDir(m.currentDir())
}

// KeepCurrent brings agent's branch up to date with the base branch when it
// is behind, the merge is clean and its worktree is clean (see the top of
// this file). Call it only while no session of the agent runs. A conflict,
// a dirty worktree or a worktree off its branch change nothing and are
// reported in Current, not as errors; the error is for failing to look or
// to move.
func (m *Manager) KeepCurrent(ctx context.Context, agent string) (res Current, err error) {
	if err := checkAgent(agent); err != nil {
		return res, err
	}
	res.Agent = agent
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return res, err
	}
	res.Base = base
	// A branch at the base's tip (every agent of a swarm starting) is up
	// to date: said without the lock, which made 500 agents' checks, three
	// gits each, run one at a time.
	if tip, ok := m.atBase(ctx, agent, base); ok {
		res.BaseTip = tip
		return res, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var rec recoveries
	defer func() { res.Recovered = rec }()
	if err := m.recoverCurrent(ctx, agent, &rec); err != nil {
		return res, err
	}
	path, err := m.worktreeDir(agent)
	if err != nil {
		return res, nil // no worktree yet: Ensure makes it from the base's tip
	}
	baseTip, err := m.resolveRef(ctx, "refs/heads/"+base)
	if err != nil || baseTip == "" {
		return res, err
	}
	tip, err := m.resolveRef(ctx, branchRef(agent))
	if err != nil || tip == "" {
		return res, err
	}
	res.BaseTip = baseTip
	if up, err := m.isAncestor(ctx, baseTip, tip); err != nil || up {
		return res, err
	}
	if res.Behind, res.Authors, err = m.behind(ctx, tip, baseTip); err != nil {
		return res, err
	}
	// The guard reports a worktree off its branch; nothing moves under it.
	if _, _, ok := rebaseState(path); ok {
		res.Skipped = "the worktree is in the middle of a rebase"
		return res, nil
	}
	if h, err := m.headOf(ctx, path); err != nil {
		return res, err
	} else if h.Ref != branchRef(agent) {
		res.Skipped = fmt.Sprintf("the worktree is on %s, not %s", h.describe(), Branch(agent))
		return res, nil
	}
	ff, err := m.isAncestor(ctx, tip, baseTip)
	if err != nil {
		return res, err
	}
	var tree string
	if !ff {
		if err := m.mergeTreeSupported(ctx); err != nil {
			return res, err
		}
		var files []string
		if tree, files, err = m.mergeTree(ctx, tip, baseTip); err != nil {
			return res, err
		}
		if len(files) > 0 {
			res.Conflicts = files
			return res, nil
		}
	}
	if lock, removed, err := removeAgentLock(path, false); err != nil {
		return res, err
	} else if removed {
		rec.add(agent, "%s: removed the stale %s that a killed git left in its worktree", agent, lock)
	}
	if res.Dirty, err = m.uncommittedTracked(ctx, path); err != nil || len(res.Dirty) > 0 {
		return res, err
	}
	next := baseTip
	if !ff {
		env := m.identity(ctx, m.root, "", "")
		msg := CurrentSubject(agent, base, baseTip) + "\n"
		if next, err = m.runStdin2(ctx, env, msg, "commit-tree", tree, "-p", tip, "-p", baseTip); err != nil {
			return res, fmt.Errorf("make the merge commit bringing %s up to date: %w", Branch(agent), err)
		}
	}
	// A stat-dirty index would make read-tree take an unchanged file for
	// a changed one.
	if _, err := m.run(ctx, path, "update-index", "-q", "--refresh"); err != nil {
		var ee *proc.ExitError
		if !errors.As(err, &ee) {
			return res, err
		}
	}
	j := currentJournal{Agent: agent, Base: base, BaseTip: baseTip, Old: tip, New: next}
	if err := m.writeCurrent(ctx, j); err != nil {
		return res, err
	}
	currentHook("journaled")
	// read-tree checks every path before it writes any, so a refusal
	// (untracked files in the way) leaves the worktree as it was.
	if _, err := m.run(ctx, path, "read-tree", "-m", "-u", tip, next); err != nil {
		if files := inTheWay(err); len(files) > 0 {
			res.Dirty = files
			return res, m.clearCurrent(agent)
		}
		return res, errors.Join(fmt.Errorf("update the worktree of %s: %w", agent, err), m.recoverCurrent(context.WithoutCancel(ctx), agent, &rec))
	}
	currentHook("files")
	// From here the move is finished even when ctx is cancelled: the
	// worktree already shows the merge.
	ctx = context.WithoutCancel(ctx)
	if _, err := m.run(ctx, m.root, "update-ref", "-m", "swarm: keep "+Branch(agent)+" current", branchRef(agent), next, tip); err != nil {
		return res, errors.Join(fmt.Errorf("move %s: %w", Branch(agent), err), m.recoverCurrent(ctx, agent, &rec))
	}
	currentHook("moved")
	m.recordMove(ctx, branchRef(agent), tip, next)
	if err := m.clearCurrent(agent); err != nil {
		return res, err
	}
	res.Old, res.New, res.FastForward = tip, next, ff
	return res, nil
}

// behind counts the commits of to that from lacks, merges left out, and
// names their authors, newest first.
func (m *Manager) behind(ctx context.Context, from, to string) (int, []string, error) {
	n, err := m.run(ctx, m.root, "rev-list", "--count", "--no-merges", from+".."+to)
	if err != nil {
		return 0, nil, err
	}
	count, _ := strconv.Atoi(n)
	out, err := m.run(ctx, m.root, "log", "--no-merges", "--max-count=200", "--format=%an", from+".."+to, "--")
	if err != nil {
		return 0, nil, err
	}
	var authors []string
	seen := map[string]bool{}
	for _, a := range strings.Split(out, "\n") {
		a = strings.TrimPrefix(strings.TrimSpace(a), BranchPrefix)
		if a != "" && !seen[a] {
			seen[a] = true
			authors = append(authors, a)
		}
	}
	return count, authors, nil
}

// uncommittedTracked lists the changes to tracked files in the worktree at
// path: untracked files do not stop a merge, unless in its way.
func (m *Manager) uncommittedTracked(ctx context.Context, path string) ([]string, error) {
	chs, err := m.status(ctx, path, "no", false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range chs {
		out = append(out, c.String())
	}
	return out, nil
}

// inTheWay reads the files git refused to overwrite from its error.
func inTheWay(err error) []string {
	var ee *proc.ExitError
	if !errors.As(err, &ee) {
		return nil
	}
	var files []string
	for _, line := range strings.Split(ee.Stderr, "\n") {
		if strings.HasPrefix(line, "\t") {
			files = append(files, "?? "+strings.TrimSpace(line))
		}
		if _, f, ok := strings.Cut(line, "Untracked working tree file '"); ok {
			f, _, _ = strings.Cut(f, "'")
			files = append(files, "?? "+f)
		}
	}
	return files
}

// recoverCurrent finishes what an interrupted KeepCurrent of agent left:
// a branch already at New is done (the files were switched first); a
// branch still at Old whose worktree holds only the switch's changes (each
// path its old or new version, the start of the new one, or missing) is
// switched to New; a worktree without any change is left at Old. Anything
// else is someone's work: nothing is touched and the error says what to
// do. The caller holds m.mu.
func (m *Manager) recoverCurrent(ctx context.Context, agent string, rec *recoveries) error {
	j, ok, err := m.readCurrent(agent)
	if err != nil || !ok {
		return err
	}
	if ownerRunning(journal{PID: j.PID, PIDStart: j.PIDStart}) {
		return fmt.Errorf("%w: process %d is bringing %s up to date right now; wait for it to finish, then run again", ErrBusy, j.PID, Branch(agent))
	}
	path := m.Path(agent)
	if _, err := m.worktreeDir(agent); err == nil {
		if lock, removed, err := removeAgentLock(path, false); err != nil {
			return err
		} else if removed {
			rec.add(agent, "%s: removed the stale %s that a killed git left in its worktree", agent, lock)
		}
	}
	tip, err := m.resolveRef(ctx, branchRef(agent))
	if err != nil {
		return err
	}
	switch {
	case tip == j.New:
		m.recordMove(ctx, branchRef(agent), j.Old, j.New)
		rec.add(agent, "%s: an interrupted run had brought %s up to date with %s (%s); it is done", agent, Branch(agent), j.Base, text.Short(j.BaseTip, 7))
		return m.clearCurrent(agent)
	case tip != j.Old:
		rec.add(agent, "%s: an interrupted run had started to bring %s up to date with %s, but the branch has moved on since (now %s); nothing was undone", agent, Branch(agent), j.Base, text.Short(tip, 7))
		return m.clearCurrent(agent)
	}
	if _, err := m.worktreeDir(agent); err != nil {
		return m.clearCurrent(agent) // no worktree: nothing half switched
	}
	mine, foreign, err := m.switchLeftovers(ctx, path, j)
	if err != nil {
		return err
	}
	if len(foreign) > 0 {
		return fmt.Errorf("%w: an interrupted run was bringing %s up to date with %s, and its worktree %s holds changes that are not the merge's: %s. swarm touched nothing. Save what is yours (git stash), then run 'git -C %q reset --hard %s' and start again",
			ErrInterrupted, Branch(agent), j.Base, path, text.ListSome(foreign, 10), path, text.Short(j.Old, 7))
	}
	if len(mine) == 0 {
		rec.add(agent, "%s: an interrupted run had started to bring %s up to date with %s but changed nothing; it starts again", agent, Branch(agent), j.Base)
		return m.clearCurrent(agent)
	}
	// reset --hard moves the branch (HEAD's) with the index and files.
	if _, err := m.run(ctx, path, "reset", "-q", "--hard", j.New); err != nil {
		return fmt.Errorf("finish bringing %s up to date: %w; run 'git -C %q reset --hard %s' yourself", Branch(agent), err, path, text.Short(j.New, 7))
	}
	m.recordMove(ctx, branchRef(agent), j.Old, j.New)
	rec.add(agent, "%s: finished bringing %s up to date with %s (%s), which an interrupted run had left half done (%s)", agent, Branch(agent), j.Base, text.Short(j.BaseTip, 7), text.Plural(len(mine), "file", "files"))
	return m.clearCurrent(agent)
}

// switchLeftovers sorts the changes in the worktree at path, whose HEAD is
// at j.Old, into those a switch from j.Old to j.New explains and the rest.
func (m *Manager) switchLeftovers(ctx context.Context, path string, j currentJournal) (mine, foreign []string, err error) {
	chs, err := m.status(ctx, path, "all", false)
	if err != nil || len(chs) == 0 {
		return nil, nil, err
	}
	res, err := m.runEnv(ctx, path, nil, "diff-tree", "-r", "-z", "--no-renames", j.Old, j.New)
	if err != nil {
		return nil, nil, err
	}
	// ":<mode> <mode> <old> <new> <status>\0<path>\0" per path.
	type pair struct{ old, new string }
	switched := map[string]pair{}
	recs := strings.Split(string(res.Stdout), "\x00")
	for i := 0; i+1 < len(recs); i += 2 {
		f := strings.Fields(recs[i])
		if len(f) < 5 {
			continue
		}
		switched[recs[i+1]] = pair{old: zeroless(f[2]), new: zeroless(f[3])}
	}
	index, err := m.indexAt(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	var paths []string
	for _, c := range chs {
		paths = append(paths, c.path)
	}
	work, err := m.blobsAt(ctx, path, paths)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range chs {
		p := c.path
		sw, ok := switched[p]
		if !ok || unmerged(c) {
			foreign = append(foreign, c.String())
			continue
		}
		okIndex := index[p] == sw.old || index[p] == sw.new
		okWork := work[p] == sw.old || work[p] == sw.new || work[p] == "" || sw.new != "" && m.halfWrittenAt(ctx, path, p, sw.new)
		if c.x == '?' {
			okIndex = true // not in the index: the file of New, written before the index
			okWork = sw.old == "" && okWork
		}
		if okIndex && okWork {
			mine = append(mine, p)
		} else {
			foreign = append(foreign, c.String())
		}
	}
	return mine, foreign, nil
}

func zeroless(h string) string {
	if strings.Trim(h, "0") == "" {
		return ""
	}
	return h
}

// indexAt maps each path of the index of the worktree at dir to its
// stage-0 object.
func (m *Manager) indexAt(ctx context.Context, dir string) (map[string]string, error) {
	res, err := m.runEnv(ctx, dir, []string{"GIT_OPTIONAL_LOCKS=0"}, "ls-files", "-s", "-z")
	if err != nil {
		return nil, fmt.Errorf("read the index of %s: %w", dir, err)
	}
	out := map[string]string{}
	for _, rec := range strings.Split(string(res.Stdout), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[2] == "0" {
			out[p] = f[1]
		}
	}
	return out, nil
}

// blobsAt hashes the files at paths (relative to dir) as git would store
// them; a missing file maps to "", anything odd to a value matching no
// object.
func (m *Manager) blobsAt(ctx context.Context, dir string, paths []string) (map[string]string, error) {
	out := map[string]string{}
	var files []string
	for _, p := range paths {
		full := filepath.Join(dir, p)
		fi, err := os.Lstat(full)
		switch {
		case err != nil:
			out[p] = ""
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(full)
			if err != nil {
				return nil, err
			}
			h, err := m.runStdin(ctx, dir, target, "hash-object", "--stdin")
			if err != nil {
				return nil, err
			}
			out[p] = h
		case fi.Mode().IsRegular() && !strings.Contains(p, "\n") && !strings.HasPrefix(p, `"`):
			files = append(files, p)
		default:
			out[p] = "?" + p
		}
	}
	if len(files) == 0 {
		return out, nil
	}
	hashes, err := m.runStdin(ctx, dir, strings.Join(files, "\n")+"\n", "hash-object", "--stdin-paths")
	if err != nil {
		return nil, fmt.Errorf("hash the files in %s: %w", dir, err)
	}
	hs := strings.Split(hashes, "\n")
	if len(hs) != len(files) {
		return nil, fmt.Errorf("hash the files in %s: %d hashes for %d files", dir, len(hs), len(files))
	}
	for i, p := range files {
		out[p] = hs[i]
	}
	return out, nil
}

// halfWrittenAt reports whether the file p under dir holds the start of
// blob and no more: what a git killed while writing it leaves.
func (m *Manager) halfWrittenAt(ctx context.Context, dir, p, blob string) bool {
	full := filepath.Join(dir, p)
	fi, err := os.Lstat(full)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxHalfWritten {
		return false
	}
	have, err := os.ReadFile(full)
	if err != nil {
		return false
	}
	want, err := m.runEnv(ctx, dir, nil, "cat-file", "blob", blob)
	if err != nil {
		return false
	}
	return len(have) < len(want.Stdout) && strings.HasPrefix(string(want.Stdout), string(have))
}

// recoverCurrents finishes every interrupted KeepCurrent (Recover). The
// caller holds m.mu.
func (m *Manager) recoverCurrents(ctx context.Context, rec *recoveries) error {
	names, err := journalNames(m.currentDir(), checkAgent)
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	var errs []error
	for _, agent := range names {
		if err := m.recoverCurrent(ctx, agent, rec); err != nil {
			errs = append(errs, fmt.Errorf("recover %s: %w", agent, err))
		}
	}
	return errors.Join(errs...)
}

// atBase reports whether agent's branch, in its worktree, is at the base
// branch's tip, and the tip, with one git run and no lock. ok is false
// when that is not so or not sure (a journal of an interrupted run to
// recover, a read that failed): KeepCurrent then looks under the lock.
func (m *Manager) atBase(ctx context.Context, agent, base string) (string, bool) {
	if _, journaled, err := m.readCurrent(agent); err != nil || journaled {
		return "", false
	}
	if _, err := m.worktreeDir(agent); err != nil {
		return "", false
	}
	out, err := m.run(ctx, m.root, "rev-parse", "refs/heads/"+base+"^{commit}", branchRef(agent)+"^{commit}")
	if err != nil {
		return "", false
	}
	tips := strings.Fields(out)
	if len(tips) != 2 || tips[0] != tips[1] {
		return "", false
	}
	return tips[0], true
}
