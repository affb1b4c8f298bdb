package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/proc"
)

// Window says whose time two snapshots span, which decides who may have
// moved an agent branch.
type Window struct {
	// Agent is the agent whose session, or whose time between sessions,
	// the window is.
	Agent string
	// Session is true when the window is one of Agent's sessions: its own
	// branch may move then. Between its sessions only swarm (RecordMove)
	// and the agent's own leftover processes (reflog entries naming
	// swarm/<Agent>) may move it.
	Session bool
	// Overlapping lists the other agents that had a session during the
	// window. Their branches may move then; their own guards judge how.
	// Any other agent branch that moves is a violation.
	Overlapping []string
	// OverlapUnknown says nobody kept track of sessions for part of the
	// window (a snapshot restored after a restart): other agents' branches
	// are then judged on reflog evidence only.
	OverlapUnknown bool
}

// RefMove is a ref update swarm made itself.
type RefMove struct {
	Ref string `json:"ref"`           // like refs/heads/main
	Old string `json:"old,omitempty"` // "" when swarm created the ref
	New string `json:"new,omitempty"` // "" when swarm deleted it
}

// MetaGuardMoves is the meta key under which RecordMove keeps swarm's own
// ref moves (JSON, the latest maxRecordedMoves), so that a guard in another
// process sees a merge `swarm down --merge` made.
const MetaGuardMoves = "guard_moves"

const maxRecordedMoves = 64

