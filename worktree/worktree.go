// Package worktree gives every agent its own git worktree on its own branch,
// and keeps the base branch safe from agents.
//
// Layout: the worktree of agent <a> is <Dir>/<a> (default
// <root>/.swarm/worktrees/<a>) on branch swarm/<a>, created from the base
// branch's tip and reused afterwards. The base branch is the branch checked
// out in the main worktree (the operator's checkout at <root>) when worktrees
// are first created; it is recorded under the meta key "base_branch" and the
// recorded one is used from then on.
//
// Repairs, done by Ensure:
//   - a worktree whose directory was deleted but that git still lists (even
//     locked, after a crash) is unlocked, pruned and created again from its
//     branch, so committed work is never lost;
//   - a directory in the way that git does not know as a worktree is moved
//     aside to <Orphans>/<agent>-<UTC time>, never deleted; anything else in
//     the way (a file, a symlink) is refused, never deleted.
//
// Interruptions: every state change of a worktree (populating, populated,
// merging, merged, removing, removed) is journaled before it starts
// (journal.go), and a re-run finishes or rolls back what an interrupted
// run (Ctrl-C, kill -9) left half done, reporting it as Recovery lines
// (recover.go): a first checkout is redone completely, a half-applied
// merge in the main checkout is rolled back, files a half-done removal
// deleted are put back, stale index.lock files are removed. Auto-commit
// refuses what looks like damage rather than work (safety.go).
//
// Every write, and `status`, runs the git CLI, through package proc (own
// process group, WaitDelay). go-git v5 does the in-process reads only: HEAD
// and branch checks and recent commits. The split is measured (DESIGN §7):
// go-git cannot create linked worktrees, its Status is about 10× slower than
// `git status`, and its index writes take no index.lock.
//
// Base-branch protection: Guard snapshots the refs and the shared .git
// before a session and Check compares after it (guard.go, SessionGuard).
//
// Merge, Squash and Discard end an agent's work: merge and squash first
// auto-commit uncommitted work, then merge into the base branch in the main
// worktree, then remove the worktree and delete the branch. A conflict is
// aborted cleanly (no merge left in progress, the base unchanged) and
// returned as a *ConflictError; the agent's branch and worktree are kept.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/swarmhq/swarm/message"
)

// MetaStore keeps swarm-wide settings; *mailbox.Store satisfies it.
type MetaStore interface {
	Meta(ctx context.Context, key string) (string, bool, error)
	SetMeta(ctx context.Context, key, value string) error
}

// MetaBaseBranch is the meta key under which the base branch is recorded.
const MetaBaseBranch = "base_branch"

// BranchPrefix starts every agent branch: swarm/<agent>.
const BranchPrefix = "swarm/"

// Errors callers can test with errors.Is. The returned errors wrap them
// with what happened and what to do.
var (
	ErrGitMissing   = errors.New("git is not installed or not on PATH")
	ErrGitTooOld    = errors.New("git is too old")
	ErrNotRepo      = errors.New("not a git repository")
	ErrBareRepo     = errors.New("the repository is bare")
	ErrNoCommits    = errors.New("the repository has no commits")
	ErrDetachedHead = errors.New("HEAD is detached in the main worktree")
	ErrBaseMissing  = errors.New("the base branch does not exist")
	ErrWrongBranch  = errors.New("the worktree is not on its agent branch")
	ErrNotOnBase    = errors.New("the main worktree is not on the base branch")
	ErrBaseDirty    = errors.New("the main worktree has uncommitted changes")
	ErrDirty        = errors.New("the worktree has uncommitted changes")
	ErrNoWorktree   = errors.New("the agent has no worktree")
	ErrNoBranch     = errors.New("the agent has no branch")
	ErrElsewhere    = errors.New("the agent branch is checked out elsewhere")
	ErrBadAgent     = errors.New("bad agent name")
	// ErrUnsafeAutoCommit: the uncommitted "work" looks like damage (mass
	// deletions, a never-finished checkout, a nested repository); it was
	// left where it is and nothing was committed.
	ErrUnsafeAutoCommit = errors.New("refused to auto-commit the worktree's changes")
	// ErrIgnoredFiles: removing the worktree would delete files git ignores.
	ErrIgnoredFiles = errors.New("the worktree holds ignored files")
	// ErrInTheWay: something that is not a directory is where a worktree goes.
	ErrInTheWay = errors.New("something else is where the worktree goes")
	// ErrInterrupted: an interrupted run left something half done that
	// swarm cannot finish or undo safely by itself.
	ErrInterrupted = errors.New("an interrupted run left an operation half done")
	// ErrLockHeld: a git lock file is in use, or cannot be shown unused.
	ErrLockHeld = errors.New("a git lock is in use")
	// ErrBusy: another running process is changing the worktree.
	ErrBusy = errors.New("another process is changing the worktree")
)

