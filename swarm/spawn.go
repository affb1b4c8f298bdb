package swarm

import (
	"context"
	"errors"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/worktree"
)

// This file is spawning at run time (DESIGN §9.5): `swarm spawn` stores
// the agent (with who spawned it) and its task mail, then asks the running
// supervisor to start it (control.OpSpawn); the supervisor builds its
// runner like a configured agent's, with its own worktree from the base
// branch. The row is the truth: WithSpawned adds the spawned agents to a
// loaded swarm.toml, so every command (status, send, down) and the next
// swarm up (after a crash too) know them. An ephemeral agent retires when
// it goes Idle with no work left; `swarm retire` ends one and deals with
// its work. A retired agent is Stopped with cause "retired"; its worktree
// and branch stay for `swarm down` or `swarm retire` to merge or discard.

// CauseRetired is the cause of a retired agent's last event.
const CauseRetired = "retired"

// errRetired is the cancellation cause of a runner being retired.
var errRetired = errors.New(CauseRetired)

// stopCause is the cause of an agent's stop when its runner's context
// ended: retired, or shutdown.
func stopCause(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), errRetired) {
		return CauseRetired
	}
	return "shutdown"
}

// spawnedAgent builds the settings of a stored spawned agent: swarm.toml's
// for a name it configures, else [defaults] with the row's choices.
func spawnedAgent(cfg *config.Config, sp mailbox.Spawned) (config.Agent, error) {
	info := &config.SpawnInfo{By: sp.SpawnedBy, Task: sp.Task, Ephemeral: sp.Ephemeral, Retired: sp.Retired(), Configured: sp.Configured}
	if a, ok := cfg.Agent(sp.Name); ok && (a.Spawned == nil || a.Spawned.Configured) {
		a.Spawned = info
		return a, nil
	}
	a, err := cfg.NewAgent(sp.Name, sp.Role, sp.Mode, sp.Strategy, sp.Engine)
	if err != nil {
		return a, err
	}
	a.Spawned = info
	return a, nil
}

// WithSpawned adds to cfg (loaded from swarm.toml) the agents `swarm
// spawn` stored, retired ones included (marked so), and marks the
// configured agents that were spawned. An agent swarm.toml no longer lets
// it build (its engine removed, say) is left out and named in the
// returned problems. Calling it again adds nothing twice.
func WithSpawned(ctx context.Context, cfg *config.Config, st mailbox.Store) ([]string, error) {
	rows, err := st.SpawnedAgents(ctx)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, sp := range rows {
		if i := slices.IndexFunc(cfg.Agents, func(a config.Agent) bool { return a.Name == sp.Name }); i >= 0 {
			if cfg.Agents[i].Spawned == nil && sp.Configured {
				cfg.Agents[i].Spawned = &config.SpawnInfo{By: sp.SpawnedBy, Task: sp.Task, Ephemeral: sp.Ephemeral, Retired: sp.Retired(), Configured: true}
			}
			continue
		}
		a, err := spawnedAgent(cfg, sp)
		if err != nil {
			problems = append(problems, fmt.Sprintf("spawned agent %s: %v", sp.Name, err))
			continue
		}
		cfg.Agents = append(cfg.Agents, a)
	}
	return problems, nil
}

// SpawnRequest is `swarm spawn`'s input.
type SpawnRequest struct {
	Name, Role, Mode, Strategy, Engine, Task string
	Ephemeral                                bool
	// Caller spawns (verbs.Spawn checks can_spawn_sessions); the spawned
	// agent records its name (an agent, or operator).
	Caller identity.Caller
	// Running reports whether a configured agent runs now (spawning it
	// again is refused).
	Running func(name string) bool
}

// TooManyAgentsError refuses a spawn past [spawn] max_agents.
type TooManyAgentsError struct {
	Max   int
	Count int
}

func (e *TooManyAgentsError) Error() string {
	return fmt.Sprintf("the swarm has %d agent(s) not retired and [spawn] max_agents is %d: retire one first ('swarm retire <name>'), or raise max_agents in swarm.toml", e.Count, e.Max)
}

