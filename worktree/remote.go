package worktree

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/swarmhq/swarm/internal/text"
)

// Push publishes the agent's branch to remote, so that work done on this
// host can be merged from any other ([worktree] push). The branch is the
// agent's alone, and a branch made again after a merge does not descend
// from the pushed one, so the push forces.
func (m *Manager) Push(ctx context.Context, remote, agent string) error {
	ref := "refs/heads/" + Branch(agent)
	if ok, err := m.ok(ctx, m.root, "rev-parse", "--verify", "--quiet", ref); err != nil || !ok {
		return err // no branch yet: nothing to publish
	}
	if _, err := m.runRemote(ctx, m.root, "push", "--quiet", "--force", "--no-verify", remote, "+"+ref+":"+ref); err != nil {
		return fmt.Errorf("push %s to %s: %w", Branch(agent), remote, err)
	}
	return nil
}

// Fetched is what Fetch did for one agent.
type Fetched struct {
	Agent string
	// What is "created" (the branch was only on the remote),
	// "fast-forwarded", "up to date", "kept" (the local branch has work
	// the remote lacks, or a worktree here has it checked out), or
	// "absent" (not on the remote).
	What string
	Old  string
	New  string
}

func (f Fetched) String() string {
	switch f.What {
	case "created":
		return fmt.Sprintf("%s: fetched %s at %s", f.Agent, Branch(f.Agent), text.Short(f.New, 7))
	case "fast-forwarded":
		return fmt.Sprintf("%s: fetched %s, %s..%s", f.Agent, Branch(f.Agent), text.Short(f.Old, 7), text.Short(f.New, 7))
	}
	return fmt.Sprintf("%s: %s", f.Agent, f.What)
}

// Fetch brings the agents' branches from remote before a merge: a branch
// that exists only there is created here, and one the remote is ahead of
// is fast-forwarded. A local branch with work the remote lacks, or one
// checked out in a worktree here, is left as it is.
func (m *Manager) Fetch(ctx context.Context, remote string, agents []string) ([]Fetched, error) {
	var out []Fetched
	for _, a := range agents {
		ref := "refs/heads/" + Branch(a)
		ls, err := m.run(ctx, m.root, "ls-remote", "--heads", remote, ref)
		if err != nil {
			return out, fmt.Errorf("list %s's branches: %w", remote, err)
		}
		theirs, _, found := strings.Cut(strings.TrimSpace(ls), "\t")
		if !found || theirs == "" {
			out = append(out, Fetched{Agent: a, What: "absent"})
			continue
		}
		if _, err := m.runRemote(ctx, m.root, "fetch", "--quiet", "--no-tags", remote, ref); err != nil {
			return out, fmt.Errorf("fetch %s from %s: %w", Branch(a), remote, err)
		}
		mine, has, err := m.revParse(ctx, m.root, ref)
		if err != nil {
			return out, err
		}
		switch {
		case !has:
			if _, err := m.run(ctx, m.root, "update-ref", ref, theirs, ""); err != nil {
				return out, fmt.Errorf("create %s: %w", Branch(a), err)
			}
			out = append(out, Fetched{Agent: a, What: "created", New: theirs})
		case mine == theirs:
			out = append(out, Fetched{Agent: a, What: "up to date", Old: mine, New: theirs})
		default:
			info, err := m.Inspect(ctx, a)
			if err != nil {
				return out, err
			}
			ahead, err := m.isAncestor(ctx, mine, theirs)
			if err != nil {
				return out, err
			}
			if !ahead || info.Registered {
				out = append(out, Fetched{Agent: a, What: "kept", Old: mine, New: theirs})
				continue
			}
			if _, err := m.run(ctx, m.root, "update-ref", ref, theirs, mine); err != nil {
				return out, fmt.Errorf("fast-forward %s: %w", Branch(a), err)
			}
			out = append(out, Fetched{Agent: a, What: "fast-forwarded", Old: mine, New: theirs})
		}
	}
	return out, nil
}

// Several hosts share one base branch on the [worktree] push remote
// (DESIGN §12, §14): a landing builds on the remote's base (SyncBase
// fast-forwards the local base to it first), moves the local base by
// compare-and-set and then the remote's by a compare-and-set push (git
// push --force-with-lease=<base>:<old>). A push the remote refuses because
// another host moved it first moves the local base back: the candidate is
// tested again on the new remote base, never forced. A kill between the
// local move and the push's end is settled by the next run from the
// landing's journal entry (settlePush): pushed when the remote is still at
// the old tip, else moved back.

