package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// recoverLandings settles every journaled landing an interrupted run left:
// one that had not moved the base branch is dropped; one that had gets the
// operator's checkout brought forward, and stays journaled (landed) until
// its own key's run records it. It returns the entry of key when that
// landing had moved the base. The caller holds m.mu.
func (m *Manager) recoverLandings(ctx context.Context, rec *recoveries, key string) (*landJournal, error) {
	keys, err := m.landings()
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	var mine *landJournal
	for _, k := range keys {
		j, ok, err := m.readLanding(k)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if ownerRunning(landAsJournal(j)) {
			return nil, fmt.Errorf("%w: process %d is landing %s on %s right now; wait for it to finish, then run again", ErrBusy, j.PID, text.Short(j.Candidate, 12), j.Base)
		}
		// The copy of the index a killed dry run left (dryForward).
		for _, f := range []string{k + ".index", k + ".index.lock"} {
			_ = os.Remove(filepath.Join(m.landDir(), f))
		}
		landed, err := m.settleLanding(ctx, &j, rec)
		if err != nil {
			return nil, err
		}
		if landed && k == key {
			mine = &j
		}
	}
	return mine, nil
}

func landAsJournal(j landJournal) journal { return journal{PID: j.PID, PIDStart: j.PIDStart} }

// settleLanding finishes or drops one interrupted landing; it reports
// whether the base branch holds it.
func (m *Manager) settleLanding(ctx context.Context, j *landJournal, rec *recoveries) (bool, error) {
	baseRef := "refs/heads/" + j.Base
	// update-ref writes the ref (and HEAD's reflog) through lock files; a
	// kill in between leaves them, and every later move of the base fails.
	for _, name := range []string{baseRef + ".lock", "HEAD.lock"} {
		lock, err := m.gitPath(ctx, name)
		if err != nil {
			return false, err
		}
		common, err := m.gitCommonDir(ctx)
		if err != nil {
			return false, err
		}
		if removed, err := removeLock(lock, []string{m.root, common}, []string{m.dir, filepath.Join(common, "worktrees")}, false); err != nil {
			return false, err
		} else if removed {
			rec.add(j.Agent, "removed the stale %s that a killed git left in %s", lock, m.root)
		}
	}
	now, err := m.resolveRef(ctx, baseRef)
	if err != nil {
		return false, err
	}
	landed := j.New != "" && now != "" && now == j.New
	if j.New != "" && now != "" && now != j.New && now != j.Old {
		if landed, err = m.isAncestor(ctx, j.New, now); err != nil {
			return false, err
		}
	}
	if landed && j.Remote != "" && j.State != landLanded {
		// Killed between the local move and the end of the push.
		pushed, err := m.settlePush(ctx, *j, now, rec)
		if err != nil {
			return false, err
		}
		if !pushed {
			return false, nil
		}
	}
	if !landed {
		if j.Detached {
			if err := m.reattach(ctx, *j); err != nil {
				return false, err
			}
		}
		if err := m.clearLanding(j.Key); err != nil {
			return false, err
		}
		if j.State == landLanded {
			// Moved back since (the operator reset it): the base does not
			// hold the landing, so it counts as not landed.
			rec.add(j.Agent, "an interrupted landing of %s (%s) had moved %s to %s, but %s is at %s now without it; it counts as not landed", text.Short(j.Candidate, 12), j.Key, j.Base, text.Short(j.New, 12), j.Base, text.Short(now, 12))
			return false, nil
		}
		rec.add(j.Agent, "an interrupted landing of %s (%s) had not moved %s; nothing was undone, as nothing had changed", text.Short(j.Candidate, 12), j.Key, j.Base)
		return false, nil
	}
	if j.State != landLanded {
		j.Forwarded = false
		var err error
		if *j, err = m.writeLanding(ctx, *j, landLanded); err != nil {
			return true, err
		}
		m.recordMove(ctx, baseRef, j.Old, j.New)
	}
	if j.Checkout && !j.Forwarded {
		if err := m.finishForward(ctx, j, now, rec); err != nil {
			return true, err
		}
		j.Forwarded = true
		var err error
		if *j, err = m.writeLanding(ctx, *j, landLanded); err != nil {
			return true, err
		}
	}
	return true, nil
}

