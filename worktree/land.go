package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/proc"
)

// A landing puts one commit of an agent's branch on the base branch
// (DESIGN §14) without ever leaving a half-merge in the operator's
// checkout:
//
//  1. the merge commit base + candidate is built in memory (`git merge-tree
//     --write-tree`, then `git commit-tree`): objects only, no ref, index or
//     file is touched;
//  2. the base branch moves with a compare-and-set `git update-ref <base>
//     <new> <old>`, atomic in git;
//  3. only then, and only when it has the base branch checked out and was
//     clean, the operator's checkout is brought forward (`git read-tree -m
//     -u <old> <new>`, the two-tree switch git checkout does);
//  4. the caller records the outcome (a workflow item merged).
//
// Each step is journaled first (<Journal>/land/<key>.json), so a kill -9 or
// a Ctrl-C anywhere leaves the base at its old or its new commit, and the
// next run (Land with the same key, Recover, CheckBase) sees which: a
// landing that had not moved the base is dropped (nothing to undo: only
// unreachable objects were written), one that had is finished: the checkout
// brought forward, the outcome recorded.

// Landing journal states.
const (
	landBuilding = "building" // building the merge commit in memory; the base is at Old
	landMoving   = "moving"   // New is built; the base is at Old or at New
	landLanded   = "landed"   // the base is at New (or beyond it)
)

// landJournal is one landing's entry.
type landJournal struct {
	Version   int    `json:"version"`
	Key       string `json:"key"`
	State     string `json:"state"`
	Agent     string `json:"agent"`
	Candidate string `json:"candidate"`
	Subject   string `json:"subject"`
	Base      string `json:"base"`
	Old       string `json:"old"`
	New       string `json:"new,omitempty"`
	// Checkout is set when the operator's checkout had the base branch
	// checked out, clean, when the landing started: it is brought forward
	// from Old to New after the move, and Forwarded says that is done.
	Checkout  bool `json:"checkout,omitempty"`
	Forwarded bool `json:"forwarded,omitempty"`
	// Detached is set when the operator's checkout had the base branch
	// checked out with uncommitted changes (LandRequest.LeaveDirty): its
	// HEAD is detached at Old just before the base moves, so its index and
	// files stay consistent with its HEAD; a landing that does not happen
	// puts HEAD back on the base branch.
	Detached bool `json:"detached,omitempty"`
	// Remote is set when the base also moves on the shared remote
	// ([worktree] push) by a compare-and-set push from Old to New, after
	// the local move: a landing whose push did not happen is pushed or
	// rolled back by the next run (settlePush), and is landed only once
	// the remote holds New.
	Remote   string    `json:"remote,omitempty"`
	PID      int       `json:"pid"`
	PIDStart uint64    `json:"pid_start,omitempty"`
	Time     time.Time `json:"time"`
}

// landStep, when set (by tests), is called after each journaled step of a
// landing with the step's name: a test kills the process there.
var landStep func(step string)

func landHook(step string) {
	if landStep != nil {
		landStep(step)
	}
}

// LandRequest is one commit to land on the base branch.
type LandRequest struct {
	// Key names the landing in the journal ("item-T-42"): letters, digits,
	// '-', '_' and '.'. A run with the key of an interrupted landing
	// finishes it or drops it first.
	Key string
	// Agent's branch must hold Commit.
	Agent  string
	Commit string
	// Subject is the merge commit's message.
	Subject string
	// Prepared, when set, is a commit already built on top of Expected
	// (the merge queue's tested batch, TestBatch): it lands as it is,
	// nothing is merged, and only while the base branch is still at
	// Expected (ErrBaseMoved otherwise, nothing moved). Commit is then
	// not checked against the agent's branch.
	Prepared, Expected string
	// LeaveDirty lands even when the operator's checkout has the base
	// branch checked out with uncommitted changes: the ref moves, the
	// checkout's files and index are left alone (its HEAD detached at the
	// old tip, see landJournal.Detached), and Landing.Checkout says how to
	// catch up. Without it such a checkout refuses the landing
	// (ErrBaseDirty).
	LeaveDirty bool
	// Remote, when set ([worktree] push), is the shared remote whose base
	// branch moves too, by a compare-and-set push from the old tip (git
	// push --force-with-lease): the remote's base must be where the local
	// one is (SyncBase first). A push whose lease fails (another host
	// moved the remote) moves the local base back and returns
	// ErrBaseMoved: nothing landed, nothing forced.
	Remote string
	// Record, when set, records the outcome once the base branch holds
	// Commit (Landing.Commit is "" when it already did). It runs before the
	// journal entry is cleared, so after an interruption it runs again: it
	// must be idempotent. An error leaves the entry for the next run.
	Record func(ctx context.Context, l Landing) error
}