// remoteTimeout bounds one fetch or push of the base branch: a remote
// that hangs fails the landing, it does not hang the queue.
const remoteTimeout = 2 * time.Minute

// ErrBaseAhead: the local base branch has commits the remote's lacks (a
// landing or merge made here without the queue); the queue lands only on
// top of the remote's base.
var ErrBaseAhead = errors.New("the base branch has commits the remote lacks")

// RemoteBaseRef is where the remote's base branch is fetched to: the last
// tip this clone saw there (`swarm status` compares with it).
func RemoteBaseRef(base string) string { return "refs/swarm/remote/" + base }

// remoteTip asks remote where its base branch is; "" when it has none.
func (m *Manager) remoteTip(ctx context.Context, remote, base string) (string, error) {
	res, err := m.runRemote(ctx, m.root, "ls-remote", "--heads", remote, "refs/heads/"+base)
	if err != nil {
		return "", fmt.Errorf("ask %s where %s is: %w", remote, base, err)
	}
	tip, _, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), "\t")
	return tip, nil
}

// fetchBase fetches the remote's base branch to RemoteBaseRef and returns
// its tip.
func (m *Manager) fetchBase(ctx context.Context, remote, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	ref := "refs/heads/" + base
	if _, err := m.runRemote(ctx, m.root, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, "+"+ref+":"+RemoteBaseRef(base)); err != nil {
		if tip, lerr := m.remoteTip(ctx, remote, base); lerr == nil && tip == "" {
			return "", fmt.Errorf("the remote %s has no branch %s: push it once ('git push %s %s'), then run again", remote, base, remote, base)
		}
		return "", fmt.Errorf("fetch %s from %s: %w; check the remote ('git fetch %s %s')", base, remote, err, remote, base)
	}
	return m.resolveRef(ctx, RemoteBaseRef(base))
}

// pushBase moves the remote's base from j.Old to j.New, by compare-and-set.
// Another host's move first is ErrBaseMoved.
func (m *Manager) pushBase(ctx context.Context, j landJournal) error {
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	ref := "refs/heads/" + j.Base
	_, err := m.runRemote(ctx, m.root, "push", "--quiet", "--no-verify", "--force-with-lease="+ref+":"+j.Old, j.Remote, j.New+":"+ref)
	if err == nil {
		_, _ = m.run(ctx, m.root, "update-ref", RemoteBaseRef(j.Base), j.New)
		return nil
	}
	theirs, lerr := m.remoteTip(ctx, j.Remote, j.Base)
	switch {
	case lerr != nil:
		return fmt.Errorf("push %s to %s: %w (%v); nothing landed", j.Base, j.Remote, err, lerr)
	case theirs == j.New:
		return nil // it did take it; the answer was lost
	case theirs != j.Old:
		return fmt.Errorf("%w: %s's %s is at %s now, not at %s (another host landed first); nothing landed, nothing forced: test it again on the new tip", ErrBaseMoved, j.Remote, j.Base, text.Short(theirs, 12), text.Short(j.Old, 12))
	}
	return fmt.Errorf("push %s to %s: %w; nothing landed: check the remote ('git push %s %s')", j.Base, j.Remote, err, j.Remote, j.Base)
}

// unmove puts the local base back at j.Old after the remote did not take
// j.New, and drops the entry: nothing landed.
func (m *Manager) unmove(ctx context.Context, j landJournal, cause error) error {
	if _, err := m.run(ctx, m.root, "update-ref", "-m", "swarm: land "+j.Key+": the remote did not take it", "refs/heads/"+j.Base, j.Old, j.New); err != nil {
		// The entry stays: the next run settles it again.
		return errors.Join(cause, fmt.Errorf("moving %s back to %s failed too: %w; run again to settle it", j.Base, text.Short(j.Old, 12), err))
	}
	var err error
	if j.Detached {
		err = m.reattach(ctx, j)
	}
	return errors.Join(cause, err, m.clearLanding(j.Key))
}