// RecordMove records that swarm itself moved ref from old to new (full
// hashes; "" for absent), so that no guard reports it. Whatever moves refs
// for swarm while guards may compare across it calls it: the merge path
// for the base branch (old: the tip before the merge, new: the merge or
// squash commit) and for the agent branch it deletes (new ""), Discard for
// the branch it deletes. A move of the base branch excuses exactly the
// commits it brought onto the base's first-parent line, so an agent's
// commit that was on the base before swarm merged on top of it is still
// found; a recorded deletion of an agent branch also excuses its
// recreation from the base (Ensure). With a MetaStore the record is also
// stored under MetaGuardMoves.
func (m *Manager) RecordMove(ctx context.Context, ref, old, new string) error {
	mv := RefMove{Ref: ref, Old: old, New: new}
	m.guard.mu.Lock()
	m.guard.moves = appendMove(m.guard.moves, mv)
	m.guard.mu.Unlock()
	if m.meta == nil {
		return nil
	}
	m.guard.metaMu.Lock()
	defer m.guard.metaMu.Unlock()
	stored, err := m.storedMoves(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(appendMove(stored, mv))
	if err != nil {
		return fmt.Errorf("record swarm's move of %s: %w", ref, err)
	}
	if err := m.meta.SetMeta(ctx, MetaGuardMoves, string(b)); err != nil {
		return fmt.Errorf("record swarm's move of %s: %w", ref, err)
	}
	return nil
}

func appendMove(moves []RefMove, mv RefMove) []RefMove {
	moves = append(moves, mv)
	if len(moves) > maxRecordedMoves {
		moves = slices.Clone(moves[len(moves)-maxRecordedMoves:])
	}
	return moves
}

func (m *Manager) storedMoves(ctx context.Context) ([]RefMove, error) {
	if m.meta == nil {
		return nil, nil
	}
	v, ok, err := m.meta.Meta(ctx, MetaGuardMoves)
	if err != nil {
		return nil, fmt.Errorf("read swarm's recorded moves: %w", err)
	}
	if !ok || v == "" {
		return nil, nil
	}
	var moves []RefMove
	if err := json.Unmarshal([]byte(v), &moves); err != nil {
		// A damaged record must not stop every session; it excuses nothing.
		slog.Warn("ignoring unreadable recorded ref moves", "key", MetaGuardMoves, "err", err)
		return nil, nil
	}
	return moves, nil
}

// CompareSnapshots reports what changed from before to after that nobody
// may change: base-branch and agent-branch moves judged for the window w
// (Violation), and changed hooks or watched config (Tamper). It returns
// every finding, whoever it blames; a SessionGuard keeps those that
// concern its agent. The error is for failing to look.
func (m *Manager) CompareSnapshots(ctx context.Context, before, after *Snapshot, w Window) ([]Finding, error) {
	if before == nil || after == nil {
		return nil, errors.New("compare snapshots: a snapshot is missing")
	}
	if before.Base != after.Base {
		return nil, fmt.Errorf("compare snapshots: the base branch is %s in one and %s in the other", before.Base, after.Base)
	}
	c := &comparer{m: m, ctx: ctx, w: w, before: before, after: after, baseRef: "refs/heads/" + after.Base}
	refs := slices.Sorted(maps.Keys(before.Refs))
	for r := range after.Refs {
		if _, ok := before.Refs[r]; !ok {
			refs = append(refs, r)
		}
	}
	slices.Sort(refs)
	// The base first: it is what the operator cares about most.
	refs = slices.DeleteFunc(refs, func(r string) bool { return r == c.baseRef })
	refs = append([]string{c.baseRef}, refs...)
	var found []Finding
	for _, ref := range refs {
		old, new := before.Refs[ref], after.Refs[ref]
		if old == new {
			continue
		}
		var v *Violation
		var err error
		if ref == c.baseRef {
			v, err = c.base(ref, old, new)
		} else {
			v, err = c.branch(ref, old, new)
		}
		if err != nil {
			return nil, err
		}
		if v != nil {
			v.Agent, v.Ref, v.Old, v.New = w.Agent, ref, old, new
			slices.Sort(v.Charged)
			v.Charged = slices.Compact(v.Charged)
			found = append(found, *v)
		}
	}
	found = append(found, c.tamper()...)
	return append(found, c.checkout()...), nil
}

// comparer judges one pair of snapshots; it asks git only about what
// moved, and at most once for the operator's identity and swarm's moves.
type comparer struct {
	m             *Manager
	ctx           context.Context
	w             Window
	before, after *Snapshot
	baseRef       string

	ops     []ident
	opsRead bool
	moves   []RefMove
	mvRead  bool
}

// when says which time the window is, for messages.
func (c *comparer) when() string {
	if c.w.Session {
		return "during " + c.w.Agent + "'s session"
	}
	return "since " + c.w.Agent + "'s last session"
}

// base judges a move of the base branch.
func (c *comparer) base(ref, old, new string) (*Violation, error) {
	name := c.after.Base
	if old == "" {
		return nil, nil // it did not exist: there was nothing to protect
	}
	log, complete := c.reflog(ref, old, new)
	movers := log.agents("")
	if new == "" {
		return &Violation{Kind: ViolationBaseRewound, Charged: movers,
			Detail: fmt.Sprintf("the base branch %s was deleted %s (it was at %s)%s; recreate it with 'git update-ref %s %s'",
				name, c.when(), text.Short(old, 7), log.saying(), ref, old)}, nil
	}
	ff, err := c.m.isAncestor(c.ctx, old, new)
	if err != nil {
		return nil, err
	}
	if !ff {
		return &Violation{Kind: ViolationBaseRewound, Charged: movers,
			Detail: fmt.Sprintf("the base branch %s was moved from %s to %s %s, which is not a fast-forward: commits on it can be lost that way%s; put it back with 'git update-ref %s %s %s'%s",
				name, text.Short(old, 7), text.Short(new, 7), c.when(), log.saying(), ref, old, new, c.checkedOutNote(ref))}, nil
	}
	cands, err := c.m.firstParent(c.ctx, new, old)
	if err != nil {
		return nil, err
	}
	excused := c.excused(ref, cands)
	ops := c.operators()
	var bad []commitInfo
	for _, ci := range cands {
		if !excused[ci.hash] && !isOperator(ops, ci.name, ci.email) {
			bad = append(bad, ci)
		}
	}
	if len(bad) > 0 && complete && log.allBy(func(e reflogEntry) bool { return isOperator(ops, e.name, e.email) }) {
		// The operator moved it (a fast-forward pull brings other people's
		// commits): their own git wrote every reflog entry of the move.
		bad = nil
	}
	if len(bad) == 0 && len(movers) == 0 {
		return nil, nil
	}
	v := &Violation{Kind: ViolationBaseMoved, Charged: movers}
	if len(bad) == 0 {
		v.Detail = fmt.Sprintf("the base branch %s was moved from %s to %s %s%s, although agents never move it; if you did not want that, put it back with 'git update-ref %s %s %s'%s",
			name, text.Short(old, 7), text.Short(new, 7), c.when(), log.saying(), ref, old, new, c.checkedOutNote(ref))
		return v, nil
	}
	hashes := make([]string, len(bad))
	for i, ci := range bad {
		v.Commits = append(v.Commits, fmt.Sprintf("%s %s (committed by %s)", text.Short(ci.hash, 7), ci.subject, ci.name))
		hashes[i] = text.Short(ci.hash, 7)
		if a, ok := strings.CutPrefix(ci.name, BranchPrefix); ok {
			v.Charged = append(v.Charged, a)
		}
	}
	v.Detail = fmt.Sprintf("the base branch %s gained commits %s that swarm did not make and %s did not commit: %s%s; agents commit only on their own swarm/<agent> branch. Review them, and revert what you do not want ('git -C %q revert --no-edit %s')",
		name, c.when(), describeOperators(ops), strings.Join(v.Commits, "; "), log.saying(), c.m.root, strings.Join(hashes, " "))
	return v, nil
}

// checkedOutNote warns that putting back a ref checked out in the main
// worktree leaves its files as they are.
func (c *comparer) checkedOutNote(ref string) string {
	h, err := c.m.headOf(c.ctx, c.m.root)
	if err != nil || h.Ref != ref {
		return ""
	}
	return fmt.Sprintf(" (it is checked out in %s: run 'git -C %q status' afterwards to see whether its files match)", c.m.root, c.m.root)
}

// branch judges a move of refs/heads/swarm/<x>.
func (c *comparer) branch(ref, old, new string) (*Violation, error) {
	x := strings.TrimPrefix(ref, "refs/heads/"+BranchPrefix)
	log, _ := c.reflog(ref, old, new)
	if others := log.agents(x); len(others) > 0 {
		// Another agent's identity moved it, whatever the window.
		return &Violation{Kind: ViolationBranchMoved, Charged: others,
			Detail: fmt.Sprintf("%s %s%s; an agent moves only its own branch. %s", ref2branch(ref), c.moved(old, new), log.saying(), restoreRef(ref, old, new))}, nil
	}
	if c.recorded(ref, new) {
		return nil, nil
	}
	// swarm creates agent branches from the base (Ensure), also again
	// after its own merge or discard deleted one.
	if new != "" && (old == "" || c.recordedMove(ref, old, "")) && c.onBase(new) {
		return nil, nil
	}
	if x != c.w.Agent && (c.w.OverlapUnknown || slices.Contains(c.w.Overlapping, x)) {
		return nil, nil // x's session overlapped: x's own guard judges it
	}
	// Its own leftover processes (or swarm's auto-commit, made as
	// swarm/<x>): its own guard allows that.
	ownOnly := len(log) > 0 && log.allBy(func(e reflogEntry) bool { return e.name == Branch(x) })
	switch {
	case x == c.w.Agent && new == "":
		return &Violation{Kind: ViolationBranchMoved,
			Detail: fmt.Sprintf("%s, the branch of %s, was deleted %s; %s", ref2branch(ref), x, c.when(), restoreRef(ref, old, new))}, nil
	case x == c.w.Agent && (c.w.Session || ownOnly):
		return nil, nil
	case x == c.w.Agent:
		return &Violation{Kind: ViolationBranchMoved,
			Detail: fmt.Sprintf("%s %s while no session of %s ran, and swarm did not move it%s. %s", ref2branch(ref), c.moved(old, new), x, log.saying(), restoreRef(ref, old, new))}, nil
	case ownOnly:
		return nil, nil
	}
	return &Violation{Kind: ViolationBranchMoved,
		Detail: fmt.Sprintf("%s %s while %s had no session running%s; an agent moves only its own branch. %s", ref2branch(ref), c.moved(old, new), x, log.saying(), restoreRef(ref, old, new))}, nil
}

func ref2branch(ref string) string { return strings.TrimPrefix(ref, "refs/heads/") }

// moved says how a ref changed, and when.
func (c *comparer) moved(old, new string) string {
	switch {
	case old == "":
		return fmt.Sprintf("appeared at %s %s", text.Short(new, 7), c.when())
	case new == "":
		return fmt.Sprintf("was deleted %s (it was at %s)", c.when(), text.Short(old, 7))
	default:
		return fmt.Sprintf("was moved from %s to %s %s", text.Short(old, 7), text.Short(new, 7), c.when())
	}
}

// restoreRef says how to undo a ref change. The three-argument update-ref
// only acts if the ref is still where the guard saw it.
func restoreRef(ref, old, new string) string {
	switch {
	case old == "":
		return fmt.Sprintf("Delete it with 'git update-ref -d %s %s'", ref, new)
	case new == "":
		return fmt.Sprintf("Recreate it with 'git update-ref %s %s'", ref, old)
	default:
		return fmt.Sprintf("Put it back with 'git update-ref %s %s %s'", ref, old, new)
	}
}

// onBase reports whether commit h is on the base branch, before or after.
func (c *comparer) onBase(h string) bool {
	if h == c.before.Refs[c.baseRef] || h == c.after.Refs[c.baseRef] {
		return true
	}
	tip := c.after.Refs[c.baseRef]
	if tip == "" {
		return false
	}
	ok, err := c.m.isAncestor(c.ctx, h, tip)
	return err == nil && ok
}

// recorded reports whether swarm recorded moving ref to new.
func (c *comparer) recorded(ref, new string) bool {
	return slices.ContainsFunc(c.recordedMoves(), func(mv RefMove) bool { return mv.Ref == ref && mv.New == new })
}

// recordedMove reports whether swarm recorded moving ref from old to new.
func (c *comparer) recordedMove(ref, old, new string) bool {
	return slices.Contains(c.recordedMoves(), RefMove{Ref: ref, Old: old, New: new})
}

func (c *comparer) recordedMoves() []RefMove {
	if c.mvRead {
		return c.moves
	}
	c.mvRead = true
	c.m.guard.mu.Lock()
	c.moves = slices.Clone(c.m.guard.moves)
	c.m.guard.mu.Unlock()
	stored, err := c.m.storedMoves(c.ctx)
	if err != nil {
		slog.Warn("the guard cannot read swarm's recorded moves", "err", err)
	}
	c.moves = append(c.moves, stored...)
	return c.moves
}

// excused lists the candidate commits that swarm's recorded moves of ref
// brought onto its first-parent line.
func (c *comparer) excused(ref string, cands []commitInfo) map[string]bool {
	in := map[string]bool{}
	for _, ci := range cands {
		in[ci.hash] = true
	}
	out := map[string]bool{}
	for _, mv := range c.recordedMoves() {
		if mv.Ref != ref || !in[mv.New] {
			continue
		}
		var not []string
		if mv.Old != "" {
			not = append(not, mv.Old)
		}
		brought, err := c.m.firstParent(c.ctx, mv.New, not...)
		if err != nil {
			slog.Warn("the guard cannot list the commits of a recorded move", "ref", ref, "err", err)
			continue
		}
		for _, ci := range brought {
			out[ci.hash] = true
		}
	}
	return out
}

// ident is a git identity.
type ident struct{ name, email string }

// operators are the identities the operator's own commits carry: the main
// checkout's user.name/user.email, and the committer swarm's merges use
// (the same, unless the environment or the fallback identity decides).
func (c *comparer) operators() []ident {
	if c.opsRead {
		return c.ops
	}
	c.opsRead = true
	add := func(name, email string) {
		if name == "" || strings.HasPrefix(name, BranchPrefix) || slices.Contains(c.ops, ident{name, email}) {
			return
		}
		c.ops = append(c.ops, ident{name, email})
	}
	cfgName, _ := c.m.run(c.ctx, c.m.root, "config", "--get", "user.name")
	cfgEmail, _ := c.m.run(c.ctx, c.m.root, "config", "--get", "user.email")
	if cfgEmail != "" {
		add(cfgName, cfgEmail)
	}
	var name, email string
	for _, kv := range c.m.identity(c.ctx, c.m.root, "", "") {
		if v, ok := strings.CutPrefix(kv, "GIT_COMMITTER_NAME="); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(kv, "GIT_COMMITTER_EMAIL="); ok {
			email = v
		}
	}
	add(name, email)
	return c.ops
}

func isOperator(ops []ident, name, email string) bool {
	return slices.ContainsFunc(ops, func(o ident) bool { return o.name == name && strings.EqualFold(o.email, email) })
}

func describeOperators(ops []ident) string {
	if len(ops) == 0 {
		return "the operator"
	}
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = o.name + " <" + o.email + ">"
	}
	return "the operator (" + strings.Join(s, " or ") + ")"
}

