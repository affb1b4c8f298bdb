package swarm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/worktree"
)

// Agents kept current and early warnings (DESIGN §14), between sessions
// only. Before a session starts, an agent whose branch is behind the base
// gets the base merged in when that is clean (worktree.KeepCurrent); a
// conflict becomes mail from swarm, once per base commit. After each
// session, its branch is trial-merged with the base and with teammates'
// branches touching the same files; the findings are kept in memory
// (overlapBook, recomputed as each runner starts) and named in the next
// prompts of both agents. Both are level-based: whoever moved the base
// (the merge queue, `swarm down --merge`, the operator by hand), the next
// session sees it.

// Currency is what a Worktrees adapter offers for it; GitWorktrees has it,
// and a Worktrees without it (test fakes) turns both off.
type Currency interface {
	KeepCurrent(ctx context.Context, agent string) (worktree.Current, error)
	Overlaps(ctx context.Context, agent string, teammates []string, cache *worktree.OverlapCache) (worktree.Overlap, error)
}

// KeepCurrent brings the agent's branch up to date (worktree.KeepCurrent).
func (w GitWorktrees) KeepCurrent(ctx context.Context, agent string) (worktree.Current, error) {
	return w.M.KeepCurrent(ctx, agent)
}

// Overlaps trial-merges the agent's branch (worktree.Overlaps).
func (w GitWorktrees) Overlaps(ctx context.Context, agent string, teammates []string, cache *worktree.OverlapCache) (worktree.Overlap, error) {
	return w.M.Overlaps(ctx, agent, teammates, cache)
}

// MetaCurrentConflict prefixes the meta key holding the base commit whose
// conflict with an agent's branch swarm last mailed it about.
const MetaCurrentConflict = "current_conflict:"

// integration brings the agent's branch up to date before its session
// and returns what its prompt says about its branch: the merge, or why
// there was none, and the overlaps last found. Failures are logged and
// only leave lines out: a session never fails for them.
func (r *runner) integration(ctx context.Context) *promptpipe.Integration {
	cur, ok := r.sup.opts.Worktrees.(Currency)
	if !ok {
		return nil
	}
	in := &promptpipe.Integration{}
	if r.sup.cfg.Worktree.KeepCurrent {
		res, err := cur.KeepCurrent(ctx, r.agent.Name)
		for _, rec := range res.Recovered {
			r.sup.log.Warn("kept current: recovered", "agent", r.agent.Name, "what", rec.Text)
		}
		if err != nil {
			r.sup.log.Warn("bring the agent's branch up to date", "agent", r.agent.Name, "err", err)
			in.Behind = &promptpipe.BaseBehind{Reason: text.Truncate(err.Error(), 300)}
		} else {
			r.applyCurrent(ctx, res, in)
		}
	}
	in.Base, in.BaseConflicts, in.Overlaps = r.sup.overlaps.about(r.agent.Name)
	if in.Base == "" {
		in.Base, _, _ = r.sup.store.Meta(bg(ctx), worktree.MetaBaseBranch)
	}
	return in
}

// applyCurrent turns what KeepCurrent did into prompt lines, and mails a
// conflict.
func (r *runner) applyCurrent(ctx context.Context, res worktree.Current, in *promptpipe.Integration) {
	in.Base = res.Base
	short := text.Short(res.BaseTip, 7)
	switch {
	case res.Merged():
		r.sup.log.Info("brought the agent's branch up to date", "agent", r.agent.Name, "base", res.Base, "base_tip", short, "commits", res.Behind, "fast_forward", res.FastForward)
		in.Merged = &promptpipe.BaseMerge{Commit: short, Commits: res.Behind, Authors: res.Authors, FastForward: res.FastForward}
	case len(res.Conflicts) > 0:
		in.Behind = &promptpipe.BaseBehind{Commit: short, Commits: res.Behind, Conflicts: res.Conflicts}
		r.mailConflict(ctx, res)
	case len(res.Dirty) > 0:
		in.Behind = &promptpipe.BaseBehind{Commit: short, Commits: res.Behind, Dirty: true}
	case res.Skipped != "":
		in.Behind = &promptpipe.BaseBehind{Commit: short, Commits: res.Behind, Reason: res.Skipped}
	}
}