// settlePush finishes the push of an interrupted landing whose local move
// happened: it reports whether the remote holds j.New now (pushed before
// the kill, or now, the remote still at j.Old); otherwise the local base
// goes back to j.Old and the entry is dropped.
func (m *Manager) settlePush(ctx context.Context, j landJournal, now string, rec *recoveries) (bool, error) {
	theirs, err := m.remoteTip(ctx, j.Remote, j.Base)
	if err != nil {
		return false, fmt.Errorf("%w; an interrupted landing of %s moved %s here but may not have reached %s yet: run again once the remote answers", err, text.Short(j.Candidate, 12), j.Base, j.Remote)
	}
	if theirs == j.New {
		_, _ = m.run(ctx, m.root, "update-ref", RemoteBaseRef(j.Base), j.New)
		return true, nil
	}
	if theirs == j.Old && now == j.New {
		err := m.pushBase(ctx, j)
		if err == nil {
			rec.add(j.Agent, "finished an interrupted landing of %s (%s): pushed %s to %s, which was still at %s", text.Short(j.Candidate, 12), j.Key, j.Base, j.Remote, text.Short(j.Old, 12))
			return true, nil
		}
		if !errors.Is(err, ErrBaseMoved) {
			return false, err
		}
	} else if theirs != "" && theirs != j.Old {
		// Moved on since: it holds the landing if New is in its history.
		if tip, err := m.fetchBase(ctx, j.Remote, j.Base); err == nil {
			if on, err := m.isAncestor(ctx, j.New, tip); err == nil && on {
				return true, nil
			}
		}
	}
	if err := m.unmove(ctx, j, nil); err != nil {
		return false, err
	}
	rec.add(j.Agent, "an interrupted landing of %s (%s) had moved %s here, but %s did not take it (it is at %s): %s is back at %s, nothing landed", text.Short(j.Candidate, 12), j.Key, j.Base, j.Remote, text.Short(theirs, 12), j.Base, text.Short(j.Old, 12))
	return false, nil
}

// syncKey is the journal key of SyncBase's fast-forward.
const syncKey = "sync-base"

// BaseSync is what SyncBase did.
type BaseSync struct {
	Base string
	// Old is the local base before, New the remote's (and now the local)
	// tip; equal when nothing moved.
	Old, New string
	// Checkout says what became of the operator's checkout when the base
	// moved; Behind that it was left behind (uncommitted changes).
	Checkout string
	Behind   bool
	// Recovered is what was finished or dropped of interrupted landings.
	Recovered []Recovery
}

// SyncBase brings the local base branch to the remote's: interrupted
// landings are settled first, then the remote's base is fetched and the
// local one fast-forwarded to it (journaled as a landing is; the
// operator's clean checkout comes along, a dirty one is refused, or left
// alone detached with leaveDirty). A local base with commits the remote
// lacks is ErrBaseAhead: nothing moves.
func (m *Manager) SyncBase(ctx context.Context, remote string, leaveDirty bool) (res BaseSync, err error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return res, err
	}
	res.Base = base
	m.mu.Lock()
	defer m.mu.Unlock()
	var rec recoveries
	defer func() { res.Recovered = rec }()
	if err := m.settleBase(ctx, &rec); err != nil {
		return res, err
	}
	// An interrupted sync has no one else to clear its entry.
	if mine, err := m.recoverLandings(ctx, &rec, syncKey); err != nil {
		return res, err
	} else if mine != nil && (!mine.Checkout || mine.Forwarded) {
		if err := m.clearLanding(syncKey); err != nil {
			return res, err
		}
	}
	theirs, err := m.fetchBase(ctx, remote, base)
	if err != nil {
		return res, err
	}
	mine, err := m.resolveRef(ctx, "refs/heads/"+base)
	if err != nil {
		return res, err
	}
	res.Old, res.New = mine, theirs
	if mine == theirs {
		return res, nil
	}
	if behind, err := m.isAncestor(ctx, mine, theirs); err != nil {
		return res, err
	} else if !behind {
		n, _ := m.run(ctx, m.root, "rev-list", "--count", theirs+".."+mine)
		return res, fmt.Errorf("%w: your %s has %s commit(s) that %s's %s lacks; the merge queue lands only on top of %s's: push them ('git push %s %s') or drop them, then run again",
			ErrBaseAhead, base, n, remote, base, remote, remote, base)
	}
	req := LandRequest{Key: syncKey, LeaveDirty: leaveDirty}
	j := landJournal{Key: req.Key, Candidate: theirs, Subject: "fetched from " + remote, Base: base, Old: mine}
	if err := m.checkoutMode(ctx, req, &j); err != nil {
		return res, err
	}
	if j, err = m.writeLanding(ctx, j, landBuilding); err != nil {
		return res, err
	}
	j.New = theirs
	l, err := m.moveBase(ctx, req, Landing{Base: base, Old: mine}, j, func(err error) error { return errors.Join(err, m.clearLanding(j.Key)) })
	res.Checkout, res.Behind = l.Checkout, l.Behind
	return res, err
}

