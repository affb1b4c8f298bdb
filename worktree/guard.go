package worktree

// The session guard: base-branch protection and the repo-tamper check
// (DESIGN §7; escalation kinds branch_violation and repo_tamper, §9.1).
//
// What it compares. Guard takes a Snapshot before a session: the tips of
// the base branch and of every swarm/* branch, the entries of the shared
// .git/hooks (content hashes and mode bits), the config keys that make
// git run programs or read more config, and the operator's checkout (its
// uncommitted files, swarm.toml and AGENTS.md: checkout.go). Check takes another after the
// session and compares the two (CompareSnapshots). It compares refs, not
// authors: an author name proves nothing (GIT_AUTHOR_NAME=tester, or a
// teammate's name), while a ref that moved did move.
//
// Between sessions. The Manager keeps, per agent, the snapshot Check took
// at the end of its last session (its baseline). The next Guard compares
// that baseline with its own start, so a change made between two sessions
// (a detached `git commit &` that lands after Check) is found at the next
// start, in SessionGuard.Prior, instead of silently becoming the next
// session's starting point. An agent's first session in a Manager has no
// baseline; SetBaseline restores one across a restart.
//
// What may move the base. A move of the base branch is allowed when swarm
// recorded making it (RecordMove), when every new commit on its
// first-parent line was committed by the operator's own identity (the main
// checkout's user.name/user.email, or the identity swarm's merges use), or
// when the operator's git wrote every reflog entry of the move (a
// fast-forward pull of other people's commits). It is a violation when
// an agent's identity wrote a reflog entry of the move, whatever the
// commits, and always when it is not a fast-forward or deletes the base.
//
// Whose session. The Manager also keeps a small ledger of which agents have
// a session open (from Guard to Check), so that a move of swarm/<other> can
// be told apart from that agent's own work: an agent's branch may move
// during its own sessions; outside them only swarm itself (RecordMove) and
// the agent's own leftover processes may move it.
//
// Who is charged. A finding's Blame lists the agents its evidence names:
// the swarm/<agent> identity of the reflog entries that made the move (the
// session environment sets GIT_COMMITTER_NAME=swarm/<agent>, which is also
// the identity git writes into reflogs), and the swarm/<agent> committers
// of offending commits. An empty Blame means "whoever had a session
// running while it happened". Each agent's guard returns the findings that
// concern that agent: those that blame it, those that blame nobody, and
// those that blame only agents this Manager never guarded. So one event can
// be found by several guards; Finding.Dedupe is the same for all of them and
// is the escalation's dedupe key.
//
// The identities are a hint and a guard against mistakes, not proof
// against an agent that sets GIT_COMMITTER_NAME to the operator's name or
// rewrites the reflog: agents run as the operator's user (DESIGN §9.1,
// operator-only commands).
//
// Using it across sessions (the supervisor):
//
//  1. g, err := m.Guard(ctx, agent) before the session; an error means the
//     session must not start. g.Prior() lists what changed since the
//     agent's previous session; a supervisor that holds agents on
//     branch_violation can act on it before the session runs.
//  2. found, err := g.Check(ctx) (or g.Err) when the session ends, also
//     after an interrupted one. found includes Prior, so nothing is lost if
//     step 1 ignored it. For each finding raise one escalation: kind
//     f.Escalation(), dedupe key f.Dedupe(), the agents to hold f.Blame() (or,
//     when empty, every agent whose session overlapped; the Violation's or
//     Tamper's Between says whether that was the session or the time before
//     it), and f.String() as the summary. A Guard made while the agent's
//     previous guard was never checked takes over that guard's start and
//     its Prior.
//  3. Across a restart: store m.Baseline(agent) (it marshals to JSON) when
//     the supervisor stops and hand it back with m.SetBaseline before the
//     agent's first Guard.
//  4. swarm's own ref writes that a guard may compare across (Merge,
//     Squash and Discard, which today run only while the supervisor is
//     stopped) should call m.RecordMove, so that they are not reported.
//
// The tamper check finds what an agent planted for others; swarm's own git
// runs none of it in the first place (noAgentCode in git.go).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/proc"
)

