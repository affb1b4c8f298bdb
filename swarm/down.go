package swarm

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/worktree"
)

// DownMode is what `swarm down` does with the agents' work.
type DownMode string

// The modes of `swarm down`.
const (
	DownKeep    DownMode = "keep"
	DownMerge   DownMode = "merge"
	DownSquash  DownMode = "squash"
	DownDiscard DownMode = "discard"
)

// DownRequest is one `swarm down`.
type DownRequest struct {
	Config *config.Config
	Layout repo.Layout
	Store  mailbox.Store
	Mode   DownMode
	// Confirm is asked before a discard stops or deletes anything, with
	// what would be lost; nil means yes.
	Confirm func(ctx context.Context, plan []DiscardPlan) (bool, error)
	// Env is the environment of the git commands; nil means the process's.
	Env []string
}

// DiscardPlan is what a discard would drop for one agent.
type DiscardPlan struct {
	Agent, Branch string
	Commits       []string // unmerged commits, one line each
	Dirty         bool     // uncommitted changes in its worktree
}

// DownAgent is one agent's line of the report.
type DownAgent struct {
	Agent  string `json:"agent"`
	Branch string `json:"branch"`
	// Worktree is the agent's worktree; empty when only its branch exists.
	Worktree string `json:"worktree"`
	// Status is kept, merged, squashed, discarded, conflict or error.
	Status string `json:"status"`
	// AutoCommit saved uncommitted work first; empty if there was none.
	AutoCommit string `json:"auto_commit"`
	// Commits were on the branch and not on the base branch, before.
	Commits []string `json:"commits"`
	// Commit is the merge or squash commit on the base branch.
	Commit        string   `json:"commit"`
	Removed       bool     `json:"removed"`
	ConflictFiles []string `json:"conflict_files"`
	Error         string   `json:"error"`
}

// DownResult is the whole report.
type DownResult struct {
	Mode              DownMode    `json:"mode"`
	BaseBranch        string      `json:"base_branch"`
	SupervisorStopped bool        `json:"supervisor_stopped"`
	Agents            []DownAgent `json:"agents"`
}

// ErrNotConfirmed means the operator answered no: nothing was stopped or
// changed.
var ErrNotConfirmed = errors.New("nothing discarded")

// Down stops the running supervisor, then keeps, merges, squashes or
// discards each agent's work, in swarm.toml order. Checks that only read
// come first, so a refused merge or an unconfirmed discard leaves a
// running swarm as it was. A failure of one agent (a conflict, say) is in
// its line of the result; the others carry on.
func Down(ctx context.Context, req DownRequest) (DownResult, error) {
	cfg, l := req.Config, req.Layout
	res := DownResult{Mode: req.Mode, Agents: []DownAgent{}}
	m, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Meta: req.Store, Env: req.Env, Pass: cfg.Env.Pass})
	if err != nil {
		return res, err
	}
	agents, err := downAgents(ctx, m, cfg)
	if err != nil {
		return res, err
	}
	if len(agents) > 0 && (req.Mode == DownMerge || req.Mode == DownSquash) {
		if err := m.CheckBase(ctx); err != nil {
			return res, fmt.Errorf("cannot %s: %w, then run 'swarm down --%s' again", req.Mode, err, req.Mode)
		}
	}
	// A discard asks before it stops anything: answering no leaves the
	// swarm running as it was.
	confirmed := map[string]bool{}
	if req.Mode == DownDiscard && len(agents) > 0 {
		plan, err := discardPlan(ctx, m, agents)
		if err != nil {
			return res, err
		}
		if req.Confirm != nil {
			ok, err := req.Confirm(ctx, plan)
			if err != nil {
				return res, err
			}
			if !ok {
				return res, ErrNotConfirmed
			}
		}
		for _, p := range plan {
			confirmed[p.Agent] = true
		}
	}
	if res.SupervisorStopped, err = StopSupervisor(ctx, l, downWait(cfg)); err != nil {
		return res, err
	}
	if res.SupervisorStopped {
		// It may have made worktrees while it ran.
		if agents, err = downAgents(ctx, m, cfg); err != nil {
			return res, err
		}
	}
	if len(agents) > 0 {
		// Recorded when the worktrees were made; only informative for keep.
		base, err := m.BaseBranch(ctx)
		if err != nil && req.Mode != DownKeep {
			return res, err
		}
		res.BaseBranch = base
	}
	for _, info := range agents {
		mode := req.Mode
		if mode == DownDiscard && !confirmed[info.Agent] {
			mode = DownKeep // appeared after the question: never dropped unasked
		}
		res.Agents = append(res.Agents, downOne(ctx, m, mode, info))
	}
	return res, nil
}