// Options configure a Manager.
type Options struct {
	// Root is the repository root: the operator's checkout, whose branch
	// becomes the base branch. Its .git may be a directory or a file (a
	// linked worktree of another repository).
	Root string
	// Dir is the parent of the agents' worktrees; relative paths are
	// relative to Root. Default <Root>/.swarm/worktrees.
	Dir string
	// Orphans receives directories that were in a worktree's way. Default
	// <Root>/.swarm/orphans.
	Orphans string
	// Meta records the base branch. Nil means it is not recorded: the
	// current branch of Root is used for the Manager's lifetime.
	Meta MetaStore
	// Now names moved-aside directories; nil means time.Now.
	Now func() time.Time
	// Env is the environment of the git children; nil means os.Environ().
	Env []string
	// Journal is the directory of the per-agent journal files that let a
	// re-run finish or undo what an interrupted run left half done; relative
	// paths are relative to Root. Default <Root>/.swarm/journal.
	Journal string
	// DeleteIgnored lets Merge, Squash, Remove and Discard delete the files
	// git ignores in a worktree (build output, node_modules, .env) along
	// with it. Without it they list them and keep the worktree.
	DeleteIgnored bool
	// Pass names credentials swarm's own git commands keep ([env] pass);
	// every other credential is scrubbed from their environment.
	Pass []string
}

// Manager creates and ends agents' worktrees in one repository. It is safe
// for concurrent use; the operations that write are serialized.
type Manager struct {
	root    string
	dir     string
	orphans string
	journal string
	meta    MetaStore
	now     func() time.Time
	baseEnv []string
	pass    []string

	deleteIgnored bool

	mu       sync.Mutex      // held by every write to the repository
	excluded map[string]bool // dirs known to be ignored by git (under mu)

	baseMu sync.Mutex
	base   string

	guard guardState // the session guard's bookkeeping (guard.go)
	snaps coalescer[*Snapshot]
	refs  refsIntern
}

// Worktree is one agent's worktree.
type Worktree struct {
	Agent  string
	Path   string // absolute
	Branch string // swarm/<agent>
	// MovedAside is set when Ensure moved a directory that was in the way;
	// it is where that directory went.
	MovedAside string
	// Recovered is what Ensure finished or undid of an interrupted run
	// first; print it.
	Recovered []Recovery
}