// The escalation kinds (DESIGN §9.1) that findings raise.
const (
	EscalationBranch = "branch_violation"
	EscalationTamper = "repo_tamper"
)

// Finding is one thing the session guard found: a Violation or a Tamper.
type Finding interface {
	// Escalation is the kind of escalation the finding raises:
	// EscalationBranch or EscalationTamper.
	Escalation() string
	// Blame lists the agents the evidence names; empty means every agent
	// whose session overlapped the change.
	Blame() []string
	// Dedupe names the event, the same whichever agent's guard found it:
	// the escalation's dedupe key.
	Dedupe() string
	// String is one sentence for the operator: what happened and how to
	// undo it.
	String() string
}

// ViolationKind names a breach of base-branch protection.
type ViolationKind string

const (
	// ViolationLeftBranch: the worktree is no longer on swarm/<agent>
	// (git switch -c other, git checkout --detach, or its .git is gone).
	ViolationLeftBranch ViolationKind = "left_branch"
	// ViolationMidRebase: the worktree was left in the middle of a rebase
	// (or git am), so its HEAD is detached until that is finished.
	ViolationMidRebase ViolationKind = "mid_rebase"
	// ViolationBaseMoved: the base branch moved forward to commits that
	// swarm did not record making and that the operator did not commit, or
	// an agent moved it (its reflog names swarm/<agent>).
	ViolationBaseMoved ViolationKind = "base_moved"
	// ViolationBaseRewound: the base branch moved to a commit that does not
	// contain its old tip (update-ref, reset, a force), or was deleted.
	ViolationBaseRewound ViolationKind = "base_rewound"
	// ViolationBranchMoved: an agent branch moved, appeared or was deleted
	// outside its agent's sessions, or was moved by another agent.
	ViolationBranchMoved ViolationKind = "branch_moved"
)

// Violation is a breach of base-branch protection (escalation kind
// branch_violation).
type Violation struct {
	Kind ViolationKind `json:"kind"`
	// Agent is the agent whose guard found it.
	Agent string `json:"agent"`
	// Between reports that it was found at Guard, in the time since the
	// agent's previous session, not during a session.
	Between bool `json:"between,omitempty"`
	// Ref is the ref concerned: refs/heads/<base>, refs/heads/swarm/<x>;
	// for left_branch and mid_rebase, the agent's own branch.
	Ref string `json:"ref"`
	// Old and New are Ref's commits before and after (full hashes; "" when
	// the ref did not exist). Empty for left_branch and mid_rebase.
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
	// Head is where the worktree's HEAD is (left_branch, mid_rebase), like
	// "branch other", "a detached HEAD at 1a2b3c4" or "no worktree".
	Head string `json:"head,omitempty"`
	// Charged lists the agents the evidence names (Blame).
	Charged []string `json:"charged,omitempty"`
	// Commits are the offending commits (base_moved), newest first:
	// "<short hash> <subject> (committed by <name>)".
	Commits []string `json:"commits,omitempty"`
	// Detail says what happened and how to undo it.
	Detail string `json:"detail"`
}

// Escalation is EscalationBranch.
func (v Violation) Escalation() string { return EscalationBranch }

// Blame is Charged.
func (v Violation) Blame() []string { return v.Charged }

// Dedupe names the violation: its kind, its ref and the state that is wrong
// (the oldest offending commit for base_moved, so a later operator commit
// on top does not make it a new event).
func (v Violation) Dedupe() string {
	switch v.Kind {
	case ViolationLeftBranch, ViolationMidRebase:
		return string(v.Kind) + ":" + v.Ref + ":" + v.Head
	case ViolationBaseMoved:
		if len(v.Commits) > 0 {
			oldest, _, _ := strings.Cut(v.Commits[len(v.Commits)-1], " ")
			return string(v.Kind) + ":" + v.Ref + ":" + oldest
		}
	}
	return string(v.Kind) + ":" + v.Ref + ":" + v.New
}

func (v Violation) String() string { return v.Detail }

// GuardError is a session that the guard found something about.
type GuardError struct {
	Agent    string
	Findings []Finding
}

