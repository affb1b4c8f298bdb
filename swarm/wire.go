package swarm

import (
	"context"
	"errors"
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

// GitWorktrees adapts worktree.Manager.
type GitWorktrees struct{ M *worktree.Manager }

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

func (w GitWorktrees) Guard(ctx context.Context, agent string) (Guard, error) {
	g, err := w.M.Guard(ctx, agent)
	if err != nil {
		return nil, err
	}
	return guard{g}, nil
}

type guard struct{ g *worktree.SessionGuard }

func (g guard) Check(ctx context.Context) error { return g.g.Err(ctx) }

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
