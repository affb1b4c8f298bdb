package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// Team is [team]: the team launch with its core-ready handshake (DESIGN
// §9.5). Nil when swarm.toml has no [team].
type Team struct {
	Name string
	// Core lists the agents that must acknowledge their ping before the
	// other members start, in the order given.
	Core []string
	// ReadyTimeout is how long each core agent has to acknowledge.
	ReadyTimeout time.Duration
	// MaxRelaunch is how many times silent core agents are relaunched
	// before the launch falls back.
	MaxRelaunch int
}

// IsCore reports whether agent is a core agent of the team.
func (t *Team) IsCore(agent string) bool { return t != nil && slices.Contains(t.Core, agent) }

// Spawn is [spawn]: agents added at run time by `swarm spawn`.
type Spawn struct {
	// MaxAgents caps the agents not retired, configured ones included; it
	// only refuses spawns.
	MaxAgents int
}

// SpawnInfo is how `swarm spawn` added an agent.
type SpawnInfo struct {
	By        string // the agent (or operator) that spawned it
	Task      string // the task it was spawned for, if any
	Ephemeral bool   // it retires when it goes Idle with no work left
	Retired   bool   // it was retired: it runs no more
	// Configured says swarm.toml configures the agent: spawning it only
	// started it.
	Configured bool
}

// Defaults of [team] and [spawn].
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultMaxRelaunch  = 2
	DefaultMaxAgents    = 20
)

type rawTeam struct {
	Name         *string  `toml:"name"`
	Core         []string `toml:"core"`
	ReadyTimeout *string  `toml:"ready_timeout"`
	MaxRelaunch  *int     `toml:"max_relaunch"`
}

type rawSpawn struct {
	MaxAgents *int `toml:"max_agents"`
}

// teamName is what a team's name may be: it becomes the ping's task,
// team-<name>. Compiled on first use: its {0,63} unrolls into ~60 KB that
// every command would allocate at start-up (internal/deptest's budget).
var teamName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
})

// team checks [team] once the agents are known.
func (b *builder) team(r *rawTeam) {
	if r == nil {
		return
	}
	t := &Team{ReadyTimeout: DefaultReadyTimeout, MaxRelaunch: DefaultMaxRelaunch}
	switch {
	case r.Name == nil || *r.Name == "":
		b.errorf("team", "[team] needs a name, such as name = \"analysis\"")
	case !teamName().MatchString(*r.Name):
		b.errorf("team.name", "bad team name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit (at most 64)", *r.Name)
	default:
		t.Name = *r.Name
	}
	if len(r.Core) == 0 {
		key := "team.core"
		if r.Core == nil {
			key = "team"
		}
		b.errorf(key, "[team] needs core = [\"agent\", ...]: the agents that must be ready before the others start")
	}
	for _, c := range r.Core {
		switch {
		case slices.Contains(t.Core, c):
			b.errorf("team.core", "core lists %q twice; list each agent once", c)
			continue
		case c == "":
			b.errorf("team.core", "core lists an empty name")
			continue
		}
		if _, ok := b.cfg.Agent(c); !ok {
			msg := fmt.Sprintf("core agent %q is not an [[agent]] of this file (agents: %s)", c, strings.Join(b.cfg.AgentNames(), ", "))
			if s := Suggest(c, b.cfg.AgentNames()); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			b.errorf("team.core", "%s", msg)
			continue
		}
		t.Core = append(t.Core, c)
	}
	if r.ReadyTimeout != nil {
		t.ReadyTimeout = b.duration("team.ready_timeout", *r.ReadyTimeout, false)
	}
	if r.MaxRelaunch != nil {
		if *r.MaxRelaunch < 0 {
			b.errorf("team.max_relaunch", "max_relaunch must not be negative, got %d", *r.MaxRelaunch)
		} else {
			t.MaxRelaunch = *r.MaxRelaunch
		}
	}
	b.cfg.Team = t
}

func (b *builder) spawn(r rawSpawn) {
	b.cfg.Spawn = Spawn{MaxAgents: DefaultMaxAgents}
	if r.MaxAgents != nil {
		if *r.MaxAgents < 1 {
			b.errorf("spawn.max_agents", "max_agents must be at least 1, got %d", *r.MaxAgents)
		} else {
			b.cfg.Spawn.MaxAgents = *r.MaxAgents
		}
	}
}

// NewAgent builds the settings of an agent that `swarm spawn` adds at run
// time and swarm.toml does not configure: [defaults] with the given role,
// mode (or profile), strategy and engine applied over it, checked as a
// [[agent]] would be. Empty arguments keep [defaults].
func (c *Config) NewAgent(name, role, modeName, strategy, engine string) (Agent, error) {
	switch {
	case name == Operator || name == message.Swarm:
		return Agent{}, fmt.Errorf("%q is a reserved name; pick another", name)
	case !message.ValidName(name):
		return Agent{}, fmt.Errorf("bad agent name %q: use lower-case letters, digits and '-', starting with a letter", name)
	}
	a := Agent{Settings: c.Defaults, Name: name, Role: strings.TrimSpace(role), Budget: c.Budget.Budget}
	if modeName != "" {
		m, err := mode.Parse(modeName)
		if err != nil {
			return Agent{}, err
		}
		a.Mode = m
		if strategy == "" && mode.CheckStrategy(m, a.Strategy) != nil {
			a.Strategy = ""
		}
	}
	if strategy != "" {
		a.Strategy = mode.Strategy(strategy)
	}
	if err := mode.CheckStrategy(a.Mode, a.Strategy); err != nil {
		return Agent{}, err
	}
	if a.Strategy == mode.Tree {
		return Agent{}, errors.New("strategy \"tree\" needs a tree_root, which only swarm.toml can give; configure the agent there")
	}
	a.Strategy = a.Spec().EffectiveStrategy()
	if engine != "" {
		a.Engine = engine
	}
	if _, err := c.EngineFor(a, ""); err != nil {
		return Agent{}, err
	}
	return a, nil
}
