package swarm

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
)

// This file is `swarm reload` (and SIGHUP): swarm.toml read again while the
// swarm runs. What can change safely is applied at once (budgets, prices,
// notify, nudges and task polling) or from each agent's next session (its
// role, mode, strategy, capabilities, session_timeout, max_turns and
// budget); the rest waits for a restart and the report says so. A file that does not read is refused
// with its file:line error and the running configuration stays.

// ReloadReport says what a reload applied and what needs a restart.
type ReloadReport struct {
	Path    string   `json:"path"`
	Applied []string `json:"applied"`
	Restart []string `json:"restart"`
}

// liveConfig is the part of the configuration a reload replaces while
// the supervisor runs: read through budgets() and liveness().
type liveConfig struct {
	Budget   config.Budgets
	Prices   map[string]config.Price
	Liveness config.Liveness
}

func (s *Supervisor) liveCfg() *liveConfig {
	if p := s.live.Load(); p != nil {
		return p
	}
	return &liveConfig{Budget: s.cfg.Budget, Prices: s.cfg.Prices, Liveness: s.cfg.Liveness}
}

// prices is the [prices] table in force.
func (s *Supervisor) prices() map[string]config.Price { return s.liveCfg().Prices }

// budgets is the [budget] table in force.
func (s *Supervisor) budgets() config.Budgets { return s.liveCfg().Budget }

// liveness is the [liveness] table in force.
func (s *Supervisor) liveness() config.Liveness { return s.liveCfg().Liveness }

// applyReloaded takes the agent's configuration from the last reload, if
// one came: called by the runner between sessions only.
// Only the fields a reload may change are written: other goroutines read
// the agent's name and interrupt style meanwhile.
func (r *runner) applyReloaded() {
	a := r.reloaded.Swap(nil)
	if a == nil {
		return
	}
	r.agent.Role, r.agent.RoleFile, r.agent.Budget = a.Role, a.RoleFile, a.Budget
	r.agent.Mode, r.agent.Strategy, r.agent.TreeRoot, r.agent.Capabilities = a.Mode, a.Strategy, a.TreeRoot, a.Capabilities
	r.agent.SessionTimeout, r.agent.MaxTurns = a.SessionTimeout, a.MaxTurns
}