// New returns a Manager for the repository at opts.Root. It runs no git:
// call Preflight for the checks that give clear errors.
func New(ctx context.Context, opts Options) (*Manager, error) {
	if opts.Root == "" {
		return nil, errors.New("worktree: no repository root given")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("worktree: root %s: %w", opts.Root, err)
	}
	abs := func(p, def string) string {
		switch {
		case p == "":
			return def
		case filepath.IsAbs(p):
			return filepath.Clean(p)
		default:
			return filepath.Join(root, p)
		}
	}
	m := &Manager{
		root:    root,
		dir:     abs(opts.Dir, filepath.Join(root, ".swarm", "worktrees")),
		orphans: abs(opts.Orphans, filepath.Join(root, ".swarm", "orphans")),
		journal: abs(opts.Journal, filepath.Join(root, ".swarm", "journal")),
		meta:    opts.Meta,
		now:     opts.Now,
		baseEnv: opts.Env,
		pass:    opts.Pass,

		deleteIgnored: opts.DeleteIgnored,
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.baseEnv == nil {
		m.baseEnv = os.Environ()
	}
	return m, nil
}

// Root is the repository root the Manager works on.
func (m *Manager) Root() string { return m.root }

// Dir is the parent directory of the agents' worktrees.
func (m *Manager) Dir() string { return m.dir }

// Path is where agent's worktree lives.
func (m *Manager) Path(agent string) string { return filepath.Join(m.dir, agent) }

// Branch is agent's branch, swarm/<agent>.
func Branch(agent string) string { return BranchPrefix + agent }

func branchRef(agent string) string { return "refs/heads/" + Branch(agent) }

// checkAgent applies the one agent-name rule (message.ValidName): names
// become path and ref components.
func checkAgent(agent string) error {
	if !message.ValidName(agent) {
		return fmt.Errorf("%w %q: use lower-case letters, digits and '-', starting with a letter", ErrBadAgent, agent)
	}
	return nil
}

// Preflight checks, before anything is created, that swarm can work in the
// repository: git is on PATH and at least 2.20, Root is a git repository
// with a working tree, HEAD is on a branch, and there is a first commit.
// Each failure wraps one of the Err* values and says what to do.
func (m *Manager) Preflight(ctx context.Context) error {
	if fi, err := os.Stat(m.root); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrNotRepo, m.root)
	}
	out, err := m.run(ctx, m.root, "version")
	if err != nil {
		return err
	}
	major, minor, err := ParseGitVersion(out)
	if err != nil {
		return err
	}
	if major < 2 || major == 2 && minor < 20 {
		return fmt.Errorf("%w: found %d.%d, swarm needs git %s or newer; upgrade git", ErrGitTooOld, major, minor, MinGit)
	}
	bare, err := m.run(ctx, m.root, "rev-parse", "--is-bare-repository")
	if err != nil {
		return fmt.Errorf("%w: %s: %v; run 'git init' there and make a first commit", ErrNotRepo, m.root, err)
	}
	if bare == "true" {
		return fmt.Errorf("%w: %s has no working tree for agents to branch from; clone it (git clone %s work) and run swarm in the clone", ErrBareRepo, m.root, m.root)
	}
	onBranch, err := m.ok(ctx, m.root, "symbolic-ref", "-q", "HEAD")
	if err != nil {
		return err
	}
	if !onBranch {
		if err := midRebaseRoot(m.root); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s is not on a branch, and swarm starts agents from a branch; run 'git switch <branch>' (or 'git switch -c <new-branch>') first", ErrDetachedHead, m.root)
	}
	hasCommit, err := m.ok(ctx, m.root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if err != nil {
		return err
	}
	if !hasCommit {
		return fmt.Errorf("%w: agents branch from the current commit, and %s has none yet; make a first commit (git add -A && git commit -m 'first commit') and try again", ErrNoCommits, m.root)
	}
	// The in-process reads must work too, or every session would fail later.
	if _, err := readHead(m.root); err != nil {
		return fmt.Errorf("read %s in-process: %w", m.root, err)
	}
	if name, ok, err := m.recordedBase(ctx); err != nil {
		return err
	} else if ok {
		if err := m.checkBaseExists(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) recordedBase(ctx context.Context) (string, bool, error) {
	if m.meta == nil {
		return "", false, nil
	}
	v, ok, err := m.meta.Meta(ctx, MetaBaseBranch)
	if err != nil {
		return "", false, fmt.Errorf("read the recorded base branch: %w", err)
	}
	return v, ok && v != "", nil
}

func (m *Manager) checkBaseExists(ctx context.Context, name string) error {
	ok, err := m.ok(ctx, m.root, "rev-parse", "--verify", "-q", "refs/heads/"+name+"^{commit}")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s was recorded as the base branch when the worktrees were created, and it is gone; recreate it (git branch %s <commit>)", ErrBaseMissing, name, name)
	}
	return nil
}

// BaseBranch returns the base branch: the recorded one, or else the branch
// checked out at Root now, which is then recorded.
func (m *Manager) BaseBranch(ctx context.Context) (string, error) {
	m.baseMu.Lock()
	defer m.baseMu.Unlock()
	if m.base != "" {
		return m.base, nil
	}
	name, ok, err := m.recordedBase(ctx)
	if err != nil {
		return "", err
	}
	if ok {
		if err := m.checkBaseExists(ctx, name); err != nil {
			return "", err
		}
		m.base = name
		return name, nil
	}
	h, err := readHead(m.root)
	if err != nil {
		return "", err
	}
	switch {
	case h.Detached():
		if err := midRebaseRoot(m.root); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: %s is at %s; run 'git switch <branch>' so swarm knows which branch to start agents from", ErrDetachedHead, m.root, h.describe())
	case h.Hash == "":
		return "", fmt.Errorf("%w: make a first commit in %s and try again", ErrNoCommits, m.root)
	}
	name = strings.TrimPrefix(h.Ref, "refs/heads/")
	if strings.HasPrefix(name, BranchPrefix) {
		// Agents never work on the base branch, so it cannot be one of theirs.
		return "", fmt.Errorf("%w: %s is on %s, an agent branch; switch it to your own branch (git switch main) first", ErrNotOnBase, m.root, name)
	}
	if m.meta != nil {
		if err := m.meta.SetMeta(ctx, MetaBaseBranch, name); err != nil {
			return "", fmt.Errorf("record the base branch: %w", err)
		}
	}
	m.base = name
	return name, nil
}

// Info is what Inspect found about an agent's worktree and branch.
type Info struct {
	Worktree
	Registered bool   // git lists a worktree at Path
	Exists     bool   // a directory is at Path
	Locked     bool   // the registered worktree is locked
	Head       string // the branch checked out there; "" when detached or unregistered
	HasBranch  bool   // swarm/<agent> exists
	// Elsewhere is the path of another worktree that has swarm/<agent>
	// checked out, if any.
	Elsewhere string
}

// Valid reports whether the agent has a working worktree at Path: registered,
// present, with its .git file.
func (i Info) Valid() bool {
	if !i.Registered || !i.Exists {
		return false
	}
	_, err := os.Lstat(filepath.Join(i.Path, ".git"))
	return err == nil
}

// Inspect reports the state of agent's worktree and branch without changing
// anything.
func (m *Manager) Inspect(ctx context.Context, agent string) (Info, error) {
	if err := checkAgent(agent); err != nil {
		return Info{}, err
	}
	return m.inspect(ctx, agent)
}

// lockAgent checks agent's name, takes the manager's lock and inspects the
// agent's worktree. The caller releases the lock with the returned func on
// every path.
func (m *Manager) lockAgent(ctx context.Context, agent string) (Info, func(), error) {
	if err := checkAgent(agent); err != nil {
		return Info{}, func() {}, err
	}
	m.mu.Lock()
	info, err := m.inspect(ctx, agent)
	return info, m.mu.Unlock, err
}

func (m *Manager) inspect(ctx context.Context, agent string) (Info, error) {
	entries, err := m.list(ctx)
	if err != nil {
		return Info{Worktree: Worktree{Agent: agent, Path: m.Path(agent), Branch: Branch(agent)}}, err
	}
	return m.inspectIn(ctx, agent, entries)
}

// inspectIn is inspect with the worktree list already read (under m.mu,
// with nothing changed since): one `git worktree list` serves every agent
// of a Recover instead of one each.
func (m *Manager) inspectIn(ctx context.Context, agent string, entries []entry) (Info, error) {
	info := listed(m.Path(agent), agent, entries)
	var err error
	info.HasBranch, err = m.ok(ctx, m.root, "rev-parse", "--verify", "-q", branchRef(agent)+"^{commit}")
	if err != nil {
		return info, err
	}
	return info, nil
}

// listed is what the worktree list says of agent's worktree at path, and
// whether it exists; HasBranch is left unknown (false).
func listed(path, agent string, entries []entry) Info {
	info := Info{Worktree: Worktree{Agent: agent, Path: path, Branch: Branch(agent)}}
	want := canon(info.Path)
	for _, e := range entries {
		switch {
		case canon(e.path) == want:
			info.Registered = true
			info.Locked = e.locked
			info.Head = strings.TrimPrefix(e.branch, "refs/heads/")
		case e.branch == branchRef(agent):
			info.Elsewhere = e.path
		}
	}
	if _, err := os.Lstat(info.Path); err == nil {
		info.Exists = true
	}
	return info
}

type entry struct {
	path   string
	branch string // refs/heads/..., empty when detached
	locked bool
}

// list parses `git worktree list --porcelain`.
func (m *Manager) list(ctx context.Context) ([]entry, error) {
	out, err := m.run(ctx, m.root, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var list []entry
	for _, block := range strings.Split(out, "\n\n") {
		var e entry
		for _, line := range strings.Split(block, "\n") {
			key, val, _ := strings.Cut(line, " ")
			switch key {
			case "worktree":
				e.path = unquote(val)
			case "branch":
				e.branch = val
			case "locked":
				e.locked = true
			}
		}
		if e.path != "" {
			list = append(list, e)
		}
	}
	return list, nil
}

// unquote undoes the C-style quoting newer git applies to unusual paths.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// canon resolves symlinks in the longest existing prefix of p, so paths
// git reports compare equal to the ones swarm builds (/tmp vs /private/tmp).
func canon(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(canon(parent), filepath.Base(p))
}

// Ensure returns agent's worktree, creating it on swarm/<agent> from the
// base branch's tip, or reusing it after checking it is on swarm/<agent>.
// An existing branch is checked out as it is, never reset. It repairs a
// registered worktree whose directory is gone (unlock, prune, recreate),
// moves aside a directory that is in the way but not a worktree (and
// refuses anything else in the way), and finishes what an interrupted run
// left half done (Worktree.Recovered says what): a first checkout cut short
// is redone completely, so truncated files are mended.
func (m *Manager) Ensure(ctx context.Context, agent string) (Worktree, error) {
	if err := checkAgent(agent); err != nil {
		return Worktree{}, err
	}
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return Worktree{}, err
	}
	wt, state, err := m.register(ctx, agent, base)
	if err != nil || state == checkedOut {
		return wt, err
	}
	// The checkout runs outside the lock, so the agents' checkouts overlap:
	// on a real repository they are most of the start-up time.
	if err := m.populate(ctx, wt.Path, state); err != nil {
		return wt, fmt.Errorf("check out worktree %s: %w", agent, err)
	}
	if state == redo {
		var rec recoveries
		rec.add(agent, "%s: redid the checkout of its worktree %s, which an interrupted run had left incomplete", agent, wt.Path)
		wt.Recovered = append(wt.Recovered, rec...)
	}
	m.mu.Lock()
	err = m.writeJournal(ctx, journal{Agent: agent, State: statePopulated, Op: opEnsure})
	m.mu.Unlock()
	return wt, err
}

// checkout says what register left for Ensure to do.
type checkout int

const (
	checkedOut checkout = iota // nothing: the worktree is complete
	fresh                      // just made: an empty directory to fill
	partial                    // made before the journal, its checkout unfinished: fill in what is missing
	redo                       // its first checkout was cut short: do it again completely
)

// register makes sure git knows agent's worktree, creating it without a
// checkout when needed, and reports what checking out is left to do.
// Registering stays under the lock: concurrent 'git worktree add' runs
// were seen to fail (reading .git/worktrees/<x>/commondir).
func (m *Manager) register(ctx context.Context, agent, base string) (Worktree, checkout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A worktree already in place is read from its own files (own.go);
	// git's list is for everything else. Whether the branch exists is
	// asked only if creating it fails.
	info, ok := m.ownInfo(ctx, agent)
	if !ok {
		if wt, made := m.addNew(ctx, agent, base); made {
			return wt, fresh, nil
		}
		entries, err := m.list(ctx)
		if err != nil {
			return Worktree{}, checkedOut, fmt.Errorf("ensure worktree %s: %w", agent, err)
		}
		info = listed(m.Path(agent), agent, entries)
	}
	wt := info.Worktree
	if info.Elsewhere != "" {
		return wt, checkedOut, fmt.Errorf("%w: %s is checked out in %s, not in %s; move that worktree (git worktree move %q %q) or remove it", ErrElsewhere, wt.Branch, info.Elsewhere, wt.Path, info.Elsewhere, wt.Path)
	}
	var rec recoveries
	r, err := m.recoverAgent(ctx, &info, recoverForEnsure, &rec)
	wt.Recovered = rec
	if err != nil {
		return wt, checkedOut, fmt.Errorf("ensure worktree %s: %w", agent, err)
	}
	if info.Valid() {
		if info.Head != wt.Branch {
			return wt, checkedOut, m.wrongBranch(agent, wt.Path, info.Head)
		}
		if r.checkout != checkedOut {
			return wt, r.checkout, nil
		}
		// In use again: whatever an earlier `swarm down` recorded (merged,
		// say) no longer describes it.
		if r.have && (r.j.State != statePopulated || r.j.Merged) {
			if err := m.writeJournal(ctx, journal{Agent: agent, State: statePopulated, Op: opEnsure}); err != nil {
				return wt, checkedOut, err
			}
		}
		return wt, checkedOut, nil
	}
	if info.Registered {
		// Deleted (or gutted) but still registered, maybe locked by a
		// supervisor that died: forget it, then create it again.
		slog.Warn("worktree directory is gone; pruning it", "agent", agent, "path", wt.Path)
		if info.Locked {
			if _, err := m.run(ctx, m.root, "worktree", "unlock", wt.Path); err != nil {
				return wt, checkedOut, fmt.Errorf("repair worktree %s: %w", agent, err)
			}
		}
		if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
			return wt, checkedOut, fmt.Errorf("repair worktree %s: %w", agent, err)
		}
		if again, err := m.inspect(ctx, agent); err != nil {
			return wt, checkedOut, err
		} else if again.Registered {
			return wt, checkedOut, fmt.Errorf("repair worktree %s: git still lists %s after 'git worktree prune'; run 'git worktree remove --force %q'", agent, wt.Path, wt.Path)
		}
	}
	if _, err := os.Lstat(wt.Path); err == nil {
		if wt.MovedAside, err = m.moveAside(ctx, agent, wt.Path); err != nil {
			return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
		}
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	if err := m.exclude(ctx, m.dir); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	// Journaled first: a run interrupted from here on left a checkout that
	// no agent has worked in, which the next run redoes completely.
	if err := m.writeJournal(ctx, journal{Agent: agent, State: statePopulating, Op: opEnsure, Base: base}); err != nil {
		return wt, checkedOut, err
	}
	if err := m.addWorktree(ctx, agent, base); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	return wt, fresh, nil
}

// populatedMarker, in a linked worktree's git dir, says its files were
// checked out completely. An index alone does not: a checkout cut short
// by a crash leaves one behind.
const populatedMarker = "swarm-populated"

// populate checks out a registered worktree's files, then writes the
// marker:
//   - fresh: the directory holds only its .git file, so one reset fills it;
//   - redo: the first checkout was cut short (journaled, or no index): no
//     agent has worked there, so it is done again completely, without the
//     old index, whose stat data could hide a file left truncated;
//   - partial: a worktree made before the journal, with an index, whose
//     marker is missing. An agent may have worked there, so it never
//     overwrites a file: it checks out only the tracked files that are
//     missing.
func (m *Manager) populate(ctx context.Context, path string, state checkout) error {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return fmt.Errorf("%s is not a linked worktree (no .git file)", path)
	}
	switch state {
	case redo:
		if _, _, err := removeAgentLock(path, false); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(gitdir, "index")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		fallthrough
	case fresh:
		// Without an index, reset --hard writes every tracked file,
		// overwriting what an interrupted checkout left.
		if _, err := m.run(ctx, path, "reset", "-q", "--hard", "HEAD"); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(gitdir, populatedMarker), nil, 0o644)
	}
	if _, err := os.Stat(filepath.Join(gitdir, "index")); errors.Is(err, os.ErrNotExist) {
		if _, err := m.run(ctx, path, "read-tree", "HEAD"); err != nil {
			return err
		}
	}
	out, err := m.run(ctx, path, "ls-files", "-z")
	if err != nil {
		return err
	}
	var missing []string
	for _, f := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(path, f)); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		if _, err := m.runStdin(ctx, path, strings.Join(missing, "\x00")+"\x00", "checkout-index", "--index", "-z", "--stdin"); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(gitdir, populatedMarker), nil, 0o644)
}