// commitInfo is a commit and its committer.
type commitInfo struct{ hash, name, email, subject string }

// firstParent lists the commits on tip's first-parent line that are not
// reachable from any of not, newest first. The first-parent line is what
// landed on the branch: the commits a merge brings in count as the merge
// commit's, which names whoever merged.
func (m *Manager) firstParent(ctx context.Context, tip string, not ...string) ([]commitInfo, error) {
	args := []string{"rev-list", "--first-parent", "--format=%x00%H%x00%cn%x00%ce%x00%s", tip}
	for _, n := range not {
		args = append(args, "^"+n)
	}
	out, err := m.run(ctx, m.root, append(args, "--")...)
	if err != nil {
		return nil, fmt.Errorf("list the new commits of the base branch: %w", err)
	}
	var list []commitInfo
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\x00")
		if len(f) == 5 && f[0] == "" {
			list = append(list, commitInfo{hash: f[1], name: f[2], email: f[3], subject: f[4]})
		}
	}
	return list, nil
}

// isAncestor reports whether commit a is an ancestor of (or is) commit b.
// A commit that no longer exists (a rewind followed by gc) is no ancestor.
func (m *Manager) isAncestor(ctx context.Context, a, b string) (bool, error) {
	ok, err := m.ok(ctx, m.root, "merge-base", "--is-ancestor", a, b)
	if err == nil {
		return ok, nil
	}
	var ee *proc.ExitError
	if errors.As(err, &ee) {
		if has, herr := m.ok(ctx, m.root, "cat-file", "-e", a+"^{commit}"); herr == nil && !has {
			return false, nil
		}
	}
	return false, fmt.Errorf("compare %s with %s: %w", text.Short(a, 7), text.Short(b, 7), err)
}

