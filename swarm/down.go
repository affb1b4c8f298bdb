package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/workflow"
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
	// DeleteIgnored lets merge, squash and discard delete the files git
	// ignores in a worktree (build output, node_modules, .env) with it;
	// without it such a worktree is kept, and listed.
	DeleteIgnored bool
}

// DiscardPlan is what a discard would drop for one agent.
type DiscardPlan struct {
	Agent, Branch string
	Commits       []string // unmerged commits, one line each
	Dirty         bool     // uncommitted changes in its worktree
	// Uncommitted are those changes, "XY path" as in git status --short.
	Uncommitted []string
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
	// Uncommitted are the uncommitted changes a discard dropped ("XY
	// path" as in git status --short).
	Uncommitted []string `json:"uncommitted"`
	// Ignored are the files git ignores in the worktree: deleted with it
	// (DeleteIgnored), or the reason it was kept (status ignored_files).
	Ignored []string `json:"ignored"`
	// Recovered says what was finished or undone first of an interrupted
	// run's work on this agent.
	Recovered []string `json:"recovered"`
	// AlreadyLanded says its commits were on the base fetched from the
	// [worktree] push remote (landed from another host): nothing merged.
	AlreadyLanded bool `json:"already_landed"`
}

// DownResult is the whole report.
type DownResult struct {
	Mode              DownMode `json:"mode"`
	BaseBranch        string   `json:"base_branch"`
	SupervisorStopped bool     `json:"supervisor_stopped"`
	// Killed lists the sessions a crashed supervisor had left running whose
	// processes were killed first: "<agent> session <seq> (<n> process
	// group(s))".
	Killed []string `json:"killed"`
	// Recovered says what was finished or undone of the work an
	// interrupted run (a killed swarm down, say) left half done, before
	// anything else; RecoverError is what could not be, and what to do.
	Recovered    []string    `json:"recovered"`
	RecoverError string      `json:"recover_error,omitempty"`
	Agents       []DownAgent `json:"agents"`
	// HeldElsewhere are the agents another supervisor runs (a swarm on
	// several hosts): their work was left alone, "<agent> (<host>:<pid>)".
	HeldElsewhere []string `json:"held_elsewhere"`
	// Fetched says what a merge or squash brought from [worktree] push
	// first: branches pushed from other hosts.
	Fetched []string `json:"fetched"`
	// Items are the approved dev-review items whose dev's branch a merge
	// or squash took into the base branch, now merged: "<item>
	// (<workflow>)".
	Items []string `json:"items"`
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
	res := DownResult{Mode: req.Mode, Agents: []DownAgent{}, Killed: []string{}, Recovered: []string{}, HeldElsewhere: []string{}, Fetched: []string{}, Items: []string{}}
	m, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Meta: req.Store, Env: req.Env, DeleteIgnored: req.DeleteIgnored, Pass: cfg.Env.Pass})
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
	// Hold the lock while dealing with the work: no swarm up starts
	// sessions in the worktrees meanwhile.
	lock, err := AcquireLock(l.Lock())
	if err != nil {
		return res, fmt.Errorf("%w; a swarm up started while swarm down ran: stop it, then run swarm down again", err)
	}
	defer lock.Release()
	// Down holds the leases of the agents it deals with, as a supervisor
	// would: none of them starts elsewhere meanwhile, and the agents a
	// live supervisor on another host runs are left alone.
	mine, held, release, err := claimForDown(ctx, req.Store, cfg.AgentNames())
	if err != nil {
		return res, err
	}
	defer release()
	for _, h := range held {
		res.HeldElsewhere = append(res.HeldElsewhere, fmt.Sprintf("%s (%s)", h.Agent, h.Holder))
	}
	// A supervisor that crashed (kill -9) left its sessions running: their
	// processes must not go on writing in the worktrees being merged.
	if res.Killed, err = killLeftoverSessions(ctx, req.Store, req.Layout.Root, mine); err != nil {
		return res, err
	}
	// Finish what an interrupted swarm down left half done first; each
	// agent's operation below also recovers its own, and reports it.
	rec, rerr := m.Recover(ctx, mine...)
	for _, r := range rec {
		res.Recovered = append(res.Recovered, r.String())
	}
	if rerr != nil {
		res.RecoverError = rerr.Error()
	}
	// Work pushed from other hosts comes first, so that it is merged too.
	var landedElsewhere map[string]int
	if remote := cfg.Worktree.Push; remote != "" && (req.Mode == DownMerge || req.Mode == DownSquash) {
		fetched, err := m.Fetch(ctx, remote, mine)
		for _, f := range fetched {
			if f.What == "created" || f.What == "fast-forwarded" {
				res.Fetched = append(res.Fetched, f.String())
			}
		}
		if err != nil {
			return res, fmt.Errorf("%w; check the remote %q ('git fetch %s'), or remove [worktree] push to merge only the local branches", err, remote, remote)
		}
		// The base too: what the merge queue landed from another host is
		// on the remote's base, and a branch it holds is not merged twice.
		before := map[string]int{}
		for _, a := range mine {
			if cs, err := m.UnmergedCommits(ctx, a); err == nil {
				before[a] = len(cs)
			}
		}
		s, err := m.SyncBase(ctx, remote, false)
		for _, r := range s.Recovered {
			res.Recovered = append(res.Recovered, r.String())
		}
		switch {
		case errors.Is(err, worktree.ErrBaseAhead):
			// Merged here on top of the local commits, as without a remote.
			res.Fetched = append(res.Fetched, fmt.Sprintf("%s: not fetched from %s: %v", s.Base, remote, err))
		case err != nil:
			return res, fmt.Errorf("fetch the base branch: %w; or remove [worktree] push to merge on the local base only", err)
		case s.Old != s.New:
			res.Fetched = append(res.Fetched, fmt.Sprintf("%s: fast-forwarded to %s's, %s..%s (landed from another host)", s.Base, remote, text.Short(s.Old, 12), text.Short(s.New, 12)))
			landedElsewhere = before
		}
	}
	// The supervisor may have made worktrees while it ran, and recovery
	// may have removed a half-made one.
	if agents, err = downAgents(ctx, m, cfg); err != nil {
		return res, err
	}
	agents = slices.DeleteFunc(agents, func(i worktree.Info) bool { return !slices.Contains(mine, i.Agent) })
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
		a := downOne(ctx, m, mode, info)
		// Its commits came with the base fetched from the remote: landed
		// there (the merge queue on another host), not merged again.
		a.AlreadyLanded = landedElsewhere[a.Agent] > 0 && (a.Status == "merged" || a.Status == "squashed") && a.Commit == ""
		res.Agents = append(res.Agents, a)
	}
	if req.Mode == DownMerge || req.Mode == DownSquash {
		res.Items = mergedItems(ctx, req.Store, cfg, res.Agents)
	}
	return res, nil
}