// populated reports whether the worktree at path was checked out
// completely. A worktree swarm cannot read counts as populated, so it is
// left alone.
func populated(path string) bool {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return true
	}
	_, err := os.Stat(filepath.Join(gitdir, populatedMarker))
	return err == nil
}

// RemoveStaleLock removes the index.lock that a git process killed in the
// middle of a write (a crashed session's git commit, an interrupted
// checkout) left in agent's worktree, in .git/worktrees/<agent>; while it
// is there every later commit fails. Where /proc can be read it removes the
// lock only when no live process has it open and no git process runs in
// the worktree (lockcheck.go), and otherwise returns an error wrapping
// ErrLockHeld that names the process. Without /proc it cannot check, so
// call it only when nothing of the agent can be running: after recovery
// killed the crashed sessions' process groups. It reports whether there
// was one and it is gone.
func (m *Manager) RemoveStaleLock(agent string) (bool, error) {
	if err := checkAgent(agent); err != nil {
		return false, err
	}
	_, removed, err := removeAgentLock(m.Path(agent), true)
	if err != nil {
		return false, fmt.Errorf("remove the stale index.lock of %s: %w", agent, err)
	}
	return removed, nil
}

// linkedGitDir reads the git dir of the linked worktree at path from its
// .git file.
func linkedGitDir(path string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(path, ".git"))
	if err != nil {
		return "", false
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", false
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(path, gitdir)
	}
	return gitdir, true
}