// mailConflict tells the agent, once per base commit, that merging the
// base into its branch conflicts, and how to resolve it.
func (r *runner) mailConflict(ctx context.Context, res worktree.Current) {
	key := MetaCurrentConflict + r.agent.Name
	if last, _, err := r.sup.store.Meta(bg(ctx), key); err != nil {
		r.sup.log.Warn("read the last conflict mailed", "agent", r.agent.Name, "err", err)
		return
	} else if last == res.BaseTip {
		return
	}
	short := text.Short(res.BaseTip, 7)
	commits := fmt.Sprintf("%d commits", res.Behind)
	if res.Behind == 1 {
		commits = "1 commit"
	}
	body := fmt.Sprintf("%s moved on (%s: %s you do not have), and merging it into your branch %s conflicts in: %s. swarm did not merge it. Resolve it in your worktree:\n"+
		"    git merge %s\n"+
		"    (fix the conflicted files, then) git add <files> && git commit --no-edit\n"+
		"Until then, landing your branch conflicts too.",
		res.Base, short, commits, worktree.Branch(r.agent.Name), strings.Join(res.Conflicts, ", "), short)
	if err := bounded(ctx, func(c context.Context) error {
		_, err := r.sup.poster.Post(c, message.Draft{From: message.Swarm, To: r.agent.Name, Kind: message.KindTask, Body: body})
		return err
	}); err != nil {
		r.sup.log.Warn("mail the agent its conflict with the base", "agent", r.agent.Name, "err", err)
		return
	}
	if err := bounded(ctx, func(c context.Context) error { return r.sup.store.SetMeta(c, key, res.BaseTip) }); err != nil {
		r.sup.log.Warn("remember the conflict mailed", "agent", r.agent.Name, "err", err)
	}
}

// warnOverlaps trial-merges the agent's branch after a session (and when
// its runner starts) and keeps what it found for the next prompts of the
// agent and of its teammates.
func (r *runner) warnOverlaps(ctx context.Context) {
	cur, ok := r.sup.opts.Worktrees.(Currency)
	if !ok {
		return
	}
	mates := slices.DeleteFunc(r.sup.poster.Names(), func(n string) bool { return n == r.agent.Name })
	ov, err := cur.Overlaps(bg(ctx), r.agent.Name, mates, &r.sup.overlaps.cache)
	if err != nil {
		r.sup.log.Warn("trial-merge the agent's branch", "agent", r.agent.Name, "err", err)
		return
	}
	r.sup.overlaps.record(ov, mates)
	for _, p := range ov.Teammates {
		r.sup.log.Info("overlap", "agent", r.agent.Name, "teammate", p.Agent, "files", len(p.Files), "conflicts", len(p.Conflicts))
	}
}

// overlapBook keeps the trial merges' findings: per agent its conflicts
// with the base, per pair of agents the files both changed. Its zero value
// is ready.
type overlapBook struct {
	cache worktree.OverlapCache
	mu    sync.Mutex
	base  string
	bases map[string][]string
	pairs map[[2]string]worktree.PairOverlap // Agent unused: the key names both
}

func pairKey(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// record replaces what the book knew of ov.Agent's branch: its conflicts
// with the base, and its pairs with each of mates.
func (b *overlapBook) record(ov worktree.Overlap, mates []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bases == nil {
		b.bases, b.pairs = map[string][]string{}, map[[2]string]worktree.PairOverlap{}
	}
	if ov.Base != "" {
		b.base = ov.Base
	}
	b.bases[ov.Agent] = ov.BaseConflicts
	for _, m := range mates {
		delete(b.pairs, pairKey(ov.Agent, m))
	}
	for _, p := range ov.Teammates {
		b.pairs[pairKey(ov.Agent, p.Agent)] = p
	}
}

// about returns the base branch, the agent's conflicts with it and its
// overlaps with teammates (sorted by teammate).
func (b *overlapBook) about(agent string) (string, []string, []promptpipe.Overlap) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []promptpipe.Overlap
	for k, p := range b.pairs {
		mate := ""
		switch agent {
		case k[0]:
			mate = k[1]
		case k[1]:
			mate = k[0]
		default:
			continue
		}
		out = append(out, promptpipe.Overlap{Teammate: mate, Files: p.Files, Conflicts: p.Conflicts})
	}
	slices.SortFunc(out, func(x, y promptpipe.Overlap) int { return strings.Compare(x.Teammate, y.Teammate) })
	return b.base, b.bases[agent], out
}

// previewIntegration is what a preview's Environment says of the agent's
// branch: the trial merges as they stand now (nothing is merged nor
// mailed by a preview), or nil without a worktree manager.
func previewIntegration(ctx context.Context, st mailbox.Store, root, agent string, teammates []string) *promptpipe.Integration {
	m, err := worktree.New(ctx, worktree.Options{Root: root, Meta: st})
	if err != nil {
		return nil
	}
	ov, err := m.Overlaps(ctx, agent, teammates, nil)
	if err != nil {
		return nil
	}
	var b overlapBook
	b.record(ov, teammates)
	in := &promptpipe.Integration{}
	in.Base, in.BaseConflicts, in.Overlaps = b.about(agent)
	return in
}