// Failed lists the agents whose work was not dealt with, each with why.
func (r DownResult) Failed() []string {
	var out []string
	for _, a := range r.Agents {
		switch a.Status {
		case "conflict":
			out = append(out, fmt.Sprintf("%s (conflict in %s)", a.Agent, joinComma(a.ConflictFiles)))
		case "error":
			out = append(out, fmt.Sprintf("%s (%s)", a.Agent, a.Error))
		}
	}
	return out
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// downAgents returns, in config order, the agents with something to deal
// with: a worktree or a branch.
func downAgents(ctx context.Context, m *worktree.Manager, cfg *config.Config) ([]worktree.Info, error) {
	var agents []worktree.Info
	for _, name := range cfg.AgentNames() {
		info, err := m.Inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		if info.Registered || info.HasBranch {
			agents = append(agents, info)
		}
	}
	return agents, nil
}

func discardPlan(ctx context.Context, m *worktree.Manager, agents []worktree.Info) ([]DiscardPlan, error) {
	var plan []DiscardPlan
	for _, info := range agents {
		commits, err := m.UnmergedCommits(ctx, info.Agent)
		if err != nil {
			return nil, err
		}
		p := DiscardPlan{Agent: info.Agent, Branch: info.Branch, Commits: commits}
		if info.Valid() {
			if p.Dirty, err = m.Dirty(ctx, info.Agent); err != nil {
				return nil, err
			}
		}
		plan = append(plan, p)
	}
	return plan, nil
}

// downWait is how long to wait for the supervisor: the longest
// interrupt_grace of any agent, plus 5 s to wind down.
func downWait(cfg *config.Config) time.Duration {
	grace := cfg.Defaults.InterruptGrace
	for _, a := range cfg.Agents {
		grace = max(grace, a.InterruptGrace)
	}
	return grace + 5*time.Second
}

func downOne(ctx context.Context, m *worktree.Manager, mode DownMode, info worktree.Info) DownAgent {
	a := DownAgent{Agent: info.Agent, Branch: info.Branch, Worktree: info.Path, Commits: []string{}, ConflictFiles: []string{}}
	var (
		r   worktree.Result
		err error
	)
	switch mode {
	case DownKeep:
		r, err = m.Keep(ctx, info.Agent)
		a.Status = "kept"
	case DownMerge:
		r, err = m.Merge(ctx, info.Agent)
		a.Status = "merged"
	case DownSquash:
		r, err = m.Squash(ctx, info.Agent)
		a.Status = "squashed"
	case DownDiscard:
		r, err = m.Discard(ctx, info.Agent)
		a.Status = "discarded"
	}
	a.AutoCommit, a.Commit, a.Removed = r.AutoCommit, r.Commit, r.Removed
	if mode == DownKeep && !info.Valid() {
		a.Worktree = "" // only the branch is left to keep
	}
	if r.Commits != nil {
		a.Commits = r.Commits
	}
	var ce *worktree.ConflictError
	switch {
	case errors.As(err, &ce):
		a.Status = "conflict"
		a.ConflictFiles = ce.Files
		a.Error = err.Error()
	case err != nil:
		a.Status = "error"
		a.Error = err.Error()
	}
	return a
}

// StopSupervisor asks a running supervisor to stop and waits up to wait for
// it to release the lock. It asks over the control socket; when the socket
// does not answer but the lock is held, it sends SIGTERM to the pid in the
// lock file. It reports whether one was running. No supervisor is not an
// error.
func StopSupervisor(ctx context.Context, l repo.Layout, wait time.Duration) (bool, error) {
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := control.Call(callCtx, l, control.Request{Op: control.OpStop})
	cancel()
	if err != nil {
		pid, held := LockHolder(l.Lock())
		if !held {
			return false, nil
		}
		if pid <= 0 {
			return true, fmt.Errorf("a supervisor holds %s but does not answer, and its pid is unknown; stop it with Ctrl-C in its terminal", l.Lock())
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return true, fmt.Errorf("stop the supervisor (pid %d): %w", pid, err)
		}
	}
	deadline := time.Now().Add(wait)
	for {
		if _, held := LockHolder(l.Lock()); !held {
			return true, nil
		}
		if time.Now().After(deadline) {
			return true, fmt.Errorf("the supervisor did not stop within %s; stop it with Ctrl-C in its terminal", wait)
		}
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
