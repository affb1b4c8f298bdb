package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/worktree"
)

// The merge queue (DESIGN §14): candidates are tested on top of the base
// branch in the queue's scratch worktree and land by compare-and-set.
// MergeQueue is level-based like the workflows' flow: each step reads the
// queued rows, claims a batch (queued → testing, a compare-and-set, so two
// hosts never test the same candidate), tests it and moves each candidate
// on. A crash between steps leaves candidates in testing under a claim
// whose holder is gone; Recover puts them back in the queue, and a
// candidate whose commit had landed meanwhile is found on the base and
// recorded landed without a second merge.

// QueueGit is what the merge queue needs of git (worktree.Manager).
type QueueGit interface {
	WorkflowGit
	// TestBatch builds the base tip plus the candidates and runs CI.
	TestBatch(ctx context.Context, req worktree.BatchRequest) (worktree.BatchResult, error)
	// CleanScratch removes the scratch worktrees a crash left.
	CleanScratch(ctx context.Context) error
	// BaseBranch is the branch work lands on.
	BaseBranch(ctx context.Context) (string, error)
	// SyncBase fast-forwards the base branch to the remote's
	// ([worktree] push), settling interrupted landings first.
	SyncBase(ctx context.Context, remote string, leaveDirty bool) (worktree.BaseSync, error)
	// FetchBase fetches the remote's base branch, moving nothing.
	FetchBase(ctx context.Context, remote string) (string, error)
}

// MergeQueue tests and lands the merge queue's candidates.
type MergeQueue struct {
	Store mailbox.Store
	Git   QueueGit
	Cfg   config.Merge
	// Remote is [worktree] push: the remote whose base branch is shared
	// by every host. Each test builds on its base (fetched first) and a
	// landing moves it by a compare-and-set push; another host's landing
	// first sends the candidates back to the queue. Empty: this clone's
	// base only.
	Remote string
	// Poster sends conflicts and failures back to the agents (nil: no
	// mail, as in tests of the steps alone).
	Poster *mailbox.Poster
	// Holder names this process in the candidates' claims.
	Holder mailbox.Holder
	Now    func() time.Time
	Log    *slog.Logger
	// Notice, when set, is told of each landing, conflict and failure
	// (the supervisor's notice bus).
	Notice func(agent, text string)

	// refuseDirty keeps the operator's dirty checkout a refusal
	// (LandNow: the operator is at the terminal), and landed is the last
	// landing LandNow made.
	refuseDirty bool
	landed      *worktree.Landing
}

// claimTTL is how long a claim outlives a CI timeout before another host
// may take its candidates back.
const claimTTL = 30 * time.Minute

func (q *MergeQueue) now() time.Time {
	if q.Now == nil {
		return time.Now()
	}
	return q.Now()
}

func (q *MergeQueue) log() *slog.Logger {
	if q.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return q.Log
}

func (q *MergeQueue) holder() string { return q.Holder.Host + ":" + strconv.Itoa(q.Holder.PID) }

// gone reports whether a claim's holder can no longer finish its test:
// a process of this host that is not running, or a claim older than the
// CI timeout plus claimTTL.
func (q *MergeQueue) gone(c merge.Candidate) bool {
	if c.Claim == q.holder() {
		return false
	}
	host, pid, ok := strings.Cut(c.Claim, ":")
	if n, err := strconv.Atoi(pid); ok && err == nil && host == q.Holder.Host && proc.Exited(n) {
		return true
	}
	return c.ClaimedAt == nil || q.now().Sub(*c.ClaimedAt) > q.Cfg.CITimeout+claimTTL
}

// Recover puts back in the queue the candidates whose test a crash cut
// short, and removes the scratch worktrees it left. A scratch worktree
// that cannot be removed now (an orphaned git of the killed process still
// writing in it) does not keep its candidates out of the queue: they are
// tested again in a new one, and the next start removes it.
func (q *MergeQueue) Recover(ctx context.Context) error {
	cleanErr := q.Git.CleanScratch(ctx)
	if cleanErr != nil {
		cleanErr = fmt.Errorf("clean the merge queue's scratch worktrees: %w", cleanErr)
	}
	testing, err := q.Store.Candidates(ctx, mailbox.CandidateFilter{States: []merge.State{merge.Testing}})
	if err != nil {
		return errors.Join(cleanErr, err)
	}
	for _, c := range testing {
		if !q.gone(c) && c.Claim != q.holder() {
			continue // another host is testing it
		}
		if err := q.move(ctx, c, merge.Testing, merge.Retest, merge.Queued, "its test was interrupted; tested again", nil); err != nil {
			return errors.Join(cleanErr, err)
		}
	}
	return cleanErr
}