// mergedItems records as merged the approved dev-review items whose dev's
// branch, which holds the reviewed commit, swarm down just merged or
// squashed into the base branch (DESIGN §9.3); it returns "<item>
// (<workflow>)" for each. A failure to record one is logged: the work is
// on the base branch either way.
func mergedItems(ctx context.Context, st mailbox.Store, cfg *config.Config, agents []DownAgent) []string {
	out := []string{}
	merged := map[string]string{}
	for _, a := range agents {
		if a.Status == "merged" || a.Status == "squashed" {
			merged[a.Agent] = a.Status
		}
	}
	for _, w := range cfg.Workflows {
		how, ok := merged[w.Dev]
		if w.Kind != workflow.DevReview || !ok {
			continue
		}
		items, err := st.Items(ctx, w.Name)
		if err != nil {
			slog.Warn("read work items", "workflow", w.Name, "err", err)
			continue
		}
		for _, it := range items {
			if it.State != workflow.Approved {
				continue
			}
			err := st.InTx(ctx, func(tx mailbox.Tx) error {
				_, err := fsm.ApplyBy(tx, workflow.ReviewTable, fsm.SubjectItem, it.ID, workflow.Approved, workflow.Merge, workflow.Merged,
					fmt.Sprintf("%s with %s by swarm down (reviewed at %s)", how, worktree.Branch(w.Dev), text.Short(it.ReviewCommit, 12)), message.Operator)
				return err
			})
			if err != nil {
				slog.Warn("record the item merged", "item", it.ID, "err", err)
				continue
			}
			out = append(out, fmt.Sprintf("%s (%s)", it.ID, w.Name))
		}
	}
	return out
}