// Landing is what Land did.
type Landing struct {
	Base string
	// Old is the base tip before the landing; Commit the merge commit now
	// on the base branch, "" when the candidate was on it already.
	Old    string
	Commit string
	// Checkout says, in a sentence, what became of the operator's
	// checkout: brought forward, or left alone and how to update it.
	Checkout string
	// Behind is set when the operator's checkout was left behind the new
	// base (LeaveDirty): detached at Old with its changes.
	Behind bool
	// Recovered is what was finished or dropped of interrupted landings
	// (and merges) first; print it.
	Recovered []Recovery
}

// ErrBaseMoved: the base branch moved while the landing was being built;
// nothing landed.
var ErrBaseMoved = errors.New("the base branch moved during the landing")

// landingKey checks a journal key.
func landingKey(key string) error {
	if key == "" || len(key) > 100 || key[0] == '.' {
		return fmt.Errorf("bad landing key %q", key)
	}
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("bad landing key %q", key)
		}
	}
	return nil
}

func (m *Manager) landDir() string { return filepath.Join(m.journal, "land") }

func (m *Manager) landPath(key string) string { return filepath.Join(m.landDir(), key+".json") }

func (m *Manager) readLanding(key string) (landJournal, bool, error) {
	return readEntry(m.landPath(key), "the landing journal of "+key, m.root,
		func(j landJournal) (int, bool) { return j.Version, j.Key == key && j.State != "" })
}

// writeLanding records j durably before the step it announces.
func (m *Manager) writeLanding(ctx context.Context, j landJournal, state string) (landJournal, error) {
	j.State = state
	j.Version, j.PID, j.PIDStart, j.Time = m.stamp()
	if err := m.writeEntry(ctx, m.landDir(), m.landPath(j.Key), j); err != nil {
		return j, fmt.Errorf("journal the landing %s: %w", j.Key, err)
	}
	return j, nil
}

