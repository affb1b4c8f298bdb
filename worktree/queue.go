package worktree

import (
	"bytes"
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

// The merge queue's test step (DESIGN §14): a batch of candidates is
// merged onto the base branch's tip one after another, in memory (as a
// landing is: `git merge-tree --write-tree`, `git commit-tree`), and
// [merge] ci runs on the result in the queue's own scratch worktree under
// .swarm/merging/, never in the operator's checkout nor an agent's. The
// scratch worktree is removed after each run, and a run finds and removes
// the one a crash left. What TestBatch returns lands with Land
// (LandRequest.Prepared): the base moves only if it is still where the
// batch was tested.

// DefaultCITimeout bounds one [merge] ci run when none is configured.
const DefaultCITimeout = 10 * time.Minute

// BatchCandidate is one candidate of a batch: the commit of the agent's
// branch to land.
type BatchCandidate struct {
	Agent  string
	Commit string
	// Subject is its merge commit's message; empty: "swarm: land
	// swarm/<agent> at <commit>".
	Subject string
}

// BatchRequest is one test of the merge queue.
type BatchRequest struct {
	// Key names the scratch worktree (a landing key: letters, digits,
	// '-', '_', '.').
	Key        string
	Candidates []BatchCandidate
	// CI is a shell command (sh -c) run in the scratch worktree; empty:
	// no CI, the merge alone decides.
	CI        string
	CITimeout time.Duration // 0: DefaultCITimeout
}

// BatchResult is what a test found.
type BatchResult struct {
	Base string
	// Old is the base tip the batch was built on; Commit the result
	// (Old itself when every candidate was on the base already).
	Old    string
	Commit string
	// Conflict is set when candidate Conflict.Index does not merge on the
	// base plus the candidates before it; nothing else was tested.
	Conflict *BatchConflict
	// CIRan says CI ran; CIFailed that it failed, CIReason why (its exit
	// status, a timeout, a command that cannot run) and CITail the last
	// lines of its output.
	CIRan    bool
	CIFailed bool
	CIReason string
	CITail   string
}

// Passed reports whether the batch can land.
func (r BatchResult) Passed() bool { return r.Conflict == nil && !r.CIFailed }

// BatchConflict names the candidate that does not merge and its files.
type BatchConflict struct {
	Index int
	Agent string
	Files []string
}

func (m *Manager) scratchDir() string { return filepath.Join(filepath.Dir(m.journal), "merging") }

// TestBatch builds the base branch's tip plus req.Candidates, in order,
// and runs req.CI on the result. A candidate already on the base adds
// nothing. Conflicts and CI failures are results, not errors: an error
// means the test could not be made (git failed, the key is bad).
func (m *Manager) TestBatch(ctx context.Context, req BatchRequest) (BatchResult, error) {
	var res BatchResult
	if err := landingKey(req.Key); err != nil {
		return res, err
	}
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return res, err
	}
	res.Base = base
	if err := m.mergeTreeSupported(ctx); err != nil {
		return res, err
	}
	dir, err := m.buildBatch(ctx, req, &res)
	if err != nil || res.Conflict != nil || req.CI == "" {
		return res, err
	}
	defer func() {
		if rerr := m.removeScratch(context.WithoutCancel(ctx), dir); rerr != nil && err == nil {
			err = rerr
		}
	}()
	timeout := req.CITimeout
	if timeout <= 0 {
		timeout = DefaultCITimeout
	}
	res.CIRan = true
	// The CI command is the operator's own ([merge] ci in swarm.toml), run
	// like a hook: sh -c in the scratch worktree, its whole group killed at
	// the timeout.
	out, runErr := proc.Run(ctx, proc.Spec{Dir: dir, Env: m.env(), Pass: m.pass, Timeout: timeout, Grace: 2 * time.Second},
		"sh", "-c", req.CI)
	res.CITail = Tail(string(bytes.Join([][]byte{out.Stdout, out.Stderr}, []byte("\n"))), 40, 4<<10)
	if runErr != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("the merge queue's CI run was interrupted: %w", context.Cause(ctx))
		}
		res.CIFailed = true
		var ee *proc.ExitError
		switch {
		case errors.Is(runErr, context.DeadlineExceeded):
			res.CIReason = fmt.Sprintf("[merge] ci (%s) timed out after %s and was killed", req.CI, timeout)
		case errors.As(runErr, &ee) && ee.ExitCode == 126:
			res.CIReason = fmt.Sprintf("[merge] ci (%s) cannot be run (exit status 126: not executable?)", req.CI)
		case errors.As(runErr, &ee) && ee.ExitCode == 127:
			res.CIReason = fmt.Sprintf("[merge] ci (%s) was not found (exit status 127)", req.CI)
		case errors.As(runErr, &ee):
			res.CIReason = fmt.Sprintf("[merge] ci (%s) failed with exit status %d", req.CI, ee.ExitCode)
		default:
			res.CIReason = fmt.Sprintf("[merge] ci (%s) could not run: %v", req.CI, runErr)
		}
	}
	return res, nil
}

