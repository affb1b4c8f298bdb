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
	"os"
	"path/filepath"
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

// gitVersion runs `git version` and reads it: its major and minor
// numbers, and the line itself for messages.
func (m *Manager) gitVersion(ctx context.Context) (major, minor int, out string, err error) {
	if out, err = m.run(ctx, m.root, "version"); err != nil {
		return 0, 0, "", err
	}
	major, minor, err = ParseGitVersion(out)
	return major, minor, out, err
}

// Preflight checks, before anything is created, that swarm can work in the
// repository: git is on PATH and at least 2.20, Root is a git repository
// with a working tree, HEAD is on a branch, and there is a first commit.
// Each failure wraps one of the Err* values and says what to do.
func (m *Manager) Preflight(ctx context.Context) error {
	if fi, err := os.Stat(m.root); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrNotRepo, m.root)
	}
	major, minor, _, err := m.gitVersion(ctx)
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