// move applies one candidate transition, and edit to its row, in one
// transaction; a candidate no longer in from is skipped (ErrStateConflict
// is nil here: someone else moved it, the level-based step reads it anew).
func (q *MergeQueue) move(ctx context.Context, c merge.Candidate, from merge.State, ev merge.Event, to merge.State, cause string, edit func(*merge.Candidate)) error {
	err := q.Store.InTx(ctx, func(tx mailbox.Tx) error {
		cur, err := tx.Candidate(c.ID)
		if err != nil {
			return err
		}
		if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(c.ID), from, ev, to, cause, 0); err != nil {
			return err
		}
		if edit == nil {
			return nil
		}
		cur.State = to
		edit(&cur)
		return tx.SaveCandidate(cur)
	})
	if errors.Is(err, mailbox.ErrStateConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("merge candidate %d: %w", c.ID, err)
	}
	return nil
}

// claim takes the next batch: up to [merge] batch queued candidates,
// first in, first out.
func (q *MergeQueue) claim(ctx context.Context) ([]merge.Candidate, string, error) {
	n := q.Cfg.Batch
	if n < 1 {
		n = 1
	}
	var out []merge.Candidate
	var key string
	err := q.Store.InTx(ctx, func(tx mailbox.Tx) error {
		out = nil
		qs, err := tx.QueuedCandidates(n)
		if err != nil || len(qs) == 0 {
			return err
		}
		now := q.now()
		key = fmt.Sprintf("merge-%d-%d", qs[0].ID, now.UnixNano())
		for _, c := range qs {
			if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(c.ID), merge.Queued, merge.Claim, merge.Testing,
				fmt.Sprintf("claimed by %s in a batch of %d", q.holder(), len(qs)), 0); err != nil {
				return err
			}
			prev := c.Batch
			c.State, c.Claim, c.ClaimedAt, c.Batch = merge.Testing, q.holder(), &now, key
			if err := tx.SaveCandidate(c); err != nil {
				return err
			}
			// The key of a try a crash cut short: land() forgets its
			// journal entry once this one lands, as landNow does.
			c.Batch = prev
			out = append(out, c)
		}
		return nil
	})
	if errors.Is(err, mailbox.ErrStateConflict) {
		return nil, "", nil // another host claimed them first
	}
	return out, key, err
}

// Drain runs steps until the queue is empty, or a step fails.
func (q *MergeQueue) Drain(ctx context.Context) error {
	for {
		did, err := q.Step(ctx)
		if err != nil || !did {
			return err
		}
	}
}

// Step claims the next batch and tests it: it lands, goes back to its
// agents (conflict, failed) or, bisected, both. It reports whether there
// was a batch.
func (q *MergeQueue) Step(ctx context.Context) (bool, error) {
	batch, key, err := q.claim(ctx)
	if err != nil || len(batch) == 0 {
		return false, err
	}
	q.log().Info("merge queue: testing", "batch", key, "candidates", len(batch))
	if err := q.process(ctx, batch, key); err != nil {
		// What is still testing goes back to the queue: tested again.
		bctx, cancel := bookkeeping(ctx)
		q.retest(bctx, batch, "its test could not finish: "+err.Error())
		cancel()
		return true, err
	}
	return true, nil
}

func (q *MergeQueue) retest(ctx context.Context, cs []merge.Candidate, why string) {
	for _, c := range cs {
		if err := q.move(ctx, c, merge.Testing, merge.Retest, merge.Queued, text.Truncate(why, 300), nil); err != nil {
			q.log().Warn("merge queue: put back in the queue", "candidate", c.ID, "err", err)
		}
	}
}