// buildBatch merges the candidates onto the base tip in memory and, when
// CI is to run, checks the result out in a fresh scratch worktree, whose
// path it returns.
func (m *Manager) buildBatch(ctx context.Context, req BatchRequest, res *BatchResult) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, err := m.resolveRef(ctx, "refs/heads/"+res.Base)
	if err != nil {
		return "", err
	}
	if old == "" {
		return "", fmt.Errorf("%w: the base branch %s has no commit", ErrBaseMissing, res.Base)
	}
	res.Old, res.Commit = old, old
	env := m.identity(ctx, m.root, "", "")
	for i, c := range req.Candidates {
		if err := checkAgent(c.Agent); err != nil {
			return "", err
		}
		on, err := m.isAncestor(ctx, c.Commit, res.Commit)
		if err != nil {
			return "", err
		}
		if on {
			continue // on the base already
		}
		tree, files, err := m.mergeTree(ctx, res.Commit, c.Commit)
		if err != nil {
			return "", err
		}
		if len(files) > 0 {
			res.Conflict = &BatchConflict{Index: i, Agent: c.Agent, Files: files}
			return "", nil
		}
		subject := c.Subject
		if subject == "" {
			subject = fmt.Sprintf("swarm: land %s at %s", Branch(c.Agent), text.Short(c.Commit, 12))
		}
		next, err := m.runStdin2(ctx, env, subject+"\n", "commit-tree", tree, "-p", res.Commit, "-p", c.Commit)
		if err != nil {
			return "", fmt.Errorf("make the merge commit of %s: %w", text.Short(c.Commit, 12), err)
		}
		res.Commit = next
	}
	if req.CI == "" {
		return "", nil
	}
	parent := m.scratchDir()
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("make the merge queue's scratch directory: %w", err)
	}
	if err := m.exclude(ctx, parent); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, req.Key)
	// What a crash left: a scratch worktree is never anyone's work.
	if err := m.removeScratchLocked(ctx, dir); err != nil {
		return "", err
	}
	if _, err := m.run(ctx, m.root, "worktree", "add", "-q", "--detach", dir, res.Commit); err != nil {
		return "", fmt.Errorf("check the batch out in %s: %w", dir, err)
	}
	return dir, nil
}

// removeScratch removes a scratch worktree and git's record of it.
func (m *Manager) removeScratch(ctx context.Context, dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removeScratchLocked(ctx, dir)
}

func (m *Manager) removeScratchLocked(ctx context.Context, dir string) error {
	if !strings.HasPrefix(dir, m.scratchDir()+string(filepath.Separator)) {
		return fmt.Errorf("refusing to remove %s: not a merge queue scratch worktree", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the merge queue's scratch worktree %s: %w", dir, err)
	}
	if err := m.unlockScratch(ctx, dir); err != nil {
		return err
	}
	if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
		return fmt.Errorf("forget the merge queue's scratch worktree %s: %w", dir, err)
	}
	return nil
}

// unlockScratch unlocks git's record of the scratch worktree dir: `git
// worktree add` locks it until its checkout is done, so one killed half
// way leaves it locked, and `git worktree prune` keeps a locked record (and
// the index.lock in it) for ever.
func (m *Manager) unlockScratch(ctx context.Context, dir string) error {
	common, err := m.gitCommonDir(ctx)
	if err != nil {
		return err
	}
	admins, err := os.ReadDir(filepath.Join(common, "worktrees"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read git's worktree records: %w", err)
	}
	for _, a := range admins {
		admin := filepath.Join(common, "worktrees", a.Name())
		gitdir, err := os.ReadFile(filepath.Join(admin, "gitdir"))
		if err != nil || filepath.Dir(strings.TrimSpace(string(gitdir))) != dir {
			continue
		}
		if err := os.Remove(filepath.Join(admin, "locked")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("unlock the merge queue's scratch worktree %s: %w", dir, err)
		}
	}
	return nil
}

// CleanScratch removes every scratch worktree a crash left (the queue
// calls it when it starts).
func (m *Manager) CleanScratch(ctx context.Context) error {
	entries, err := os.ReadDir(m.scratchDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := m.removeScratch(ctx, filepath.Join(m.scratchDir(), e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Tail is the last n lines of s, at most max bytes.
func Tail(s string, n, max int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s = strings.TrimSpace(strings.Join(lines, "\n"))
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}

// CheckoutBehind reports how many commits the operator's checkout is
// behind the base branch when a landing left it alone (a dirty checkout:
// its HEAD detached at an older tip of the base); 0 when it is on a
// branch or not behind. It only reads.
func (m *Manager) CheckoutBehind(ctx context.Context) (base string, n int, err error) {
	base, err = m.BaseBranch(ctx)
	if err != nil {
		return "", 0, err
	}
	h, err := readHead(m.root)
	if err != nil || !h.Detached() || h.Hash == "" {
		return base, 0, err
	}
	tip, err := m.resolveRef(ctx, "refs/heads/"+base)
	if err != nil || tip == "" || tip == h.Hash {
		return base, 0, err
	}
	if on, err := m.isAncestor(ctx, h.Hash, tip); err != nil || !on {
		return base, 0, err
	}
	out, err := m.run(ctx, m.root, "rev-list", "--count", h.Hash+".."+tip)
	if err != nil {
		return base, 0, err
	}
	fmt.Sscan(out, &n)
	return base, n, nil
}