func (m *Manager) wrongBranch(agent, path, head string) error {
	if err := midRebaseError(agent, path); err != nil {
		return err // a rebase detaches HEAD; "git switch" is the wrong advice
	}
	where := "a detached HEAD"
	if head != "" {
		where = "branch " + head
	}
	return fmt.Errorf("%w: %s's worktree %s is on %s, not %s; save what is there, then run 'git -C %q switch %s'", ErrWrongBranch, agent, path, where, Branch(agent), path, Branch(agent))
}

// moveAside moves the directory at path, which is in the way of agent's
// worktree, to the orphans directory; an empty directory is simply
// removed, as there is nothing to keep. Anything that is not a directory
// (a file, a symlink) is refused and left where it is: it is not a
// worktree's remains, so it is someone's, and moving a file the operator
// put there would lose it as surely as deleting it.
func (m *Manager) moveAside(ctx context.Context, agent, path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is %s, not a directory, and it is where %s's worktree goes; swarm does not delete it. Move it away (mv %q %q) and run again",
			ErrInTheWay, path, fileKind(fi), agent, path, path+".old")
	}
	if err := os.Remove(path); err == nil {
		return "", nil // it was empty
	}
	if err := os.MkdirAll(m.orphans, 0o755); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	if err := m.exclude(ctx, m.orphans); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	stamp := m.now().UTC().Format("20060102-150405")
	dst := filepath.Join(m.orphans, agent+"-"+stamp)
	for i := 2; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		dst = filepath.Join(m.orphans, fmt.Sprintf("%s-%s-%d", agent, stamp, i))
	}
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("move %s aside to %s: %w; move it away yourself and try again", path, dst, err)
	}
	slog.Warn("moved a directory that git does not know as a worktree aside", "agent", agent, "from", path, "to", dst)
	return dst, nil
}