// reflogEntry is one entry of a ref's reflog: the commit it set the ref
// to and the identity of the git that did it (GIT_COMMITTER_NAME/EMAIL,
// which the session environment sets to swarm/<agent>).
type reflogEntry struct{ new, name, email, subject string }

type reflogWindow []reflogEntry

// maxReflog bounds how far back the guard reads a reflog.
const maxReflog = 200

// reflog returns the entries of ref's reflog that moved it from old to
// new, newest first, and whether they explain the whole move. The reflog
// is evidence, not the detector: it may be missing or rewritten, and then
// the window is empty or incomplete.
func (c *comparer) reflog(ref, old, new string) (reflogWindow, bool) {
	if new == "" {
		return nil, false // deleting a ref deletes its reflog
	}
	out, err := c.m.run(c.ctx, c.m.root, "reflog", "show", "--no-show-signature", "-n", fmt.Sprint(maxReflog),
		"--format=%H%x00%gn%x00%ge%x00%gs", ref, "--")
	if err != nil {
		slog.Debug("the guard cannot read a reflog", "ref", ref, "err", err)
		return nil, false
	}
	var all reflogWindow
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, "\x00", 4)
		if len(f) == 4 {
			all = append(all, reflogEntry{new: f[0], name: f[1], email: f[2], subject: f[3]})
		}
	}
	if len(all) == 0 {
		return nil, false
	}
	for i, e := range all {
		if old != "" && e.new == old {
			return all[:i], i > 0 && all[0].new == new
		}
	}
	if old == "" {
		return all, all[0].new == new && len(all) < maxReflog
	}
	return all, false
}

// agents lists the agents, other than except, whose swarm/<agent>
// identity wrote an entry.
func (w reflogWindow) agents(except string) []string {
	var out []string
	for _, e := range w {
		if a, ok := strings.CutPrefix(e.name, BranchPrefix); ok && a != "" && a != except && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

func (w reflogWindow) allBy(ok func(reflogEntry) bool) bool {
	return !slices.ContainsFunc(w, func(e reflogEntry) bool { return !ok(e) })
}

// saying cites the reflog's swarm identities, for messages.
func (w reflogWindow) saying() string {
	agents := w.agents("")
	if len(agents) == 0 {
		return ""
	}
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = Branch(a)
	}
	return ", by " + strings.Join(names, " and ") + " according to its reflog"
}