// finishForward brings the operator's checkout from j.Old to j.New after
// an interruption: the base moved, so HEAD is at j.New while the index and
// files may be at j.Old, half way, or at j.New. Every change there must be
// the landing's (each path's index entry and file are its Old or its New
// version, the start of the New one or missing, as a git killed while
// writing leaves it); then `git reset --hard` to j.New finishes it. Anything else
// is the operator's, and nothing is touched.
func (m *Manager) finishForward(ctx context.Context, j *landJournal, now string, rec *recoveries) error {
	h, err := readHead(m.root)
	if err != nil {
		return err
	}
	if h.Ref != "refs/heads/"+j.Base || now != j.New {
		rec.add(j.Agent, "an interrupted landing had moved %s to %s, but your checkout %s is on %s now; it was left alone", j.Base, text.Short(j.New, 12), m.root, h.describe())
		return nil
	}
	if err := m.clearBaseLock(ctx, rec); err != nil {
		return err
	}
	chs, err := m.status(ctx, m.root, "all", false)
	if err != nil {
		return err
	}
	if len(chs) == 0 {
		return nil
	}
	old, err := m.treeBlobs(ctx, j.Old)
	if err != nil {
		return err
	}
	nw, err := m.treeBlobs(ctx, j.New)
	if err != nil {
		return err
	}
	index, err := m.indexBlobs(ctx)
	if err != nil {
		return err
	}
	work, err := m.workBlobs(ctx, chs)
	if err != nil {
		return err
	}
	var foreign []string
	mine := map[string]bool{} // a file the update added shows twice: deleted from the index, and untracked
	for _, c := range chs {
		p := c.path
		if c.x == '?' {
			// The operator's untracked files are never touched; one the
			// update wrote is the new version of a file Old lacks.
			if b, ok := nw[p]; ok && old[p] == "" && (work[p] == b || m.halfWritten(ctx, p, b)) {
				mine[p] = true
			} else if _, ok := nw[p]; ok {
				foreign = append(foreign, c.String())
			}
			continue
		}
		if strings.HasSuffix(p, "/") || unmerged(c) {
			foreign = append(foreign, c.String())
			continue
		}
		allowed := map[string]bool{old[p]: true, nw[p]: true}
		idx := ""
		if bs := index[p]; len(bs) == 1 {
			idx = bs[0]
		}
		switch {
		case old[p] == nw[p]:
			// The landing does not change p: the change is the operator's.
			foreign = append(foreign, c.String())
		case allowed[idx] && (allowed[work[p]] || work[p] == "" || nw[p] != "" && m.halfWritten(ctx, p, nw[p])):
			// Its old or new version, the start of the new one (git
			// killed while writing it), or missing (git replaces a file
			// by unlinking it first, and was killed in between).
			mine[p] = true
		default:
			foreign = append(foreign, c.String())
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("%w: an interrupted landing moved %s to %s while bringing your checkout %s forward, and these changes there are not the landing's: %s. swarm touched nothing. Save what is yours (git stash), then run 'git -C %q reset --hard %s' and run again",
			ErrInterrupted, j.Base, text.Short(j.New, 12), m.root, text.ListSome(foreign, 10), m.root, text.Short(j.New, 12))
	}
	if _, err := m.run(ctx, m.root, "reset", "-q", "--hard", j.New); err != nil {
		return fmt.Errorf("bring your checkout %s forward to %s: %w; run 'git -C %q reset --hard %s' yourself", m.root, text.Short(j.New, 12), err, m.root, text.Short(j.New, 12))
	}
	rec.add(j.Agent, "finished bringing your checkout %s forward to %s (%s), which an interrupted landing of %s had started", m.root, text.Short(j.New, 12), text.Plural(len(mine), "file", "files"), text.Short(j.Candidate, 12))
	return nil
}

// landingExplains reports whether the uncommitted changes in the main
// checkout are an interrupted landing's half-done update, which the next
// Land or Recover finishes.
func (m *Manager) landingExplains(ctx context.Context, base string) bool {
	keys, err := m.landings()
	if err != nil {
		return false
	}
	for _, k := range keys {
		j, ok, err := m.readLanding(k)
		if err == nil && ok && j.Base == base && j.Checkout && !j.Forwarded && j.New != "" {
			if now, err := m.resolveRef(ctx, "refs/heads/"+base); err == nil && now == j.New {
				return true
			}
		}
	}
	return false
}