func (e *GuardError) Error() string {
	msgs := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		msgs[i] = f.String()
	}
	return strings.Join(msgs, "; ")
}

// SessionGuard holds what one session of an agent started from.
type SessionGuard struct {
	m     *Manager
	agent string
	path  string
	base  string
	start *Snapshot
	prior []Finding
}

// Guard snapshots the repository before one of agent's sessions and
// compares the snapshot with the end of the agent's previous session
// (Prior). It fails when the worktree is missing, already off
// swarm/<agent> or mid-rebase, or when the base branch is gone: a session
// must not start there.
func (m *Manager) Guard(ctx context.Context, agent string) (*SessionGuard, error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return nil, err
	}
	path, err := m.worktreeDir(agent)
	if err != nil {
		return nil, err
	}
	h, err := m.headOf(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("guard %s: %w", agent, err)
	}
	if h.Ref != branchRef(agent) {
		return nil, m.wrongBranch(agent, path, strings.TrimPrefix(h.Ref, "refs/heads/"))
	}
	// The session counts as open before the snapshot is taken, so a
	// teammate's guard that compares across this moment sees it.
	g := &SessionGuard{m: m, agent: agent, path: path, base: base}
	from, session, carried := m.guard.begin(g)
	snap, err := m.sharedSnapshot(ctx)
	if err != nil {
		m.guard.abandon(g)
		return nil, fmt.Errorf("guard %s: %w", agent, err)
	}
	baseRef := "refs/heads/" + base
	if snap.Refs[baseRef] == "" {
		m.guard.abandon(g)
		restore := ""
		if last := m.guard.lastBase(); last != "" {
			restore = fmt.Sprintf("; it was last seen at %s: recreate it with 'git update-ref %s %s'", text.Short(last, 7), baseRef, last)
		}
		return nil, fmt.Errorf("%w: %s is gone%s", ErrBaseMissing, base, restore)
	}
	prior := carried
	if from != nil {
		found, err := m.CompareSnapshots(ctx, from, snap, m.guard.window(agent, from, session))
		if err != nil {
			m.guard.abandon(g)
			return nil, fmt.Errorf("guard %s: compare with its last session: %w", agent, err)
		}
		for _, f := range m.guard.concerning(agent, found) {
			if !session {
				f = between(f)
			}
			prior = append(prior, f)
		}
	}
	m.guard.opened(g, snap, prior)
	return g, nil
}

// between marks a finding as found between sessions.
func between(f Finding) Finding {
	switch v := f.(type) {
	case Violation:
		v.Between = true
		return v
	case Tamper:
		v.Between = true
		return v
	}
	return f
}

// BaseTip is the base branch's commit when the guard was made.
func (g *SessionGuard) BaseTip() string { return g.start.Refs["refs/heads/"+g.base] }

// Start is the snapshot taken when the guard was made.
func (g *SessionGuard) Start() *Snapshot { return g.start }

// Prior lists what the guard found, when it was made, about the time since
// the agent's previous session: changes no session of the agent's made.
// Check returns them too.
func (g *SessionGuard) Prior() []Finding { return slices.Clone(g.prior) }

// Check reports, after the session, Prior and everything that concerns the
// agent in what changed since Guard: the worktree left swarm/<agent> or
// was left mid-rebase; the base branch or an agent branch moved in a way
// nobody may move it; the shared hooks or watched config changed. No
// findings means the session kept to its branch. The error is for failing
// to look, not for what was found. Check ends the session in the Manager's
// ledger and makes its snapshot the agent's baseline; calling it again
// compares from the same start.
func (g *SessionGuard) Check(ctx context.Context) ([]Finding, error) {
	// A failure to look leaves the session open in the ledger: the agent's
	// next Guard then compares from this guard's start and carries Prior.
	found := g.Prior()
	wt, err := g.worktreeFindings(ctx)
	if err != nil {
		return found, err
	}
	found = append(found, wt...)
	snap, err := g.m.sharedSnapshot(ctx)
	if err != nil {
		return found, fmt.Errorf("check %s's session: %w", g.agent, err)
	}
	all, err := g.m.CompareSnapshots(ctx, g.start, snap, g.m.guard.window(g.agent, g.start, true))
	if err != nil {
		return found, fmt.Errorf("check %s's session: %w", g.agent, err)
	}
	found = append(found, g.m.guard.concerning(g.agent, all)...)
	g.m.guard.checked(g, snap)
	return found, nil
}