func (m *Manager) clearLanding(key string) error {
	err := os.Remove(m.landPath(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clear the landing journal of %s: %w", key, err)
	}
	return syncDir(m.landDir())
}

// landings lists the keys of the journaled landings, sorted.
func (m *Manager) landings() ([]string, error) {
	keys, err := journalNames(m.landDir(), landingKey)
	if err != nil {
		return nil, fmt.Errorf("read the landing journal: %w", err)
	}
	return keys, nil
}

// ForgetLanding drops the journal entry of the landing key once its
// outcome is recorded elsewhere (the item is merged): a run killed after
// its Record and before clearing the entry leaves it behind.
func (m *Manager) ForgetLanding(key string) error {
	if err := landingKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok, err := m.readLanding(key)
	if err != nil || !ok {
		return err
	}
	if j.State != landLanded || (j.Checkout && !j.Forwarded) {
		return nil // the next run must finish it first
	}
	return m.clearLanding(key)
}

// Land lands req.Commit, which must be on swarm/<req.Agent>, on the base
// branch with a merge commit (see the top of this file), and calls
// req.Record. It first finishes or drops what interrupted landings (and
// swarm down merges) left. It refuses, changing nothing, when the main
// checkout has the base branch checked out and holds uncommitted changes to
// tracked files or a merge in progress (ErrBaseDirty), when the commit is
// not on the agent's branch, and on a conflict (*ConflictError); a checkout
// on another branch is left alone and Landing.Checkout says how to update
// it. A commit already on the base branch lands nothing (Commit "") and is
// still recorded.
//
// Once the base branch has moved, a cancelled ctx (Ctrl-C) no longer stops
// it: bringing the checkout forward and recording finish first.
func (m *Manager) Land(ctx context.Context, req LandRequest) (res Landing, err error) {
	if err := landingKey(req.Key); err != nil {
		return res, err
	}
	if err := checkAgent(req.Agent); err != nil {
		return res, err
	}
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
	mine, err := m.recoverLandings(ctx, &rec, req.Key)
	if err != nil {
		return res, err
	}
	if mine != nil {
		// An interrupted run of this landing had moved the base: finish it.
		res.Old, res.Commit = mine.Old, mine.New
		if on, _ := m.ok(ctx, m.root, "merge-base", "--is-ancestor", mine.New, "refs/heads/"+base); !on {
			res.Commit = "" // landed by other means
		}
		res.Checkout = m.checkoutNote(ctx, base, *mine)
		return res, m.recordLanding(context.WithoutCancel(ctx), *mine, res, req.Record)
	}
	if req.Prepared != "" {
		return m.landPrepared(ctx, req, res)
	}
	if on, err := m.ok(ctx, m.root, "merge-base", "--is-ancestor", req.Commit, branchRef(req.Agent)); err != nil || !on {
		if err == nil {
			err = fmt.Errorf("commit %s is not on %s (was the branch reset?); merge it by hand or start the item again", text.Short(req.Commit, 12), Branch(req.Agent))
		}
		return res, err
	}
	old, err := m.resolveRef(ctx, "refs/heads/"+base)
	if err != nil {
		return res, err
	}
	res.Old = old
	j := landJournal{Key: req.Key, Agent: req.Agent, Candidate: req.Commit, Subject: req.Subject, Base: base, Old: old, Remote: req.Remote}
	if on, err := m.ok(ctx, m.root, "merge-base", "--is-ancestor", req.Commit, old); err != nil {
		return res, err
	} else if on {
		j.State = landLanded
		res.Checkout = m.checkoutNote(ctx, base, j)
		return res, m.recordLanding(ctx, j, res, req.Record)
	}
	if err := m.checkoutMode(ctx, req, &j); err != nil {
		return res, err
	}
	if err := m.mergeTreeSupported(ctx); err != nil {
		return res, err
	}
	if j, err = m.writeLanding(ctx, j, landBuilding); err != nil {
		return res, err
	}
	landHook("building")
	// Until the base moves, any failure leaves nothing to undo.
	drop := func(err error) error {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("interrupted before %s moved; nothing landed: %w (%v)", base, cerr, err)
		}
		return errors.Join(err, m.clearLanding(j.Key))
	}
	tree, files, err := m.mergeTree(ctx, old, req.Commit)
	if err != nil {
		return res, drop(err)
	}
	if len(files) > 0 {
		return res, drop(&ConflictError{Agent: req.Agent, Branch: Branch(req.Agent), Base: base, Files: files})
	}
	env := m.identity(ctx, m.root, "", "")
	j.New, err = m.runStdin2(ctx, env, req.Subject+"\n", "commit-tree", tree, "-p", old, "-p", req.Commit)
	if err != nil {
		return res, drop(fmt.Errorf("make the merge commit of %s: %w", text.Short(req.Commit, 12), err))
	}
	return m.moveBase(ctx, req, res, j, drop)
}