// Spawn stores a spawned agent and posts its task mail from the spawner;
// the caller then asks the running supervisor to start it (StartSpawned).
// cfg is swarm.toml as loaded, without WithSpawned. The max_agents count
// and the row are one transaction, so two spawns cannot both take the
// last place.
func Spawn(ctx context.Context, cfg *config.Config, st mailbox.Store, poster *mailbox.Poster, req SpawnRequest, now time.Time) (mailbox.Spawned, message.Message, error) {
	sp := mailbox.Spawned{Name: req.Name, Role: strings.TrimSpace(req.Role), Mode: req.Mode, Strategy: req.Strategy, Engine: req.Engine,
		Task: req.Task, Ephemeral: req.Ephemeral, SpawnedBy: req.Caller.Name(), SpawnedAt: now}
	configured := slices.ContainsFunc(cfg.Agents, func(a config.Agent) bool {
		return a.Name == req.Name && (a.Spawned == nil || a.Spawned.Configured)
	})
	if configured {
		if req.Running != nil && req.Running(req.Name) {
			return sp, message.Message{}, fmt.Errorf("%s is configured in swarm.toml and running already; send it mail instead ('swarm send %s ...')", req.Name, req.Name)
		}
		sp.Configured, sp.Role, sp.Mode, sp.Strategy, sp.Engine = true, "", "", "", ""
	} else {
		if sp.Role == "" {
			return sp, message.Message{}, errors.New("--role is required: say what the new agent is for")
		}
		if _, err := cfg.NewAgent(sp.Name, sp.Role, sp.Mode, sp.Strategy, sp.Engine); err != nil {
			return sp, message.Message{}, err
		}
	}
	err := st.InTx(ctx, func(tx mailbox.Tx) error {
		rows, err := tx.SpawnedAgents()
		if err != nil {
			return err
		}
		if !configured && slices.ContainsFunc(rows, func(r mailbox.Spawned) bool { return r.Name == sp.Name && !r.Retired() }) {
			return mailbox.ErrAgentExists
		}
		// The configured agents, and the spawned ones not retired.
		count := 0
		for _, a := range cfg.Agents {
			if a.Spawned == nil || a.Spawned.Configured {
				count++
			}
		}
		for _, r := range rows {
			if !r.Configured && !r.Retired() {
				count++
			}
		}
		if !configured && count >= cfg.Spawn.MaxAgents {
			return &TooManyAgentsError{Max: cfg.Spawn.MaxAgents, Count: count}
		}
		return tx.AddSpawned(sp)
	})
	if errors.Is(err, mailbox.ErrAgentExists) && configured {
		err = nil // spawned before and not running: start it again
	}
	if errors.Is(err, mailbox.ErrAgentExists) {
		return sp, message.Message{}, fmt.Errorf("%s is spawned already and not retired; send it mail, or 'swarm retire %s' first", req.Name, req.Name)
	}
	if err != nil {
		return sp, message.Message{}, err
	}
	if names := poster.Names(); !slices.Contains(names, req.Name) {
		poster.SetNames(append(names, req.Name))
	}
	body := spawnBody(sp)
	m, err := poster.Post(ctx, message.Draft{From: req.Caller.Name(), To: req.Name, Kind: message.KindTask, Body: body})
	if err != nil {
		return sp, m, fmt.Errorf("%s is spawned, but its task mail was not sent: %w; send it with 'swarm send %s ...'", req.Name, err, req.Name)
	}
	return sp, m, nil
}

// spawnBody is the task mail a spawned agent gets from its spawner.
func spawnBody(sp mailbox.Spawned) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You were spawned by %s", sp.SpawnedBy)
	if sp.Task != "" {
		fmt.Fprintf(&b, " for task %s", sp.Task)
	}
	b.WriteString(".")
	if sp.Role != "" {
		fmt.Fprintf(&b, " Your job: %s", sp.Role)
	}
	if sp.Ephemeral {
		b.WriteString(" You are ephemeral: when your work is done and committed, you retire.")
	}
	return b.String()
}

// StartSpawned asks the running supervisor to start a spawned agent; false
// when no supervisor runs (the next swarm up starts it).
func StartSpawned(ctx context.Context, l repo.Layout, name string) (bool, error) {
	resp, err := control.Call(ctx, l, control.Request{Op: control.OpSpawn, Agent: name})
	switch {
	case errors.Is(err, control.ErrNoSupervisor):
		return false, nil
	case err != nil && resp.Error != "":
		return true, errors.New(resp.Error)
	}
	return err == nil, err
}

// StartSpawned is control.OpSpawn in the supervisor: it starts the runner
// of a spawned agent stored by `swarm spawn`, with its own worktree, lease
// and mail. An agent already running is left alone.
func (s *Supervisor) StartSpawned(ctx context.Context, name string) error {
	rows, err := s.store.SpawnedAgents(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rows, func(sp mailbox.Spawned) bool { return sp.Name == name })
	if i < 0 || rows[i].Retired() {
		return fmt.Errorf("%s is not a spawned agent that is not retired; run 'swarm spawn %s --role ...' first", name, name)
	}
	a, err := spawnedAgent(s.cfg, rows[i])
	if err != nil {
		return err
	}
	if r, ok := s.lookup(name); ok {
		select {
		case <-r.done: // stopped or retired earlier: a new runner
		default:
			return nil
		}
	}
	eng, err := s.opts.Engines(a)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := s.claimMore(ctx, name); err != nil {
		return err
	}
	r := newRunner(s, a, eng)
	if err := s.recoverAgent(ctx, r); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.mu.Lock()
	if !slices.Contains(s.order, name) {
		s.order = append(s.order, name)
	}
	s.runners[name] = r
	s.mu.Unlock()
	if names := s.poster.Names(); !slices.Contains(names, name) {
		s.poster.SetNames(append(names, name))
	}
	if !s.start(r) {
		return fmt.Errorf("the swarm is stopping; the next 'swarm up' starts %s", name)
	}
	s.bus.emit(lifecycle.Notice{At: s.clock.Now(), Agent: name, Kind: lifecycle.NoticeInfo, Text: fmt.Sprintf("spawned by %s", a.Spawned.By)})
	return nil
}