// worktreeFindings reports a worktree that is gone, off its branch, or
// mid-rebase.
func (g *SessionGuard) worktreeFindings(ctx context.Context) ([]Finding, error) {
	branch := Branch(g.agent)
	v := Violation{Kind: ViolationLeftBranch, Agent: g.agent, Ref: branchRef(g.agent), Charged: []string{g.agent}}
	if _, err := os.Lstat(filepath.Join(g.path, ".git")); err != nil {
		v.Head = "no worktree"
		v.Detail = fmt.Sprintf("%s's worktree %s is gone; it is recreated from %s at the next session", g.agent, g.path, branch)
		return []Finding{v}, nil
	}
	if onto, am, ok := rebaseState(g.path); ok {
		v.Kind, v.Head = ViolationMidRebase, "a rebase in progress"
		if am {
			v.Head = "git am in progress"
		}
		v.Detail = midRebaseText(g.agent, g.path, onto, am)
		return []Finding{v}, nil
	}
	h, err := g.m.headOf(ctx, g.path)
	if err != nil {
		return nil, fmt.Errorf("check %s's worktree: %w", g.agent, err)
	}
	if h.Ref == branchRef(g.agent) {
		return nil, nil
	}
	v.Head = h.describe()
	v.Detail = fmt.Sprintf("%s left its branch: its worktree %s is on %s, not %s; save that work and run 'git -C %q switch %s'", g.agent, g.path, h.describe(), branch, g.path, branch)
	return []Finding{v}, nil
}

// Err is Check as an error: nil, a *GuardError, or the failure to check.
func (g *SessionGuard) Err(ctx context.Context) error {
	found, err := g.Check(ctx)
	if len(found) == 0 {
		return err
	}
	ge := &GuardError{Agent: g.agent, Findings: found}
	if err != nil {
		return errors.Join(ge, err)
	}
	return ge
}

// headOf reads HEAD of the worktree at path in-process, or with the git
// CLI when go-git cannot open the repository: it refuses extensions git
// reads fine (extensions.worktreeConfig, which `git sparse-checkout` turns
// on, and which an agent can turn on too), and the guard must still report
// that rather than fail. path must hold a .git, or git would read the
// enclosing repository.
func (m *Manager) headOf(ctx context.Context, path string) (head, error) {
	h, err := readHead(path)
	if err == nil {
		return h, nil
	}
	out, serr := m.run(ctx, path, "symbolic-ref", "-q", "HEAD")
	var ee *proc.ExitError
	switch {
	case serr == nil:
		h = head{Ref: out}
	case errors.As(serr, &ee) && ee.ExitCode == 1:
		// Detached.
	default:
		return head{}, errors.Join(err, serr)
	}
	if hash, ok, rerr := m.revParse(ctx, path, "HEAD"); rerr != nil {
		return head{}, errors.Join(err, rerr)
	} else if ok {
		h.Hash = hash
	}
	return h, nil
}

// revParse resolves rev to a commit in dir, reporting false when there is
// none.
func (m *Manager) revParse(ctx context.Context, dir, rev string) (string, bool, error) {
	out, err := m.run(ctx, dir, "rev-parse", "-q", "--verify", rev+"^{commit}")
	var ee *proc.ExitError
	switch {
	case err == nil:
		return out, true, nil
	case errors.As(err, &ee) && ee.ExitCode == 1:
		return "", false, nil
	default:
		return "", false, err
	}
}