// moveBase lands j.New, built on j.Old: it journals the move, moves the
// base branch by compare-and-set, brings a clean checkout forward (or
// leaves a dirty one detached at j.Old) and records the outcome. drop
// clears the entry while nothing has moved.
func (m *Manager) moveBase(ctx context.Context, req LandRequest, res Landing, j landJournal, drop func(error) error) (Landing, error) {
	base := j.Base
	old := j.Old
	var err error
	undo := drop
	drop = func(err error) error {
		if j.Detached {
			err = errors.Join(err, m.reattach(context.WithoutCancel(ctx), j))
		}
		return undo(err)
	}
	if j.Checkout {
		// Untracked files in the way of the new ones are refused now,
		// before the base moves, not half way through the update; with
		// LeaveDirty the checkout is left alone instead.
		if err := m.dryForward(ctx, j); err != nil {
			if !req.LeaveDirty {
				return res, drop(err)
			}
			j.Checkout, j.Detached = false, true
		}
	}
	if j, err = m.writeLanding(ctx, j, landMoving); err != nil {
		return res, drop(err)
	}
	landHook("moving")
	if err := ctx.Err(); err != nil {
		return res, drop(fmt.Errorf("interrupted before %s moved; nothing landed: %w", base, err))
	}
	if j.Detached {
		// Only HEAD changes (one atomic rename): the checkout's index and
		// files keep matching it, at the old tip.
		if _, err := m.run(ctx, m.root, "update-ref", "--no-deref", "-m", "swarm: land "+req.Key+": your checkout has changes, left at the old tip", "HEAD", old); err != nil {
			return res, drop(fmt.Errorf("detach your checkout %s at %s: %w; nothing landed", m.root, text.Short(old, 12), err))
		}
		landHook("detached")
	}
	_, err = m.run(ctx, m.root, "update-ref", "-m", "swarm: land "+req.Key, "refs/heads/"+base, j.New, old)
	// From here on the landing is finished even when ctx is cancelled: a
	// Ctrl-C must not leave it moved but unrecorded.
	ctx = context.WithoutCancel(ctx)
	if err != nil {
		now, rerr := m.resolveRef(ctx, "refs/heads/"+base)
		switch {
		case rerr != nil:
			return res, errors.Join(err, rerr) // the entry stays for the next run
		case now == old:
			return res, drop(fmt.Errorf("move %s: %w; nothing landed", base, err))
		case now != j.New:
			return res, drop(fmt.Errorf("%w: %s is at %s now, not at %s; nothing landed, run again to land on top of it", ErrBaseMoved, base, text.Short(now, 12), text.Short(old, 12)))
		}
		// git was killed after its rename: the base did move.
	}
	landHook("moved")
	if j.Remote != "" {
		// The local move is undone unless the remote takes it: the local
		// base never stays ahead of the remote's, so no host diverges.
		if err := m.pushBase(ctx, j); err != nil {
			return res, m.unmove(ctx, j, err)
		}
		landHook("pushed")
	}
	if j, err = m.writeLanding(ctx, j, landLanded); err != nil {
		return res, err
	}
	m.recordMove(ctx, "refs/heads/"+base, old, j.New)
	landHook("landed")
	res.Commit = j.New
	if j.Checkout {
		if _, err := m.run(ctx, m.root, "read-tree", "-m", "-u", old, j.New); err != nil {
			return res, fmt.Errorf("%s now holds %s as %s, but bringing your checkout %s forward failed: %w; run the merge again to finish it (or 'git -C %q reset --hard' if nothing there is yours)",
				base, text.Short(j.Candidate, 12), text.Short(j.New, 12), m.root, err, m.root)
		}
		landHook("forwarded")
		j.Forwarded = true
		if j, err = m.writeLanding(ctx, j, landLanded); err != nil {
			return res, err
		}
	}
	res.Checkout = m.checkoutNote(ctx, base, j)
	res.Behind = j.Detached
	return res, m.recordLanding(ctx, j, res, req.Record)
}

// checkoutMode decides what becomes of the operator's checkout: brought
// forward when it has the base branch checked out and is clean; left
// alone on another branch; with uncommitted changes, refused
// (ErrBaseDirty), or with req.LeaveDirty left alone detached at the old
// tip.
func (m *Manager) checkoutMode(ctx context.Context, req LandRequest, j *landJournal) error {
	h, err := readHead(m.root)
	if err != nil {
		return err
	}
	if h.Ref != "refs/heads/"+j.Base {
		return nil
	}
	if err := m.checkBase(ctx, j.Base); err != nil {
		if req.LeaveDirty && errors.Is(err, ErrBaseDirty) {
			j.Detached = true
			return nil
		}
		return err
	}
	j.Checkout = true
	return nil
}

// reattach puts the operator's HEAD back on the base branch after a
// landing that detached it did not happen: only when HEAD is still
// detached at the old tip (the operator did not move it since).
func (m *Manager) reattach(ctx context.Context, j landJournal) error {
	h, err := readHead(m.root)
	if err != nil || h.Ref != "" || h.Hash != j.Old {
		return err
	}
	if _, err := m.run(ctx, m.root, "symbolic-ref", "-m", "swarm: the landing "+j.Key+" did not happen", "HEAD", "refs/heads/"+j.Base); err != nil {
		return fmt.Errorf("put your checkout %s back on %s: %w; run 'git -C %q switch %s'", m.root, j.Base, err, m.root, j.Base)
	}
	return nil
}