// FetchBase fetches the remote's base branch to RemoteBaseRef without
// moving anything else, and returns its tip: a host whose queue is idle
// still learns what others landed (RemoteBehind).
func (m *Manager) FetchBase(ctx context.Context, remote string) (string, error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fetchBase(ctx, remote, base)
}

// RemoteBehind reports how many commits the local base branch is behind
// the remote's as this clone last fetched it (RemoteBaseRef): another
// host landed them. It only reads; 0 when unknown.
func (m *Manager) RemoteBehind(ctx context.Context) (base string, n int, err error) {
	base, err = m.BaseBranch(ctx)
	if err != nil {
		return "", 0, err
	}
	theirs, err := m.resolveRef(ctx, RemoteBaseRef(base))
	if err != nil || theirs == "" {
		return base, 0, err
	}
	out, err := m.run(ctx, m.root, "rev-list", "--count", "refs/heads/"+base+".."+theirs)
	if err != nil {
		return base, 0, err
	}
	fmt.Sscan(out, &n)
	return base, n, nil
}

// Pruned is what PruneRemote did with one agent's remote branch.
type Pruned struct {
	Agent string
	// What is "deleted" (every commit is on the remote's base), "kept"
	// (it has commits the base lacks, or it moved while being checked)
	// or "absent" (not on the remote).
	What string
	Tip  string
}

func (p Pruned) String() string {
	switch p.What {
	case "deleted":
		return fmt.Sprintf("deleted the remote %s (at %s, all on the base)", Branch(p.Agent), text.Short(p.Tip, 12))
	case "kept":
		return fmt.Sprintf("kept the remote %s (at %s): it has commits the base lacks", Branch(p.Agent), text.Short(p.Tip, 12))
	}
	return fmt.Sprintf("%s is not on the remote", Branch(p.Agent))
}

// PruneRemote deletes swarm/<agent> on remote when the remote's base holds
// every commit of it (`swarm land --prune-remote`). The delete is a
// compare-and-set too: a branch pushed again since it was checked is
// kept.
func (m *Manager) PruneRemote(ctx context.Context, remote, agent string) (Pruned, error) {
	p := Pruned{Agent: agent, What: "absent"}
	if err := checkAgent(agent); err != nil {
		return p, err
	}
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return p, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	baseTip, err := m.fetchBase(ctx, remote, base)
	if err != nil {
		return p, err
	}
	ref := branchRef(agent)
	if p.Tip, err = m.remoteTip(ctx, remote, Branch(agent)); err != nil || p.Tip == "" {
		return p, err
	}
	// Its commits must be here to be compared: fetched aside, dropped after.
	aside := "refs/swarm/prune/" + agent
	if _, err := m.runRemote(ctx, m.root, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, "+"+ref+":"+aside); err != nil {
		return p, fmt.Errorf("fetch %s from %s: %w", Branch(agent), remote, err)
	}
	defer func() { _, _ = m.run(context.WithoutCancel(ctx), m.root, "update-ref", "-d", aside) }()
	if tip, err := m.resolveRef(ctx, aside); err != nil {
		return p, err
	} else if tip != p.Tip {
		p.What, p.Tip = "kept", tip // pushed again meanwhile
		return p, nil
	}
	on, err := m.isAncestor(ctx, p.Tip, baseTip)
	if err != nil {
		return p, err
	}
	if !on {
		p.What = "kept"
		return p, nil
	}
	if _, err := m.runRemote(ctx, m.root, "push", "--quiet", "--no-verify", "--force-with-lease="+ref+":"+p.Tip, remote, ":"+ref); err != nil {
		if now, lerr := m.remoteTip(ctx, remote, Branch(agent)); lerr == nil && now != p.Tip {
			p.What, p.Tip = "kept", now // pushed again meanwhile: not deleted
			return p, nil
		}
		return p, fmt.Errorf("delete %s on %s: %w", Branch(agent), remote, err)
	}
	p.What = "deleted"
	return p, nil
}