// rebaseState reports a rebase (or git am) in progress in the worktree at
// path, and the branch it rebases ("" for a detached HEAD). git keeps that
// state in the worktree's own git dir, and HEAD stays detached until it is
// finished or aborted.
func rebaseState(path string) (onto string, am, ok bool) {
	gitdir, linked := linkedGitDir(path)
	if !linked {
		gitdir = filepath.Join(path, ".git")
	}
	for _, d := range []string{"rebase-merge", "rebase-apply"} {
		dir := filepath.Join(gitdir, d)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if d == "rebase-apply" {
			if _, err := os.Stat(filepath.Join(dir, "applying")); err == nil {
				am = true
			}
		}
		b, _ := os.ReadFile(filepath.Join(dir, "head-name"))
		name := strings.TrimSpace(string(b))
		if name == "detached HEAD" {
			name = ""
		}
		return strings.TrimPrefix(name, "refs/heads/"), am, true
	}
	return "", false, false
}

// midRebaseError is the error for a worktree left mid-rebase, or nil when
// it is not: "run git switch" would be the wrong advice there (the switch
// refuses, and the rebased commits are not on the branch yet).
func midRebaseError(agent, path string) error {
	onto, am, ok := rebaseState(path)
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrWrongBranch, midRebaseText(agent, path, onto, am))
}

// midRebaseRoot is the error for a repository (your checkout, not an
// agent's worktree) whose HEAD is detached because a rebase or 'git am'
// is under way there, or nil when none is: "run git switch" would be the
// wrong advice.
func midRebaseRoot(root string) error {
	onto, am, ok := rebaseState(root)
	if !ok {
		return nil
	}
	if am {
		return fmt.Errorf("%w: %s is in the middle of 'git am' (HEAD is detached until it ends), and swarm starts agents from a branch; finish it with 'git am --continue' once the conflicts are resolved, or give it up with 'git am --abort', then try again", ErrDetachedHead, root)
	}
	what := "a rebase"
	if onto != "" {
		what = "a rebase of " + onto
	}
	return fmt.Errorf("%w: %s is in the middle of %s (HEAD is detached until it ends), and swarm starts agents from a branch; finish it with 'git rebase --continue' once the conflicts are resolved, or give it up with 'git rebase --abort', then try again", ErrDetachedHead, root, what)
}

func midRebaseText(agent, path, onto string, am bool) string {
	branch := Branch(agent)
	if am {
		return fmt.Sprintf("%s's worktree %s is in the middle of 'git am' (HEAD is detached until it ends); finish it with 'git -C %q am --continue' once the conflicts are resolved, or give it up with 'git -C %q am --abort'", agent, path, path, path)
	}
	if onto == branch {
		return fmt.Sprintf("%s's worktree %s is in the middle of a rebase of %s (HEAD is detached until it ends); finish it with 'git -C %q rebase --continue' once the conflicts are resolved, or give it up with 'git -C %q rebase --abort', which puts %s back as it was", agent, path, branch, path, path, branch)
	}
	what := "a detached HEAD"
	if onto != "" {
		what = "branch " + onto
	}
	return fmt.Sprintf("%s's worktree %s is in the middle of a rebase of %s, not of %s; give it up with 'git -C %q rebase --abort', then run 'git -C %q switch %s'", agent, path, what, branch, path, path, branch)
}

// guardState is the Manager's bookkeeping for session guards: which agents
// have a session open, and each agent's baseline. Its zero value is ready.
type guardState struct {
	mu     sync.Mutex
	seq    uint64 // moves at every session start and end
	agents map[string]*agentLedger
	moves  []RefMove // recorded by RecordMove in this process
	common string    // the common git dir, once known
	base   string    // the base tip the last snapshot that had one saw

	metaMu sync.Mutex // serializes RecordMove's read-modify-write of the meta key
}

// agentLedger is one agent's line in the ledger.
type agentLedger struct {
	open     *SessionGuard // the session in progress: Guard made, no Check yet
	lastEnd  uint64        // seq when its last session ended
	baseline *Snapshot     // the snapshot its last Check took
	checked  *SessionGuard // the guard that took it
}

func (s *guardState) agent(name string) *agentLedger {
	if s.agents == nil {
		s.agents = map[string]*agentLedger{}
	}
	a := s.agents[name]
	if a == nil {
		a = &agentLedger{}
		s.agents[name] = a
	}
	return a
}

