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
//     aside to <Orphans>/<agent>-<UTC time>, never deleted.
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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
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
}

// Manager creates and ends agents' worktrees in one repository. It is safe
// for concurrent use; the operations that write are serialized.
type Manager struct {
	root    string
	dir     string
	orphans string
	meta    MetaStore
	now     func() time.Time
	baseEnv []string

	mu       sync.Mutex      // held by every write to the repository
	excluded map[string]bool // dirs known to be ignored by git (under mu)

	baseMu sync.Mutex
	base   string

	guard guardState // the session guard's bookkeeping (guard.go)
}

// Worktree is one agent's worktree.
type Worktree struct {
	Agent  string
	Path   string // absolute
	Branch string // swarm/<agent>
	// MovedAside is set when Ensure moved a directory that was in the way;
	// it is where that directory went.
	MovedAside string
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
		meta:    opts.Meta,
		now:     opts.Now,
		baseEnv: opts.Env,
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

// Agent names become path and ref components; config allows less than this.
var agentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func checkAgent(agent string) error {
	if !agentRE.MatchString(agent) {
		return fmt.Errorf("%w %q: use letters, digits, '-' and '_'", ErrBadAgent, agent)
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
	info := Info{Worktree: Worktree{Agent: agent, Path: m.Path(agent), Branch: Branch(agent)}}
	entries, err := m.list(ctx)
	if err != nil {
		return info, err
	}
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
	info.HasBranch, err = m.ok(ctx, m.root, "rev-parse", "--verify", "-q", branchRef(agent)+"^{commit}")
	if err != nil {
		return info, err
	}
	return info, nil
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
// registered worktree whose directory is gone (unlock, prune, recreate) and
// moves aside a directory that is in the way but not a worktree.
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
	if err := m.populate(ctx, wt.Path, state == fresh); err != nil {
		return wt, fmt.Errorf("check out worktree %s: %w", agent, err)
	}
	return wt, nil
}

// checkout says what register left for Ensure to do.
type checkout int

const (
	checkedOut checkout = iota // nothing: the worktree is complete
	fresh                      // just made: an empty directory to fill
	partial                    // made, but its checkout never finished
)

// register makes sure git knows agent's worktree, creating it without a
// checkout when needed, and reports what checking out is left to do.
// Registering stays under the lock: concurrent 'git worktree add' runs
// were seen to fail (reading .git/worktrees/<x>/commondir).
func (m *Manager) register(ctx context.Context, agent, base string) (Worktree, checkout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	info, err := m.inspect(ctx, agent)
	if err != nil {
		return Worktree{}, checkedOut, fmt.Errorf("ensure worktree %s: %w", agent, err)
	}
	wt := info.Worktree
	if info.Elsewhere != "" {
		return wt, checkedOut, fmt.Errorf("%w: %s is checked out in %s, not in %s; move that worktree (git worktree move %q %q) or remove it", ErrElsewhere, wt.Branch, info.Elsewhere, wt.Path, info.Elsewhere, wt.Path)
	}
	if info.Valid() {
		if info.Head != wt.Branch {
			return wt, checkedOut, m.wrongBranch(agent, wt.Path, info.Head)
		}
		// A worktree registered but not completely checked out (a crash
		// between the two steps, or during the checkout) is finished now.
		if !populated(wt.Path) {
			return wt, partial, nil
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
			return wt, checkedOut, err
		}
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	if err := m.exclude(ctx, m.dir); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	args := []string{"worktree", "add", "--no-checkout", wt.Path, wt.Branch}
	if !info.HasBranch {
		args = []string{"worktree", "add", "--no-checkout", "-b", wt.Branch, wt.Path, "refs/heads/" + base}
	}
	if _, err := m.run(ctx, m.root, args...); err != nil {
		return wt, checkedOut, fmt.Errorf("create worktree %s: %w", agent, err)
	}
	slog.Debug("created worktree", "agent", agent, "path", wt.Path, "branch", wt.Branch, "new_branch", !info.HasBranch)
	return wt, fresh, nil
}

// populatedMarker, in a linked worktree's git dir, says its files were
// checked out completely. An index alone does not: a checkout cut short
// by a crash leaves one behind.
const populatedMarker = "swarm-populated"

// populate checks out a registered worktree's files, then writes the
// marker. A fresh worktree's directory holds only its .git file, so one
// reset fills it. After a crash it never overwrites a file that is already
// there, so it cannot lose work: it fills the index from HEAD when there
// is none and checks out only the tracked files that are missing.
func (m *Manager) populate(ctx context.Context, path string, isFresh bool) error {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return fmt.Errorf("%s is not a linked worktree (no .git file)", path)
	}
	if isFresh {
		if _, err := m.run(ctx, path, "reset", "-q", "--hard"); err != nil {
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
// middle of a write (a crashed session's git commit) left in agent's
// worktree; while it is there every later commit fails. Call it only when
// nothing of the agent can be running: after recovery killed the crashed
// sessions' process groups. It reports whether there was one.
func (m *Manager) RemoveStaleLock(agent string) (bool, error) {
	if err := checkAgent(agent); err != nil {
		return false, err
	}
	gitdir, ok := linkedGitDir(m.Path(agent))
	if !ok {
		return false, nil
	}
	err := os.Remove(filepath.Join(gitdir, "index.lock"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove the stale index.lock of %s: %w", agent, err)
	}
	return true, nil
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

// moveAside moves path, which is in the way of agent's worktree, to the
// orphans directory. An empty directory is simply removed: there is nothing
// to keep.
func (m *Manager) moveAside(ctx context.Context, agent, path string) (string, error) {
	if err := os.Remove(path); err == nil {
		return "", nil
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
	path := filepath.Join(common, "info", "exclude")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
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
	if _, err := fmt.Fprintf(f, "%s# swarm: agents' worktrees\n/%s/\n", prefix, rel); err != nil {
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
func (m *Manager) Lock(ctx context.Context, agent, reason string) error {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
	if err != nil {
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	}
	if !info.Registered {
		return fmt.Errorf("lock worktree %s: %w at %s", agent, ErrNoWorktree, info.Path)
	}
	if info.Locked {
		if _, err := m.run(ctx, m.root, "worktree", "unlock", info.Path); err != nil {
			return fmt.Errorf("lock worktree %s: %w", agent, err)
		}
	}
	if _, err := m.run(ctx, m.root, "worktree", "lock", "--reason", reason, info.Path); err != nil {
		return fmt.Errorf("lock worktree %s: %w", agent, err)
	}
	return nil
}

// Unlock unlocks agent's worktree. An unlocked or missing worktree is not
// an error.
func (m *Manager) Unlock(ctx context.Context, agent string) error {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
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
// whether it made a commit: a clean worktree is left alone. It refuses a
// worktree that is not on swarm/<agent>, so work never lands on another
// branch.
func (m *Manager) AutoCommit(ctx context.Context, agent, msg string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hash, err := m.autoCommit(ctx, agent, msg)
	return hash != "", err
}

// autoCommit returns the new commit, or "" when there was nothing to commit.
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
	dirty, err := m.dirty(ctx, path)
	if err != nil || !dirty {
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

// Remove removes agent's worktree and keeps its branch, so nothing
// committed is lost and a later Ensure checks the branch out again. It
// refuses a worktree with uncommitted changes (AutoCommit first). A missing
// worktree is not an error.
func (m *Manager) Remove(ctx context.Context, agent string) error {
	info, unlock, err := m.lockAgent(ctx, agent)
	defer unlock()
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
	return m.removeWorktree(ctx, info, false)
}

// removeWorktree unregisters and deletes agent's worktree; force discards
// uncommitted changes.
func (m *Manager) removeWorktree(ctx context.Context, info Info, force bool) error {
	if !info.Registered {
		return nil
	}
	if err := m.unlock(ctx, info); err != nil {
		return err
	}
	if !info.Valid() {
		if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
			return fmt.Errorf("remove worktree %s: %w", info.Agent, err)
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