// RetireRunner is control.OpRetire in the supervisor: the agent's runner
// stops with cause retired (a running session is ended as at shutdown),
// and it returns once the runner ended.
func (s *Supervisor) RetireRunner(ctx context.Context, name string) error {
	r, ok := s.lookup(name)
	if !ok {
		return nil
	}
	s.mu.RLock()
	cancel := r.cancel
	s.mu.RUnlock()
	if cancel != nil {
		cancel(errRetired)
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retire ends an ephemeral agent that went Idle with no work left.
func (r *runner) retire(ctx context.Context) error {
	if err := bounded(ctx, func(c context.Context) error { return r.sup.store.RetireSpawned(c, r.agent.Name) }); err != nil {
		return err
	}
	if err := bounded(ctx, func(c context.Context) error { return ReleaseRetired(c, r.sup.store, r.agent.Name, r.sup.clock.Now()) }); err != nil {
		return err
	}
	return r.move(ctx, lifecycle.OperatorStop, lifecycle.Stopped, CauseRetired)
}

// RetireRequest is `swarm retire`'s input.
type RetireRequest struct {
	Config *config.Config // with WithSpawned applied
	Layout repo.Layout
	Store  mailbox.Store
	Name   string
	Mode   DownMode // keep (the default), merge, squash or discard
	Env    []string
	Now    func() time.Time // when its file reservations are released; nil: time.Now
}

// RetireResult is what `swarm retire --json` prints.
type RetireResult struct {
	Agent string `json:"agent"`
	// Stopped says a running supervisor stopped the agent's runner.
	Stopped bool       `json:"stopped"`
	Work    *DownAgent `json:"work"` // what was done with its worktree; null for keep
	// BaseBranch is what a merge or squash went into; "" when no
	// worktree or branch was touched.
	BaseBranch string `json:"base_branch"`
}

// Retire ends a spawned agent: marked retired, its runner stopped by a
// running supervisor, then its work merged, squashed or discarded like
// `swarm down` does (kept by default).
func Retire(ctx context.Context, req RetireRequest) (RetireResult, error) {
	res := RetireResult{Agent: req.Name}
	rows, err := req.Store.SpawnedAgents(ctx)
	if err != nil {
		return res, err
	}
	if !slices.ContainsFunc(rows, func(sp mailbox.Spawned) bool { return sp.Name == req.Name }) {
		if _, ok := req.Config.Agent(req.Name); ok {
			return res, fmt.Errorf("%s is configured in swarm.toml, not spawned: only spawned agents retire; remove it from swarm.toml, or stop the swarm with 'swarm down'", req.Name)
		}
		return res, fmt.Errorf("no spawned agent %s: 'swarm status' lists the agents", req.Name)
	}
	if err := req.Store.RetireSpawned(ctx, req.Name); err != nil {
		return res, err
	}
	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	if err := ReleaseRetired(ctx, req.Store, req.Name, now()); err != nil {
		return res, err
	}
	resp, err := control.Call(ctx, req.Layout, control.Request{Op: control.OpRetire, Agent: req.Name})
	switch {
	case errors.Is(err, control.ErrNoSupervisor):
	case err != nil && resp.Error != "":
		return res, fmt.Errorf("%s is retired, but the supervisor could not stop it: %s", req.Name, resp.Error)
	case err != nil:
		return res, err
	default:
		res.Stopped = true
	}
	if req.Mode == "" || req.Mode == DownKeep {
		return res, nil
	}
	cfg := req.Config
	m, err := worktree.New(ctx, worktree.Options{Root: req.Layout.Root, Dir: cfg.Worktree.Dir, Orphans: req.Layout.Orphans(), Meta: req.Store, Env: req.Env, Pass: cfg.Env.Pass})
	if err != nil {
		return res, err
	}
	info, err := m.Inspect(ctx, req.Name)
	if err != nil {
		return res, err
	}
	if !info.Registered && !info.HasBranch {
		return res, nil
	}
	if res.BaseBranch, err = m.BaseBranch(ctx); err != nil {
		return res, err
	}
	if req.Mode == DownMerge || req.Mode == DownSquash {
		if err := m.CheckBase(ctx); err != nil {
			return res, fmt.Errorf("%s is retired, but its work cannot be %sd: %w; then run 'swarm retire %s --%s' again", req.Name, req.Mode, err, req.Name, req.Mode)
		}
	}
	w := downOne(ctx, m, req.Mode, info)
	res.Work = &w
	return res, nil
}