// Failed lists the agents whose work was not dealt with, each with why.
func (r DownResult) Failed() []string {
	var out []string
	for _, a := range r.Agents {
		switch a.Status {
		case "conflict":
			out = append(out, fmt.Sprintf("%s (conflict in %s)", a.Agent, strings.Join(a.ConflictFiles, ", ")))
		case "ignored_files":
			out = append(out, fmt.Sprintf("%s (its worktree holds files git ignores: %s; move what you need, then run again with --delete-ignored)", a.Agent, text.ListSome(a.Ignored, 5)))
		case "error":
			out = append(out, fmt.Sprintf("%s (%s)", a.Agent, a.Error))
		}
	}
	if r.RecoverError != "" {
		out = append(out, fmt.Sprintf("what an interrupted run left (%s)", r.RecoverError))
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
			if p.Uncommitted, err = m.Uncommitted(ctx, info.Agent); err != nil {
				return nil, err
			}
			p.Dirty = len(p.Uncommitted) > 0
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
	a := DownAgent{Agent: info.Agent, Branch: info.Branch, Worktree: info.Path, Commits: []string{}, ConflictFiles: []string{},
		Uncommitted: []string{}, Ignored: []string{}, Recovered: []string{}}
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
	if r.Uncommitted != nil {
		a.Uncommitted = r.Uncommitted
	}
	if r.Ignored != nil {
		a.Ignored = r.Ignored
	}
	for _, rc := range r.Recovered {
		a.Recovered = append(a.Recovered, rc.String())
	}
	var ce *worktree.ConflictError
	switch {
	case errors.As(err, &ce):
		a.Status = "conflict"
		a.ConflictFiles = ce.Files
		a.Error = err.Error()
	case errors.Is(err, worktree.ErrIgnoredFiles):
		a.Status = "ignored_files"
		a.Error = err.Error()
	case err != nil:
		a.Status = "error"
		a.Error = err.Error()
	}
	return a
}

// StopSupervisor asks a running supervisor to stop and waits up to wait for
// it to release the lock and exit. It asks over the control socket; when the socket
// does not answer but the lock is held, it sends SIGTERM to the pid in the
// lock file. It reports whether one was running. No supervisor is not an
// error.
func StopSupervisor(ctx context.Context, l repo.Layout, wait time.Duration) (bool, error) {
	// Its pid, to wait for the process itself: it frees the lock before it
	// exits, and until then it may still hold what it was doing (the
	// journal of a worktree checkout it was cancelled in names it).
	supervisor, _ := LockHolder(l.Lock())
	exited := processExited(supervisor)
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
		if _, held := LockHolder(l.Lock()); !held && exited() {
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

// processExited returns a test of whether process pid, as it is now, has
// ended: gone, a zombie, or its pid reused (told by its start time where
// /proc has it). A pid of 0 or less has nothing to wait for.
func processExited(pid int) func() bool {
	if pid <= 0 {
		return func() bool { return true }
	}
	start, known := proc.StartTime(pid)
	return func() bool {
		if !known {
			return proc.Exited(pid)
		}
		return !proc.Running(pid, start)
	}
}

// killLeftoverSessions kills the process groups of the sessions a crashed
// supervisor left running: those still running in the store while no
// supervisor holds the lock (the caller holds it). A group is killed only
// while one of its processes carries the session's marker, so a reused
// process group id is left alone. The sessions stay as they are in the
// store; the next swarm up records them as crashed.
func killLeftoverSessions(ctx context.Context, st mailbox.Store, root string, agents []string) ([]string, error) {
	killed := []string{}
	for _, agent := range agents {
		sess, err := st.LastSession(ctx, agent, mailbox.SessionRunning)
		if errors.Is(err, mailbox.ErrNoSuchSession) {
			continue
		}
		if err != nil {
			return killed, err
		}
		var sent []int
		for _, pg := range sess.Pgids {
			ok, err := proc.KillSessionGroup(pg, sessionMarker(agent, sess.Seq))
			if err != nil {
				return killed, fmt.Errorf("kill the processes of %s's session %d (process group %d), which a crashed supervisor left running: %w; kill them yourself (kill -9 -%d)", agent, sess.Seq, pg, err, pg)
			}
			if ok {
				sent = append(sent, pg)
			}
		}
		// What left the groups (setsid, a double fork) carries the marker.
		marked := proc.KillMarked(sessionMarker(agent, sess.Seq), rootMarker(root))
		if len(sent) == 0 && len(marked) == 0 {
			continue
		}
		what := fmt.Sprintf("%s session %d (%d process group(s)", agent, sess.Seq, len(sent))
		if len(marked) > 0 {
			what += fmt.Sprintf(", %d process(es) outside them", len(marked))
		}
		killed = append(killed, what+")")
		// A killed git must be gone before its index.lock can be shown
		// stale and removed.
		deadline := time.Now().Add(killWait)
		for _, pg := range sent {
			for proc.GroupAlive(pg) && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return killed, context.Cause(ctx)
				case <-time.After(10 * time.Millisecond): // polling the kernel's reaping, bounded
				}
			}
		}
	}
	return killed, nil
}

// claimForDown takes the leases of every agent no live supervisor holds,
// for this process, and returns those agents, the leases it could not
// take, and how to give the taken ones back.
func claimForDown(ctx context.Context, st mailbox.Store, agents []string) (mine []string, held []mailbox.Lease, release func(), err error) {
	me := ThisHolder()
	claim := func(names []string) (mailbox.Leases, error) {
		return st.ClaimLeases(ctx, mailbox.LeaseClaim{Holder: me, Agents: names, TTL: downLeaseTTL,
			Gone: func(h mailbox.Holder) bool { return h.Host == me.Host && proc.Exited(h.PID) }})
	}
	mine = agents
	l, err := claim(mine)
	var he *mailbox.HeldError
	if errors.As(err, &he) {
		held = he.Held
		mine = slices.DeleteFunc(slices.Clone(agents), func(a string) bool {
			return slices.ContainsFunc(held, func(h mailbox.Lease) bool { return h.Agent == a })
		})
		l, err = claim(mine)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("take the agents' leases: %w", err)
	}
	return mine, held, func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.Release(rctx)
	}, nil
}

// downLeaseTTL is how old a lease's heartbeat may be before swarm down
// takes it for its holder's, where the store cannot tell (SQLite): a
// supervisor renews every few seconds.
const downLeaseTTL = 30 * time.Second