// landPrepared lands req.Prepared, a commit already built on
// req.Expected: the base moves only while it is still at Expected.
func (m *Manager) landPrepared(ctx context.Context, req LandRequest, res Landing) (Landing, error) {
	base := res.Base
	old, err := m.resolveRef(ctx, "refs/heads/"+base)
	if err != nil {
		return res, err
	}
	res.Old = old
	if old != req.Expected {
		return res, fmt.Errorf("%w: %s is at %s now, not at %s where the landing was tested; nothing landed, test it again", ErrBaseMoved, base, text.Short(old, 12), text.Short(req.Expected, 12))
	}
	j := landJournal{Key: req.Key, Agent: req.Agent, Candidate: req.Prepared, Subject: req.Subject, Base: base, Old: old, Remote: req.Remote}
	if req.Prepared == old {
		j.State = landLanded
		res.Checkout = m.checkoutNote(ctx, base, j)
		return res, m.recordLanding(ctx, j, res, req.Record)
	}
	if on, err := m.isAncestor(ctx, old, req.Prepared); err != nil {
		return res, err
	} else if !on {
		return res, fmt.Errorf("the prepared commit %s is not built on %s's %s; nothing landed", text.Short(req.Prepared, 12), base, text.Short(old, 12))
	}
	if err := m.checkoutMode(ctx, req, &j); err != nil {
		return res, err
	}
	if j, err = m.writeLanding(ctx, j, landBuilding); err != nil {
		return res, err
	}
	drop := func(err error) error {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("interrupted before %s moved; nothing landed: %w (%v)", base, cerr, err)
		}
		return errors.Join(err, m.clearLanding(j.Key))
	}
	j.New = req.Prepared
	return m.moveBase(ctx, req, res, j, drop)
}

// recordLanding calls record, then clears the entry: the landing is done.
func (m *Manager) recordLanding(ctx context.Context, j landJournal, res Landing, record func(context.Context, Landing) error) error {
	if record != nil {
		if err := record(ctx, res); err != nil {
			return fmt.Errorf("%s holds %s, but recording it failed: %w; run again to record it", j.Base, text.Short(j.Candidate, 12), err)
		}
	}
	landHook("recorded")
	if j.State == landLanded && j.New == "" {
		return nil // nothing was journaled
	}
	return m.clearLanding(j.Key)
}

// dryForward checks that the operator's checkout can go from j.Old to
// j.New (`read-tree -m -u -n`). The dry run still locks the index it
// reads, so it reads a copy: a kill before the base moves leaves the
// operator's checkout exactly as it was, without even an index.lock.
func (m *Manager) dryForward(ctx context.Context, j landJournal) error {
	index, err := m.gitPath(ctx, "index")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(index)
	if err != nil {
		return fmt.Errorf("read the index of %s: %w", m.root, err)
	}
	tmp := filepath.Join(m.landDir(), j.Key+".index")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := m.runEnv(ctx, m.root, []string{"GIT_INDEX_FILE=" + tmp}, "read-tree", "-m", "-u", "-n", j.Old, j.New); err != nil {
		return refusedCheckout(j.Base, err)
	}
	return nil
}

// checkoutNote says what became of the operator's checkout.
func (m *Manager) checkoutNote(ctx context.Context, base string, j landJournal) string {
	h, err := readHead(m.root)
	switch {
	case err != nil:
		return ""
	case j.Detached && j.New != "" && h.Ref == "" && h.Hash == j.Old:
		return fmt.Sprintf("your checkout %s has uncommitted changes and was left alone at the old tip %s, behind %s (its HEAD detached there); run 'git switch %s' there to catch up, your changes come along", m.root, text.Short(j.Old, 12), base, base)
	case h.Ref == "refs/heads/"+base:
		if j.New == "" || j.Forwarded {
			return fmt.Sprintf("your checkout %s is on %s, up to date", m.root, base)
		}
		return fmt.Sprintf("your checkout %s is on %s", m.root, base)
	default:
		return fmt.Sprintf("your checkout %s is on %s and was left alone; 'git switch %s' there to see the landing", m.root, h.describe(), base)
	}
}

// refusedCheckout explains why the operator's checkout cannot be brought
// forward: usually untracked files in the way.
func refusedCheckout(base string, err error) error {
	var ee *proc.ExitError
	if errors.As(err, &ee) {
		var files []string
		for _, line := range strings.Split(ee.Stderr, "\n") {
			if strings.HasPrefix(line, "\t") {
				files = append(files, strings.TrimSpace(line))
			}
			if _, f, ok := strings.Cut(line, "Untracked working tree file '"); ok {
				f, _, _ = strings.Cut(f, "'")
				files = append(files, f)
			}
		}
		if len(files) > 0 {
			return fmt.Errorf("files in your checkout of %s would be overwritten by the landing: %s; move them aside or commit them, then run again; nothing landed", base, strings.Join(files, ", "))
		}
	}
	return fmt.Errorf("your checkout of %s cannot be brought forward: %w; nothing landed", base, err)
}