// fileKind names what fi is, for messages.
func fileKind(fi os.FileInfo) string {
	switch t := fi.Mode().Type(); {
	case t == 0:
		return "a regular file"
	case t&os.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "a special file (" + t.String() + ")"
	}
}

// exclude makes sure git ignores dir when it lies inside the main worktree:
// a nested worktree would otherwise show as untracked, and a `git add -A`
// there would add it as an embedded repository.
func (m *Manager) exclude(ctx context.Context, dir string) error {
	if m.excluded[dir] {
		return nil // checked under the lock already: spare two git runs
	}
	if err := m.excludeOnce(ctx, dir); err != nil {
		return err
	}
	if m.excluded == nil {
		m.excluded = map[string]bool{}
	}
	m.excluded[dir] = true
	return nil
}

func (m *Manager) excludeOnce(ctx context.Context, dir string) error {
	top, err := m.run(ctx, m.root, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(canon(top), canon(dir))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil
	}
	rel = filepath.ToSlash(rel)
	ignored, err := m.ok(ctx, top, "check-ignore", "-q", rel+"/")
	if err != nil || ignored {
		return err
	}
	common, err := m.run(ctx, top, "rev-parse", "--git-common-dir")
	if err != nil {
		return err
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(top, common)
	}
	return AddExclude(filepath.Join(common, "info", "exclude"), "/"+rel+"/", "swarm: agents' worktrees")
}