// Reload reads swarm.toml again and applies what can change while the
// swarm runs; a broken file is refused (its error names file:line) and
// nothing changes. Agents are told at once, so a hold whose budget is no
// longer spent is cleared and work held back by a spent budget starts.
func (s *Supervisor) Reload(ctx context.Context) (ReloadReport, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	rep := ReloadReport{Path: s.cfg.Path, Applied: []string{}, Restart: []string{}}
	next, err := config.Load(s.cfg.Path, s.cfg.Root)
	if err != nil {
		return rep, fmt.Errorf("%w; the running configuration stays: fix the file and reload again", err)
	}
	if problems, err := WithSpawned(ctx, next, s.store); err != nil {
		return rep, fmt.Errorf("read the spawned agents: %w", err)
	} else if len(problems) > 0 {
		rep.Restart = append(rep.Restart, problems...)
	}
	last := s.lastCfg
	if last == nil {
		last = s.cfg
	}

	// Applied at once.
	live := *s.liveCfg()
	if !reflect.DeepEqual(last.Budget, next.Budget) {
		rep.Applied = append(rep.Applied, "[budget]: "+budgetText(next.Budget.Budget)+swarmBudgetText(next.Budget))
	}
	live.Budget = next.Budget
	if !reflect.DeepEqual(last.Prices, next.Prices) {
		rep.Applied = append(rep.Applied, "[prices]")
	}
	live.Prices = next.Prices
	l := next.Liveness
	l.Heartbeat, l.StallAfter = s.cfg.Liveness.Heartbeat, s.cfg.Liveness.StallAfter
	if l != live.Liveness {
		rep.Applied = append(rep.Applied, "[liveness]: nudge_after, nudge_every, max_nudges, task_poll")
	}
	live.Liveness = l
	if next.Liveness.Heartbeat != s.cfg.Liveness.Heartbeat || next.Liveness.StallAfter != s.cfg.Liveness.StallAfter {
		rep.Restart = append(rep.Restart, "[liveness]: heartbeat and stall_after")
	}
	s.live.Store(&live)
	switch {
	case reflect.DeepEqual(s.desk.notifyConfig(), next.Notify):
	case s.desk.notifier != nil && next.Notify.Enabled():
		s.desk.notifier.setConfig(next.Notify)
		rep.Applied = append(rep.Applied, "[notify]")
	default:
		rep.Restart = append(rep.Restart, "[notify]: turning notifications on or off")
	}

	// The rest needs a restart.
	for _, p := range []struct {
		name     string
		old, now any
	}{
		{"[engine.*]", s.cfg.Engines, next.Engines},
		{"[prompt]", s.cfg.Prompt, next.Prompt},
		{"[errors]", s.cfg.Errors, next.Errors},
		{"[mailbox]", s.cfg.Mailbox, next.Mailbox},
		{"[worktree]", s.cfg.Worktree, next.Worktree},
		{"[env]", s.cfg.Env, next.Env},
		{"[[workflow]]", s.cfg.Workflows, next.Workflows},
		{"[team]", s.cfg.Team, next.Team},
		{"[spawn]", s.cfg.Spawn, next.Spawn},
	} {
		if !reflect.DeepEqual(p.old, p.now) {
			rep.Restart = append(rep.Restart, p.name)
		}
	}

	// Each agent, from its next session.
	for _, a := range next.Agents {
		r, ok := s.lookup(a.Name)
		if !ok {
			if a.Spawned == nil || !a.Spawned.Retired {
				rep.Restart = append(rep.Restart, "agent "+a.Name+": new")
			}
			continue
		}
		run, _ := s.cfg.Agent(a.Name)
		if run.Engine != a.Engine || run.Model != a.Model || run.ModelSet != a.ModelSet || run.Script != a.Script {
			rep.Restart = append(rep.Restart, "agent "+a.Name+": engine, model or script")
		}
		if run.Interrupt != a.Interrupt || run.InterruptGrace != a.InterruptGrace {
			rep.Restart = append(rep.Restart, "agent "+a.Name+": interrupt, interrupt_grace")
		}
		// What the engine was built with stays.
		a.Engine, a.Model, a.ModelSet, a.Script, a.Spawned = run.Engine, run.Model, run.ModelSet, run.Script, run.Spawned
		a.Interrupt, a.InterruptGrace = run.Interrupt, run.InterruptGrace
		prev := run
		if p, ok := last.Agent(a.Name); ok {
			prev = p
		}
		if changed := agentChanges(prev, a); len(changed) > 0 {
			rep.Applied = append(rep.Applied, fmt.Sprintf("agent %s: %s (from its next session)", a.Name, strings.Join(changed, ", ")))
		}
		r.reloaded.Store(&a)
	}
	for _, name := range s.cfg.AgentNames() {
		if _, ok := next.Agent(name); !ok {
			if _, running := s.lookup(name); running {
				rep.Restart = append(rep.Restart, "agent "+name+": removed (it runs until a restart)")
			}
		}
	}
	rep.Restart = slices.Compact(rep.Restart)
	s.lastCfg = next
	s.log.Info("swarm.toml reloaded", "path", s.cfg.Path, "applied", len(rep.Applied), "need_restart", len(rep.Restart))
	// Every runner looks again: a hold whose budget is no longer spent
	// clears, and work held back by an aborted budget may start.
	for _, r := range s.allRunners() {
		r.escalated()
	}
	return rep, nil
}

// agentChanges names what differs between two agents' settings.
func agentChanges(a, b config.Agent) []string {
	var out []string
	add := func(name string, changed bool) {
		if changed {
			out = append(out, name)
		}
	}
	add("role", a.Role != b.Role || a.RoleFile != b.RoleFile)
	add("mode", a.Mode != b.Mode)
	add("strategy", a.Strategy != b.Strategy || a.TreeRoot != b.TreeRoot)
	add("capabilities", !reflect.DeepEqual(a.Capabilities, b.Capabilities))
	add("session_timeout", a.SessionTimeout != b.SessionTimeout)
	add("max_turns", a.MaxTurns != b.MaxTurns)
	add("budget", a.Budget != b.Budget)
	return out
}

func budgetText(b config.Budget) string {
	if !b.Enabled() {
		return "no agent budget"
	}
	var caps []string
	if b.Tokens > 0 {
		caps = append(caps, fmt.Sprintf("tokens %d", b.Tokens))
	}
	if b.USD > 0 {
		caps = append(caps, "usd "+USD(b.USD))
	}
	return fmt.Sprintf("%s per %s, action %s", strings.Join(caps, ", "), windowText(b.Window), b.Action)
}

func swarmBudgetText(b config.Budgets) string {
	out := ""
	if b.SwarmTokens > 0 {
		out += fmt.Sprintf(", swarm_tokens %d", b.SwarmTokens)
	}
	if b.SwarmUSD > 0 {
		out += ", swarm_usd " + USD(b.SwarmUSD)
	}
	return out
}

// reloaded answers control.OpReload.
func reloaded(rep ReloadReport, err error) control.Response {
	if err != nil {
		return control.Response{Error: err.Error()}
	}
	return answer(rep)
}
