package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/engine/gemini"
	"github.com/swarmhq/swarm/engine/script"
	"github.com/swarmhq/swarm/worktree"
)

// This file adapts the real packages to the supervisor's interfaces.

// GitWorktrees adapts worktree.Manager. With Meta, each agent's guard
// baseline (the snapshot its last session's check took) is kept under
// MetaGuardBaseline+agent, so that a change made while swarm was down is
// found at the agent's first session after the restart.
type GitWorktrees struct {
	M    *worktree.Manager
	Meta worktree.MetaStore
}

// MetaGuardBaseline prefixes the meta key of an agent's guard baseline
// (JSON of a worktree.Snapshot).
const MetaGuardBaseline = "guard_baseline:"

func (w GitWorktrees) Preflight(ctx context.Context) error {
	if err := w.M.Preflight(ctx); err != nil {
		return err
	}
	// Record the base branch before the first worktree is made from it.
	_, err := w.M.BaseBranch(ctx)
	return err
}

func (w GitWorktrees) Ensure(ctx context.Context, agent string) (string, string, error) {
	wt, err := w.M.Ensure(ctx, agent)
	if err != nil {
		return "", "", err
	}
	if wt.MovedAside != "" {
		slog.Warn("moved an unregistered directory out of an agent's way", "agent", agent, "to", wt.MovedAside)
	}
	return wt.Path, wt.Branch, nil
}

func (w GitWorktrees) Lock(ctx context.Context, agent, reason string) error {
	return w.M.Lock(ctx, agent, reason)
}

func (w GitWorktrees) Unlock(ctx context.Context, agent string) error { return w.M.Unlock(ctx, agent) }

func (w GitWorktrees) RemoveStaleLock(agent string) (bool, error) { return w.M.RemoveStaleLock(agent) }

// Push publishes the agent's branch to remote.
func (w GitWorktrees) Push(ctx context.Context, remote, agent string) error {
	return w.M.Push(ctx, remote, agent)
}

func (w GitWorktrees) Guard(ctx context.Context, agent string) (Guard, error) {
	if w.Meta != nil && w.M.Baseline(agent) == nil {
		// The first session of the agent in this process compares from
		// where the last process left it.
		if b, err := loadBaseline(ctx, w.Meta, agent); err != nil {
			slog.Warn("read the guard baseline; the first session compares from its own start", "agent", agent, "err", err)
		} else if b != nil {
			w.M.SetBaseline(agent, b)
		}
	}
	g, err := w.M.Guard(ctx, agent)
	if err != nil {
		return nil, err
	}
	return guard{g: g, w: w, agent: agent}, nil
}

// CommitExists reports whether the repository has the commit.
func (w GitWorktrees) CommitExists(ctx context.Context, hash string) (bool, error) {
	return w.M.CommitExists(ctx, hash)
}

// commitChecker is how the supervisor checks a task_result's commit_hash:
// through its worktrees when they can, else with git at the repo root.
func commitChecker(opts Options) func(context.Context, string) (bool, error) {
	if c, ok := opts.Worktrees.(interface {
		CommitExists(ctx context.Context, hash string) (bool, error)
	}); ok {
		return c.CommitExists
	}
	return func(ctx context.Context, hash string) (bool, error) {
		m, err := worktree.New(ctx, worktree.Options{Root: opts.Layout.Root})
		if err != nil {
			return false, err
		}
		return m.CommitExists(ctx, hash)
	}
}

type guard struct {
	g     *worktree.SessionGuard
	w     GitWorktrees
	agent string
}

func (g guard) Prior() []Finding { return findings(g.g.Prior()) }

// Committed lists the files the session's own commits changed.
func (g guard) Committed(ctx context.Context) ([]string, error) { return g.g.Committed(ctx) }

func (g guard) Check(ctx context.Context) ([]Finding, error) {
	found, err := g.g.Check(ctx)
	if err == nil && g.w.Meta != nil {
		if serr := storeBaseline(ctx, g.w.Meta, g.agent, g.w.M.Baseline(g.agent)); serr != nil {
			slog.Warn("store the guard baseline; a change made while swarm is down may go unnoticed", "agent", g.agent, "err", serr)
		}
	}
	return findings(found), err
}

func findings(fs []worktree.Finding) []Finding {
	out := make([]Finding, len(fs))
	for i, f := range fs {
		out[i] = f
	}
	return out
}

func loadBaseline(ctx context.Context, meta worktree.MetaStore, agent string) (*worktree.Snapshot, error) {
	v, ok, err := meta.Meta(ctx, MetaGuardBaseline+agent)
	if err != nil || !ok || v == "" {
		return nil, err
	}
	var s worktree.Snapshot
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("meta %s: %w", MetaGuardBaseline+agent, err)
	}
	return &s, nil
}

func storeBaseline(ctx context.Context, meta worktree.MetaStore, agent string, s *worktree.Snapshot) error {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return meta.SetMeta(ctx, MetaGuardBaseline+agent, string(b))
}

// BeadsTasks is the shared bd adapter: one `bd ready` for every agent that
// asks at the same moment, and a per-agent client for the tools.
type BeadsTasks struct {
	Shared  *beads.Shared
	Timeout time.Duration
	Epics   bool
}