// begin opens g's session and says what g compares from: the agent's
// baseline (the window is then time between its sessions), or the start of
// its previous session whose guard was never checked (the window then
// counts as that session), whose Prior is carried over.
func (s *guardState) begin(g *SessionGuard) (from *Snapshot, session bool, carried []Finding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agent(g.agent)
	if prev := a.open; prev != nil && prev.start != nil {
		from, session, carried = prev.start, true, slices.Clone(prev.prior)
	} else {
		from = a.baseline
	}
	s.seq++
	a.open = g
	return from, session, carried
}

// opened fills in g once its snapshot is taken.
func (s *guardState) opened(g *SessionGuard, start *Snapshot, prior []Finding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.start, g.prior = start, prior
}

// abandon closes the session of a guard that could not be made.
func (s *guardState) abandon(g *SessionGuard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agent(g.agent); a.open == g {
		a.open = nil
		s.seq++
		a.lastEnd = s.seq
	}
}

// checked ends g's session, if it is still the agent's open one, and makes
// snap the agent's baseline. Checking g again moves the baseline on; a
// guard checked after a newer one was made changes nothing, as the newer
// one already covers its time.
func (s *guardState) checked(g *SessionGuard, snap *Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agent(g.agent)
	switch {
	case a.open == g:
		a.open = nil
		s.seq++
		a.lastEnd = s.seq
	case a.open != nil || a.checked != g:
		return
	}
	a.checked, a.baseline = g, snap
}

// sawBase remembers the base tip a snapshot saw, so that a deleted base
// can be named with the commit to recreate it at.
func (s *guardState) sawBase(tip string) {
	if tip == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base = tip
}

func (s *guardState) lastBase() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

// mark stamps a snapshot with the ledger's position.
func (s *guardState) mark(snap *Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap.led, snap.seq = s, s.seq
}

// window describes the time from snapshot from until now for agent: which
// other agents had a session in it. A snapshot from another ledger (one
// restored after a restart) leaves that unknown.
func (s *guardState) window(agent string, from *Snapshot, session bool) Window {
	w := Window{Agent: agent, Session: session}
	s.mu.Lock()
	defer s.mu.Unlock()
	if from.led != s {
		w.OverlapUnknown = true
		return w
	}
	for name, a := range s.agents {
		if name != agent && (a.open != nil || a.lastEnd > from.seq) {
			w.Overlapping = append(w.Overlapping, name)
		}
	}
	slices.Sort(w.Overlapping)
	return w
}

// concerning keeps the findings agent's guard reports: those that blame
// agent, blame nobody, or blame only agents this Manager never guarded
// (nobody else would report them).
func (s *guardState) concerning(agent string, found []Finding) []Finding {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Finding
	for _, f := range found {
		blamed := f.Blame()
		keep := len(blamed) == 0 || slices.Contains(blamed, agent)
		if !keep {
			keep = true
			for _, b := range blamed {
				if _, known := s.agents[b]; known {
					keep = false
					break
				}
			}
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

// Baseline returns the snapshot taken when agent's last session was
// checked, or nil: what the agent's next Guard compares from. A supervisor
// that wants that comparison to survive a restart stores it (it marshals to
// JSON) and hands it to SetBaseline in the next process.
func (m *Manager) Baseline(agent string) *Snapshot {
	m.guard.mu.Lock()
	defer m.guard.mu.Unlock()
	if a := m.guard.agents[agent]; a != nil {
		return a.baseline
	}
	return nil
}

// SetBaseline makes s what agent's next Guard compares from, as if its last
// session had ended with s. Who had sessions since s is unknown to this
// Manager when s comes from another process, so moves of other agents'
// branches in that time are judged only on reflog evidence.
func (m *Manager) SetBaseline(agent string, s *Snapshot) {
	if s != nil && s.Refs != nil {
		// A stored baseline's refs are shared as a snapshot's are.
		c := *s
		c.Refs = m.refs.intern(s.Refs)
		s = &c
	}
	m.guard.mu.Lock()
	defer m.guard.mu.Unlock()
	a := m.guard.agent(agent)
	a.baseline, a.checked = s, nil
}