// test runs one TestBatch of cs, counting its CI run in their rows.
func (q *MergeQueue) test(ctx context.Context, cs []merge.Candidate, key string) (worktree.BatchResult, error) {
	if q.Remote != "" {
		// On several hosts the base is the remote's: what another host
		// landed is fetched first, and a candidate it landed is found on
		// the base (nothing merged twice).
		s, err := q.Git.SyncBase(ctx, q.Remote, !q.refuseDirty)
		if err != nil {
			return worktree.BatchResult{}, err
		}
		if s.Old != s.New {
			q.log().Info("merge queue: fetched the base", "remote", q.Remote, "base", s.Base, "old", s.Old, "new", s.New, "behind", s.Behind)
		}
	}
	req := worktree.BatchRequest{Key: key, CI: q.Cfg.CI, CITimeout: q.Cfg.CITimeout}
	for _, c := range cs {
		req.Candidates = append(req.Candidates, worktree.BatchCandidate{Agent: c.Agent, Commit: c.Commit, Subject: q.subject(ctx, c)})
	}
	res, err := q.Git.TestBatch(ctx, req)
	if err != nil {
		return res, err
	}
	if res.CIRan {
		err = q.Store.InTx(ctx, func(tx mailbox.Tx) error {
			for _, c := range cs {
				cur, err := tx.Candidate(c.ID)
				if err != nil {
					return err
				}
				cur.CIRuns++
				cur.Batch = key
				if err := tx.SaveCandidate(cur); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return res, err
}

func (q *MergeQueue) process(ctx context.Context, batch []merge.Candidate, key string) error {
	res, err := q.test(ctx, batch, key)
	if err != nil {
		return err
	}
	switch {
	case res.Conflict != nil:
		i := res.Conflict.Index
		q.conflict(ctx, batch[i], res)
		q.retest(ctx, append(append([]merge.Candidate{}, batch[:i]...), batch[i+1:]...), fmt.Sprintf("candidate %d of its batch conflicted; tested again without it", batch[i].ID))
		return nil
	case !res.CIFailed:
		return q.land(ctx, batch, res, key)
	case len(batch) == 1:
		q.failed(ctx, batch[0], res)
		return nil
	}
	// Bisect: the first half is tested (and landed when it passes) until
	// one candidate is left of the failing part.
	lastFail := res
	var landErr error
	b := merge.Bisect(len(batch), func(lo, hi int) merge.Tested {
		part := batch[lo:hi]
		sub := fmt.Sprintf("%s-%d", key, lo)
		r, err := q.test(ctx, part, sub)
		if err != nil || r.Conflict != nil {
			landErr = err
			return merge.Tested{Abort: true}
		}
		if r.CIFailed {
			lastFail = r
			return merge.Tested{}
		}
		if err := q.land(ctx, part, r, sub); err != nil {
			landErr = err
			return merge.Tested{Abort: true}
		}
		return merge.Tested{Pass: true}
	})
	var rest []merge.Candidate
	for _, i := range b.Rest {
		rest = append(rest, batch[i])
	}
	if b.Bad >= 0 {
		q.failed(ctx, batch[b.Bad], lastFail)
		q.retest(ctx, rest, fmt.Sprintf("its batch was bisected and candidate %d failed; tested again without it", batch[b.Bad].ID))
		return nil
	}
	q.retest(ctx, rest, "the bisection of its batch stopped; tested again")
	return landErr
}

// land lands a tested batch (its prepared commit); the base moved since
// the test puts the batch back in the queue, never forced.
func (q *MergeQueue) land(ctx context.Context, cs []merge.Candidate, res worktree.BatchResult, key string) error {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = fmt.Sprintf("%s at %s", c.Agent, merge.Short(c.Commit))
	}
	subject := "swarm: land " + strings.Join(names, ", ")
	l, err := q.Git.Land(ctx, worktree.LandRequest{Key: key, Agent: cs[0].Agent, Prepared: res.Commit, Expected: res.Old,
		Subject: subject, LeaveDirty: !q.refuseDirty, Remote: q.Remote,
		Record: func(ctx context.Context, l worktree.Landing) error { return q.recordLanded(ctx, cs, res, l) }})
	if errors.Is(err, worktree.ErrBaseMoved) {
		where := res.Base
		if q.Remote != "" {
			where = q.Remote + "'s " + res.Base + " (another host landed first?)"
		}
		q.retest(ctx, cs, fmt.Sprintf("%s moved after the test; nothing forced, tested again on its new tip", where))
		return nil
	}
	if err != nil {
		return fmt.Errorf("land %s: %w", strings.Join(names, ", "), err)
	}
	q.landed = &l
	for _, c := range cs {
		// A batch a crash cut short left its landing's journal entry.
		if c.Batch != "" && c.Batch != key {
			_ = q.Git.ForgetLanding(c.Batch)
		}
		text := fmt.Sprintf("merge queue: landed %s's %s on %s", c.Agent, merge.Short(c.Commit), res.Base)
		if l.Checkout != "" {
			text += "; " + l.Checkout
		}
		q.notice(c.Agent, text)
	}
	q.log().Info("merge queue: landed", "batch", key, "candidates", len(cs), "commit", l.Commit, "behind", l.Behind)
	return nil
}

// recordLanded moves the batch's candidates to landed, once (an
// interrupted landing records again), and an item's candidate records its
// item merged.
func (q *MergeQueue) recordLanded(ctx context.Context, cs []merge.Candidate, res worktree.BatchResult, l worktree.Landing) error {
	as := l.Commit
	if as == "" {
		as = res.Commit
	}
	for _, c := range cs {
		err := q.Store.InTx(ctx, func(tx mailbox.Tx) error {
			cur, err := tx.Candidate(c.ID)
			if err != nil || cur.State == merge.Landed {
				return err
			}
			if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(c.ID), merge.Testing, merge.Land, merge.Landed,
				fmt.Sprintf("landed on %s as %s", res.Base, merge.Short(as)), 0); err != nil {
				return err
			}
			cur.State, cur.LandedAs = merge.Landed, as
			return tx.SaveCandidate(cur)
		})
		if err != nil {
			return err
		}
		if c.Source == merge.FromItem && c.Item != "" {
			// An item no longer approved (aborted meanwhile) keeps its
			// state: the commit landed all the same.
			var illegal *fsm.IllegalTransitionError
			if err := recordMerged(ctx, q.Store, c.Item, c.Commit, as); errors.As(err, &illegal) {
				q.log().Warn("merge queue: item not recorded merged", "item", c.Item, "err", err)
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// conflict sends a candidate that does not merge back to its agent.
func (q *MergeQueue) conflict(ctx context.Context, c merge.Candidate, res worktree.BatchResult) {
	files := res.Conflict.Files
	reason := fmt.Sprintf("does not merge on %s: conflicts in %s", res.Base, strings.Join(files, ", "))
	if err := q.move(ctx, c, merge.Testing, merge.Conflicts, merge.Conflict, text.Truncate(reason, 300), func(cur *merge.Candidate) {
		cur.Reason, cur.Files = reason, files
	}); err != nil {
		q.log().Warn("merge queue: record a conflict", "candidate", c.ID, "err", err)
		return
	}
	q.tell(ctx, c, fmt.Sprintf("Your commit %s (merge queue #%d) does not merge on %s: it conflicts in %s. It left the queue; %s is unchanged.\n"+
		"To resolve: in your worktree, run `git merge %s`, fix the conflicts in those files, commit, then run `swarm land` to queue it again.",
		merge.Short(c.Commit), c.ID, res.Base, strings.Join(files, ", "), res.Base, res.Base))
}

// failed sends a candidate whose CI failed back to its agent.
func (q *MergeQueue) failed(ctx context.Context, c merge.Candidate, res worktree.BatchResult) {
	if err := q.move(ctx, c, merge.Testing, merge.Fail, merge.Failed, text.Truncate(res.CIReason, 300), func(cur *merge.Candidate) {
		cur.Reason, cur.CITail = res.CIReason, res.CITail
	}); err != nil {
		q.log().Warn("merge queue: record a failure", "candidate", c.ID, "err", err)
		return
	}
	q.tell(ctx, c, fmt.Sprintf("Your commit %s (merge queue #%d) failed the merge queue's CI on top of %s: %s. It left the queue; %s is unchanged.\n"+
		"The last lines of its output:\n%s\n\nTo resolve: run `git merge %s` in your worktree, run the CI (`%s`) there until it passes, commit, then run `swarm land` to queue it again.",
		merge.Short(c.Commit), c.ID, res.Base, res.CIReason, res.Base, orNone(res.CITail), res.Base, q.Cfg.CI))
}

// tell posts the task mail from swarm to the candidate's agent and tells
// the operator.
func (q *MergeQueue) tell(ctx context.Context, c merge.Candidate, body string) {
	first, _, _ := strings.Cut(body, "\n")
	q.notice(c.Agent, "merge queue: "+first)
	if q.Poster == nil {
		return
	}
	if _, err := q.Poster.Post(ctx, message.Draft{From: message.Swarm, To: c.Agent, Kind: message.KindTask, Body: body}); err != nil {
		q.log().Warn("merge queue: mail the agent", "agent", c.Agent, "candidate", c.ID, "err", err)
	}
}

func (q *MergeQueue) notice(agent, text string) {
	if q.Notice != nil {
		q.Notice(agent, text)
	}
}

// subject is a candidate's merge commit message: an item's names the item
// as `swarm workflow merge` always did.
func (q *MergeQueue) subject(ctx context.Context, c merge.Candidate) string {
	if c.Source != merge.FromItem || c.Item == "" {
		return ""
	}
	it, err := q.Store.Item(ctx, c.Item)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("swarm: merge %s (%s, reviewed at %s)", it.ID, text.Truncate(it.Title, 80), text.Short(c.Commit, 12))
}

// LandNow queues c and tests and lands it at once in this process,
// through the queue's own steps: the operator's `swarm workflow merge` and
// the merge of an approved approval. The candidate is claimed in the
// transaction that queues it (or finds it queued, or takes it back from a
// process that died testing it), so the supervisor's queue never tests it
// too; a twin another live process is testing is waited for. Before the
// base moves, a refusal (the operator's checkout is dirty) cancels the
// candidate with the reason: nothing is left queued behind the operator's
// back. It returns the candidate as it ended, and the landing when this
// process made one.
func (q *MergeQueue) LandNow(ctx context.Context, c merge.Candidate) (merge.Candidate, *worktree.Landing, error) {
	return q.landNow(ctx, c, 0)
}

func (q *MergeQueue) landNow(ctx context.Context, c merge.Candidate, tries int) (merge.Candidate, *worktree.Landing, error) {
	// Landed already (by the supervisor's queue, or on another host): a
	// no-op, never a second landing nor a second landed row.
	if done, err := q.landedTwin(ctx, c, 0); err != nil || done != nil {
		if done != nil {
			return *done, nil, nil
		}
		return c, nil, err
	}
	qq := *q
	qq.refuseDirty, qq.landed = true, nil
	var claimed merge.Candidate
	var key string
	err := q.Store.InTx(ctx, func(tx mailbox.Tx) error {
		claimed, key = merge.Candidate{}, ""
		cur, err := tx.EnqueueCandidate(c)
		var qe *mailbox.QueuedError
		switch {
		case errors.As(err, &qe):
			cur = qe.Candidate
		case err != nil:
			return err
		default:
			if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(cur.ID), "", merge.Enqueue, merge.Queued,
				fmt.Sprintf("%s by %s (item %s), landed at once", c.Source, c.By, c.Item), 0); err != nil {
				return err
			}
		}
		if cur.State == merge.Testing {
			if !q.gone(cur) {
				claimed = cur // another process tests it: wait
				return nil
			}
			if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(cur.ID), merge.Testing, merge.Retest, merge.Queued,
				"its test was interrupted; tested again", 0); err != nil {
				return err
			}
		}
		now := q.now()
		key = fmt.Sprintf("merge-%d-%d", cur.ID, now.UnixNano())
		if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(cur.ID), merge.Queued, merge.Claim, merge.Testing,
			"claimed by "+q.holder()+" to land at once", 0); err != nil {
			return err
		}
		prev := cur.Batch
		cur.State, cur.Claim, cur.ClaimedAt, cur.Batch = merge.Testing, q.holder(), &now, key
		if err := tx.SaveCandidate(cur); err != nil {
			return err
		}
		cur.Batch = prev // land() forgets the journal entry of an interrupted try
		claimed = cur
		return nil
	})
	if err != nil {
		return claimed, nil, fmt.Errorf("queue %s's commit %s: %w", c.Agent, merge.Short(c.Commit), err)
	}
	if key == "" {
		done, err := WaitLanded(ctx, q.Store, claimed.ID, 200*time.Millisecond)
		if err == nil && done.State == merge.Landed {
			q.sayLanded(done)
		}
		return done, nil, err
	}
	// A twin landed between the look above and this claim: this row
	// leaves the queue, the landed one stands. (A failed look goes on:
	// the test finds a landed commit on the base all the same.)
	if done, err := q.landedTwin(ctx, c, claimed.ID); err == nil && done != nil {
		why := fmt.Sprintf("landed already as #%d", done.ID)
		bctx, cancel := bookkeeping(ctx)
		defer cancel()
		err = q.move(bctx, claimed, merge.Testing, merge.Cancel, merge.Cancelled, why, func(cur *merge.Candidate) {
			cur.Reason = why
		})
		return *done, nil, err
	}
	err = qq.process(ctx, []merge.Candidate{claimed}, key)
	if err == nil {
		// The base moved between the test and the landing: the candidate
		// is queued again; test it again at once, a few times.
		if cur, rerr := q.Store.Candidate(ctx, claimed.ID); rerr == nil && cur.State == merge.Queued && tries < 5 {
			return q.landNow(ctx, c, tries+1)
		}
	}
	if err != nil {
		cctx, cancel := bookkeeping(ctx)
		defer cancel()
		if merr := q.move(cctx, claimed, merge.Testing, merge.Cancel, merge.Cancelled, text.Truncate("not landed: "+err.Error(), 300), func(cur *merge.Candidate) {
			cur.Reason = err.Error()
		}); merr != nil {
			err = errors.Join(err, merr)
		}
		done, _ := q.Store.Candidate(cctx, claimed.ID)
		return done, qq.landed, err
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	done, err := q.Store.Candidate(bctx, claimed.ID)
	return done, qq.landed, err
}

// landedTwin is the candidate of c's agent and commit that landed
// already, other than except; nil when there is none.
func (q *MergeQueue) landedTwin(ctx context.Context, c merge.Candidate, except int64) (*merge.Candidate, error) {
	cs, err := q.Store.Candidates(ctx, mailbox.CandidateFilter{Agent: c.Agent, States: []merge.State{merge.Landed}})
	if err != nil {
		return nil, fmt.Errorf("look for %s's commit %s in the merge queue: %w", c.Agent, merge.Short(c.Commit), err)
	}
	for _, l := range cs {
		if l.Commit == c.Commit && l.ID != except {
			q.sayLanded(l)
			return &l, nil
		}
	}
	return nil, nil
}

// sayLanded tells that a candidate another process or host landed needs
// nothing more here.
func (q *MergeQueue) sayLanded(c merge.Candidate) {
	text := fmt.Sprintf("merge queue: %s's %s landed already as #%d (%s, by %s); nothing done twice", c.Agent, merge.Short(c.Commit), c.ID, merge.Short(c.LandedAs), orNone(c.Claim))
	q.notice(c.Agent, text)
	q.log().Info("merge queue: landed already", "agent", c.Agent, "candidate", c.ID, "commit", c.Commit, "landed_as", c.LandedAs, "holder", c.Claim)
}

// NewMergeQueue is the queue a command runs itself (swarm workflow merge,
// an approval's merge): this process is its holder.
func NewMergeQueue(st mailbox.Store, git QueueGit, cfg *config.Config, poster *mailbox.Poster) *MergeQueue {
	return &MergeQueue{Store: st, Git: git, Cfg: cfg.Merge, Remote: cfg.Worktree.Push, Poster: poster, Holder: ThisHolder(), Log: slog.Default()}
}