// NewBeadsTasks returns the adapter, or nil when bd is not installed.
func NewBeadsTasks(root string, timeout time.Duration) *BeadsTasks {
	c := &beads.Client{Dir: root, Timeout: timeout}
	if !c.Installed() {
		return nil
	}
	return &BeadsTasks{Shared: beads.NewShared(c), Timeout: timeout}
}

// Close ends a shared bd call still in flight and waits for it.
func (b *BeadsTasks) Close() { b.Shared.Close() }

func (b *BeadsTasks) Ready(ctx context.Context) ([]beads.Issue, error) { return b.Shared.Ready(ctx) }

// List is `bd list --json`, for the strategies that plan from the graph.
func (b *BeadsTasks) List(ctx context.Context) ([]beads.Issue, error) { return b.Shared.List(ctx) }

func (b *BeadsTasks) ReadyIDs(ctx context.Context) ([]string, bool) {
	issues, err := b.Shared.Ready(ctx)
	if err != nil {
		if !errors.Is(err, beads.ErrNotInstalled) {
			slog.Debug("bd ready failed", "err", err)
		}
		return nil, false
	}
	var ids []string
	for _, is := range issues {
		if !is.IsEpic() {
			ids = append(ids, is.ID)
		}
	}
	return ids, true
}

func (b *BeadsTasks) Board(agent, worktree string) engine.TaskBoard {
	return &beads.Client{Dir: worktree, Actor: agent, Timeout: b.Timeout}
}

// EngineFactory builds the engines of cfg, one per engine name, shared by
// the agents that use it. override is `swarm up --engine`.
func EngineFactory(cfg *config.Config, override string) Engines {
	var mu sync.Mutex
	made := map[string]engine.Engine{}
	return func(a config.Agent) (engine.Engine, error) {
		e, err := cfg.EngineFor(a, override)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if eng, ok := made[e.Name]; ok {
			return eng, nil
		}
		var eng engine.Engine
		switch e.Kind {
		case config.EngineGemini:
			eng = gemini.NewEngine(e.Name, gemini.FromConfig(e))
		case config.EngineScript:
			paths := map[string]string{}
			for _, ag := range cfg.Agents {
				if ag.Script != "" {
					paths[ag.Name] = ag.Script
				}
			}
			eng = script.New(script.Options{Name: e.Name, Root: cfg.Root, Paths: paths})
		case config.EngineExec:
			x, err := execengine.New(execengine.FromConfig(e))
			if err != nil {
				return nil, err
			}
			eng = x
		default:
			return nil, errors.New("unknown engine kind " + e.Kind)
		}
		made[e.Name] = eng
		return eng, nil
	}
}

// Tip, ReviewDiff, Land, ForgetLanding and Path serve the workflows (WorkflowGit).
func (w GitWorktrees) Tip(ctx context.Context, agent string) (string, error) {
	return w.M.Tip(ctx, agent)
}

// ReviewDiff is git diff <base>...<commit>, whole files while they fit
// in max bytes.
func (w GitWorktrees) ReviewDiff(ctx context.Context, commit string, max int) (worktree.ReviewPatch, error) {
	return w.M.ReviewDiff(ctx, commit, max)
}

// Land lands a commit of swarm/<agent> on the base branch, journaled.
func (w GitWorktrees) Land(ctx context.Context, req worktree.LandRequest) (worktree.Landing, error) {
	return w.M.Land(ctx, req)
}

// ForgetLanding drops a recorded landing's journal entry.
func (w GitWorktrees) ForgetLanding(key string) error { return w.M.ForgetLanding(key) }

// Path is the agent's worktree.
func (w GitWorktrees) Path(agent string) string { return w.M.Path(agent) }

// TestBatch, CleanScratch and BaseBranch serve the merge queue (QueueGit).
func (w GitWorktrees) TestBatch(ctx context.Context, req worktree.BatchRequest) (worktree.BatchResult, error) {
	return w.M.TestBatch(ctx, req)
}

// SyncBase fast-forwards the base branch to the remote's (QueueGit).
func (w GitWorktrees) SyncBase(ctx context.Context, remote string, leaveDirty bool) (worktree.BaseSync, error) {
	return w.M.SyncBase(ctx, remote, leaveDirty)
}

// FetchBase fetches the remote's base branch (QueueGit).
func (w GitWorktrees) FetchBase(ctx context.Context, remote string) (string, error) {
	return w.M.FetchBase(ctx, remote)
}

// CleanScratch removes the merge queue's scratch worktrees a crash left.
func (w GitWorktrees) CleanScratch(ctx context.Context) error { return w.M.CleanScratch(ctx) }

// UnmergedCommits lists swarm/<agent>'s commits the base lacks (LandGit).
func (w GitWorktrees) UnmergedCommits(ctx context.Context, agent string) ([]string, error) {
	return w.M.UnmergedCommits(ctx, agent)
}

// BaseBranch is the branch work lands on.
func (w GitWorktrees) BaseBranch(ctx context.Context) (string, error) { return w.M.BaseBranch(ctx) }

var (
	_ WorkflowGit = GitWorktrees{}
	_ QueueGit    = GitWorktrees{}
)