// AddExclude appends pattern, under a comment line, to the git exclude
// file at path, unless the pattern (with or without its slashes) is
// already there. swarm init and the worktree manager share it.
func AddExclude(path, pattern, comment string) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, l := range strings.Split(string(data), "\n") {
		switch strings.TrimSpace(l) {
		case pattern, strings.TrimPrefix(pattern, "/"), strings.TrimSuffix(pattern, "/"), strings.Trim(pattern, "/"):
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	prefix := ""
	if len(data) > 0 && data[len(data)-1] != '\n' {
		prefix = "\n"
	}
	if _, err := fmt.Fprintf(f, "%s# %s\n%s\n", prefix, comment, pattern); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// worktreeDir returns agent's worktree path after making sure it is a
// worktree: without its .git file, git run there would find the enclosing
// main worktree instead, and commit there.
func (m *Manager) worktreeDir(agent string) (string, error) {
	if err := checkAgent(agent); err != nil {
		return "", err
	}
	path := m.Path(agent)
	if _, err := os.Lstat(filepath.Join(path, ".git")); err != nil {
		return "", fmt.Errorf("%w: %s has no worktree at %s", ErrNoWorktree, agent, path)
	}
	return path, nil
}

// Lock locks agent's worktree with reason, so `git worktree prune` and
// `remove` leave it alone while the swarm runs. A previous lock is
// replaced, so the reason is current.
//
// It asks git directly rather than listing the worktrees first: every
// session start locks, and a list per agent, under the manager's lock,
// was most of a 50-agent restart.
func (m *Manager) Lock(ctx context.Context, agent, reason string) error {
	if err := checkAgent(agent); err != nil {
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	path := m.Path(agent)
	if done, err := m.lockOwn(ctx, agent, reason); done || err != nil {
		if err != nil {
			return fmt.Errorf("lock worktree %s: %w", agent, err)
		}
		return nil
	}
	lock := func() error {
		_, err := m.run(ctx, m.root, "worktree", "lock", "--reason", reason, path)
		return err
	}
	if lock() == nil {
		return nil
	}
	// Refused: find out why from the list (git's words depend on its
	// locale), replace an old lock, or say there is no worktree.
	info, err := m.inspect(ctx, agent)
	switch {
	case err != nil:
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	case !info.Registered:
		return fmt.Errorf("lock worktree %s: %w at %s", agent, ErrNoWorktree, info.Path)
	case info.Locked:
		if _, err := m.run(ctx, m.root, "worktree", "unlock", path); err != nil {
			return fmt.Errorf("lock worktree %s: %w", agent, err)
		}
	}
	if err := lock(); err != nil {
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	}
	return nil
}

// Unlock unlocks agent's worktree. An unlocked or missing worktree is not
// an error.
func (m *Manager) Unlock(ctx context.Context, agent string) error {
	if err := checkAgent(agent); err != nil {
		return fmt.Errorf("unlock worktree %s: %w", agent, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if done, err := m.unlockOwn(ctx, agent); done || err != nil {
		if err != nil {
			return fmt.Errorf("unlock worktree %s: %w", agent, err)
		}
		return nil
	}
	// As Lock: git first, the list only to explain a refusal.
	if _, err := m.run(ctx, m.root, "worktree", "unlock", m.Path(agent)); err == nil {
		return nil
	}
	info, err := m.inspect(ctx, agent)
	if err != nil {
		return fmt.Errorf("unlock worktree %s: %w", agent, err)
	}
	return m.unlock(ctx, info)
}

func (m *Manager) unlock(ctx context.Context, info Info) error {
	if !info.Registered || !info.Locked {
		return nil
	}
	if _, err := m.run(ctx, m.root, "worktree", "unlock", info.Path); err != nil {
		return fmt.Errorf("unlock worktree %s: %w", info.Agent, err)
	}
	return nil
}

// Dirty reports whether agent's worktree has uncommitted changes, untracked
// files included.
func (m *Manager) Dirty(ctx context.Context, agent string) (bool, error) {
	path, err := m.worktreeDir(agent)
	if err != nil {
		return false, err
	}
	return m.dirty(ctx, path)
}

func (m *Manager) dirty(ctx context.Context, path string) (bool, error) {
	// No optional locks: an agent may be running git in there right now.
	res, err := m.runEnv(ctx, path, []string{"GIT_OPTIONAL_LOCKS=0"}, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return false, fmt.Errorf("status of %s: %w", path, err)
	}
	return len(strings.TrimSpace(string(res.Stdout))) > 0, nil
}

// AutoCommit commits everything in agent's worktree, untracked files
// included (ignored files are not), on swarm/<agent>, authored and committed
// as swarm/<agent> with the user's address or FallbackEmail. It reports
// whether it made a commit: a clean worktree is left alone. It first
// finishes what an interrupted run left half done in the worktree. It
// refuses, leaving the work where it is, a worktree that is not on
// swarm/<agent> (so work never lands on another branch), and work that
// looks like damage (ErrUnsafeAutoCommit): a nested repository, deletions
// of more than MaxAutoDeletePercent of the branch's files, any deletion in
// a worktree that was never completely checked out, any change in one
// being removed or whose branch an interrupted run already merged.
func (m *Manager) AutoCommit(ctx context.Context, agent, msg string) (bool, error) {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	if err != nil {
		return false, fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	var rec recoveries
	if _, err := m.recoverAgent(ctx, &info, recoverAll, &rec); err != nil {
		return false, fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	hash, err := m.autoCommit(ctx, agent, msg)
	return hash != "", err
}

// autoCommit returns the new commit, or "" when there was nothing to commit.
// The caller holds m.mu and has run recoverAgent.
func (m *Manager) autoCommit(ctx context.Context, agent, msg string) (string, error) {
	path, err := m.worktreeDir(agent)
	if err != nil {
		return "", err
	}
	h, err := readHead(path)
	if err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	if h.Ref != branchRef(agent) {
		return "", m.wrongBranch(agent, path, strings.TrimPrefix(h.Ref, "refs/heads/"))
	}
	chs, err := m.status(ctx, path, "all", false)
	if err != nil || len(chs) == 0 {
		return "", err
	}
	j, have, err := m.readJournal(agent)
	if err != nil {
		return "", err
	}
	if have {
		switch {
		case j.Merged:
			return "", fmt.Errorf("%w: an interrupted run already merged %s into %s, so the changes now in its worktree %s (%s) are not work to merge again; swarm committed nothing and left them there. Look with 'git -C %q status'; commit what you want to keep yourself, put the rest back (git -C %q restore .), then run again",
				ErrUnsafeAutoCommit, Branch(agent), j.Base, path, listSome(changeList(chs), 10), path, path)
		case j.State == stateRemoving:
			return "", fmt.Errorf("%w: %s's worktree %s was being removed by an interrupted run, so its changes (%s) are not work; swarm committed nothing. Look with 'git -C %q status', then run again",
				ErrUnsafeAutoCommit, agent, path, listSome(changeList(chs), 10), path)
		}
	}
	complete := populated(path) && !(have && j.State == statePopulating)
	if err := m.checkSave(ctx, agent, path, chs, complete); err != nil {
		return "", err
	}
	if _, err := m.run(ctx, path, "add", "-A"); err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	clean, err := m.ok(ctx, path, "diff", "--cached", "--quiet")
	if err != nil || clean {
		return "", err
	}
	// --no-verify: this is a safety snapshot of the agent's work; a failing
	// project hook must not be the reason work is lost at shutdown.
	env := m.identity(ctx, path, Branch(agent), Branch(agent))
	if _, err := m.runEnv(ctx, path, env, "commit", "--no-verify", "-q", "-m", msg); err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	hash, err := m.run(ctx, path, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("auto-commit %s: %w", agent, err)
	}
	return hash, nil
}

func changeList(chs []change) []string {
	out := make([]string, len(chs))
	for i, c := range chs {
		out[i] = c.String()
	}
	return out
}

// Remove removes agent's worktree and keeps its branch, so nothing
// committed is lost and a later Ensure checks the branch out again. It
// refuses a worktree with uncommitted changes (AutoCommit first), and one
// holding files git ignores unless Options.DeleteIgnored is set. A missing
// worktree is not an error. It first finishes what an interrupted run left
// half done (logged).
func (m *Manager) Remove(ctx context.Context, agent string) error {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", agent, err)
	}
	var rec recoveries
	r, err := m.recoverAgent(ctx, &info, recoverAll, &rec)
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", agent, err)
	}
	if info.Valid() {
		dirty, err := m.dirty(ctx, info.Path)
		if err != nil {
			return err
		}
		if dirty {
			return fmt.Errorf("%w: %s's worktree %s; commit them first (swarm down auto-commits them)", ErrDirty, agent, info.Path)
		}
	}
	if _, err := m.checkIgnored(ctx, info, "removed"); err != nil {
		return err
	}
	j := journal{Agent: agent, Op: opRemove}
	if r.have {
		j = r.j
	}
	if err := m.removeJournaled(ctx, info, j, false); err != nil {
		return err
	}
	if j.Merged {
		// Keep the record that the branch is merged, for the swarm down
		// that deletes it.
		_, err = m.setState(ctx, j, stateRemoved)
		return err
	}
	return m.clearJournal(agent)
}

// removeJournaled removes the worktree (removeWorktree) between the
// journal states removing and removed.
func (m *Manager) removeJournaled(ctx context.Context, info Info, j journal, force bool) error {
	if !info.Registered {
		return nil
	}
	j, err := m.setState(ctx, j, stateRemoving)
	if err != nil {
		return err
	}
	if err := m.removeWorktree(ctx, info, force); err != nil {
		return err
	}
	_, err = m.setState(ctx, j, stateRemoved)
	return err
}

// removeWorktree unregisters and deletes agent's worktree; force discards
// uncommitted changes. A worktree whose .git is gone is pruned, and what is
// left of it moved aside to the orphans directory.
func (m *Manager) removeWorktree(ctx context.Context, info Info, force bool) error {
	if !info.Registered {
		// Not a worktree: whatever is there is left to Ensure, which moves
		// a directory aside and refuses anything else.
		return nil
	}
	if err := m.unlock(ctx, info); err != nil {
		return err
	}
	if !info.Valid() {
		if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
			return fmt.Errorf("remove worktree %s: %w", info.Agent, err)
		}
		if info.Exists {
			if _, err := m.moveAside(ctx, info.Agent, info.Path); err != nil {
				return fmt.Errorf("remove worktree %s: %w", info.Agent, err)
			}
		}
		return nil
	}
	args := []string{"worktree", "remove", info.Path}
	if force {
		args = []string{"worktree", "remove", "--force", info.Path}
	}
	if _, err := m.run(ctx, m.root, args...); err != nil {
		return fmt.Errorf("remove worktree %s: %w", info.Agent, err)
	}
	return nil
}
