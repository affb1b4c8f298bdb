// Package config reads swarm.toml: it parses the file, applies defaults and
// validates everything up front, so a mistake is reported once, with its
// file:line, before any agent starts.
//
// Parsing uses github.com/pelletier/go-toml/v2 because it can reject unknown
// keys with their positions and exposes a parser that maps every key to its
// line, which the semantic checks (bad names, durations, engines) need too.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/sandbox"
	"github.com/swarmhq/swarm/tomlfile"
)

// Built-in engine names. An [engine.NAME] table with one of these names
// replaces the built-in.
const (
	EngineGemini = "gemini"
	EngineScript = "script"
	EngineExec   = "exec" // a kind only; exec engines always have a table
)

// Exec presets.
var Presets = []string{"claude", "codex", "gemini-cli"}

// Operator is the reserved name of the human at the CLI.
const Operator = message.Operator

// Interrupt styles.
const (
	InterruptCancel   = "cancel"
	InterruptBoundary = "boundary"
)

// Prompt delivery styles for exec engines.
const (
	PromptStdin = "stdin"
	PromptArg   = "arg"
	PromptFile  = "file"
)

// Config is a parsed, validated swarm.toml.
type Config struct {
	Path     string // the file it came from
	Root     string // the repository root
	Defaults Settings
	Agents   []Agent
	Engines  map[string]Engine
	Prompt   Prompt
	Liveness Liveness
	Errors   Errors
	Mailbox  Mailbox
	Worktree Worktree
	// Merge is [merge]: the merge queue (DESIGN §14).
	Merge   Merge
	Env     Env
	Sandbox Sandbox
	Notify  Notify
	// Web is [web]: the operator's desk on the web (DESIGN §15).
	Web Web
	// Budget is [budget]: every agent's default budget and the swarm's
	// cap. Each Agent carries its own, with its overrides applied.
	Budget Budgets
	// Prices is [prices]: by model, what its tokens cost (none built in).
	Prices map[string]Price
	// Workflows are the [[workflow]] tables (DESIGN §9.3).
	Workflows []Workflow
	// Team is [team], nil without one; Spawn is [spawn].
	Team  *Team
	Spawn Spawn

	byName map[string]int // agent name -> index in Agents, for Agent
}

// Settings are the keys of [defaults] that every agent can override.
type Settings struct {
	Engine         string
	Model          string
	Mode           mode.Mode // execute | coordinate, or a profile: code | review | delegate
	Strategy       mode.Strategy
	TreeRoot       string                   // execute/tree: the beads task the agent owns
	Capabilities   map[mode.Capability]bool // overrides of the derived vector
	SessionTimeout time.Duration
	MaxTurns       int
	Interrupt      string
	InterruptGrace time.Duration
}

// Agent is one [[agent]] with its defaults applied.
type Agent struct {
	Settings
	Name     string
	Role     string // the role text, read from the file when RoleFile is set
	RoleFile string // the @path, relative to the repo root, if any
	Script   string // script engine file; empty means .swarm/scripts/<name>.toml
	// Budget is the agent's token budget: [budget] with the agent's
	// budget = { ... } applied over it.
	Budget Budget
	// Spawned is set for an agent `swarm spawn` added at run time, or
	// started when swarm.toml configures it but it was not running; nil
	// for the others.
	Spawned *SpawnInfo
	// ModelSet says the [[agent]] table sets model itself. Model holds
	// [defaults] (or the built-in Gemini default) otherwise, which only
	// gemini engines use: see SessionModel.
	ModelSet bool
}

// ModelPlaceholder in an exec engine's command is replaced by the session's
// model.
const ModelPlaceholder = "{model}"

// SessionModel is the model the agent's sessions ask for on an engine of
// kind. The built-in default model and [defaults] model are Gemini's: an
// exec engine gets the agent's model only when the [[agent]] sets it, and
// "" otherwise (the CLI's own default, or the [engine.NAME] model, which
// the engine applies over this).
func (a Agent) SessionModel(kind string) string {
	if kind == EngineExec && !a.ModelSet {
		return ""
	}
	return a.Model
}

// Spec is the agent's mode, strategy and capability overrides: what
// mode.Spec.Vector derives its capabilities from, once per session.
func (s Settings) Spec() mode.Spec {
	return mode.Spec{Mode: s.Mode, Strategy: s.Strategy, Overrides: s.Capabilities, TreeRoot: s.TreeRoot}
}

// Engine is an [engine.NAME] table, or a built-in.
type Engine struct {
	Name    string
	Kind    string // gemini | script | exec
	Model   string // overrides the agent's model when set
	BaseURL string // gemini: an API gateway or test server
	// APIKeyFile (gemini, api_key_file) is the absolute path of a file
	// holding the API key, to be read with ReadKeyFile when the engine
	// starts; the key itself is never kept in a Config. Empty means the
	// key comes from the environment.
	APIKeyFile string
	Command    []string
	Preset     string
	Args       []string
	Prompt     string // stdin | arg | file
	// EnvFile (exec, env_file) is the absolute path of a dotenv-style file
	// whose variables are added to the external command's environment, to
	// be read with ReadEnvFile when the engine starts.
	EnvFile string
}

// Prompt tunes the prompt pipeline.
type Prompt struct {
	MessageCap   int // bytes of one message body shown before it is cut
	TaskLimit    int
	IncludeEpics bool
	GitTimeout   time.Duration
	BDTimeout    time.Duration
}

// Liveness sets heartbeats, nudges and task polling.
type Liveness struct {
	Heartbeat  time.Duration
	NudgeAfter time.Duration // 0 turns nudges off
	NudgeEvery time.Duration
	MaxNudges  int
	TaskPoll   time.Duration
	// StallAfter raises a stalled escalation for a running session with no
	// activity (model turn, tool call, output) for this long; 0 turns the
	// check off.
	StallAfter time.Duration
}

// Errors sets when an agent is stopped and how it backs off.
type Errors struct {
	MaxConsecutive int
	MaxTotal       int
	BackoffMin     time.Duration
	BackoffMax     time.Duration
}

// Mailbox sets how long done mail is kept, and where the mailbox lives.
type Mailbox struct {
	Retention time.Duration
	// URL is a PostgreSQL database (postgres://host/db?sslmode=...) shared
	// by several hosts; empty means the SQLite file .swarm/swarm.db. It
	// never carries a password (CheckDatabaseURL).
	URL string
}

// Worktree places agent worktrees.
type Worktree struct {
	Dir string // absolute
	// Push names a git remote (from [worktree] push) that every agent's
	// branch is pushed to after each session, and fetched from before a
	// merge: the way work done on several hosts meets. Empty means none.
	Push string
	// KeepCurrent ([worktree] keep_current, default true) merges the base
	// branch into an agent's branch before its session when it is behind
	// and the merge is clean (DESIGN §14).
	KeepCurrent bool
}

// Merge is [merge]: how the merge queue tests and lands (DESIGN §14).
type Merge struct {
	// CI is a shell command run (sh -c) on base + candidates in the
	// queue's scratch worktree before they land; empty: none, a clean
	// merge lands.
	CI string
	// CITimeout bounds one CI run (default 10m); past it the run is killed
	// and the candidates fail with the reason.
	CITimeout time.Duration
	// Batch is how many queued candidates are tested together (default
	// 1); a failing batch is bisected.
	Batch int
	// AfterQA queues a dev-qa item's dev branch when it reaches QA_PASSED.
	AfterQA bool
}

// Sandbox is [sandbox]: how sessions are contained (DESIGN §13.3).
type Sandbox struct {
	// Mode is auto (the default: bubblewrap when installed and usable,
	// else none with a warning), bwrap (refuse to start without it) or
	// none.
	Mode sandbox.Mode
}

// Web is [web]: where `swarm web` and `swarm up --web` listen, and the
// token a non-loopback address requires.
type Web struct {
	// Addr is host:port; empty means 127.0.0.1 with a free port.
	Addr string
	// TokenFile holds the desk's login token (absolute, or relative to the
	// repository root); empty means a fresh random token per start.
	TokenFile string
}

// Env controls the environment of agent sessions.
type Env struct {
	// Pass names variables that reach agent sessions although their names
	// look like credentials (GH_TOKEN, NPM_AUTH_TOKEN), which are otherwise
	// removed. From [env] pass = ["NAME", ...]; each a valid variable name,
	// listed once.
	Pass []string
}

// Default values, documented in the starter file and the README.
var defaultSettings = Settings{
	Engine:         EngineGemini,
	Model:          "gemini-2.5-flash",
	Mode:           mode.ExecuteMode,
	Strategy:       mode.Simple,
	SessionTimeout: 30 * time.Minute,
	MaxTurns:       100,
	Interrupt:      InterruptCancel,
	InterruptGrace: 10 * time.Second,
}

func defaults(root string) Config {
	return Config{
		Root:     root,
		Defaults: defaultSettings,
		Engines:  map[string]Engine{},
		Prompt:   Prompt{MessageCap: 4 << 10, TaskLimit: 20, GitTimeout: 2 * time.Second, BDTimeout: 5 * time.Second},
		Liveness: Liveness{Heartbeat: 5 * time.Second, NudgeAfter: 120 * time.Second, NudgeEvery: 300 * time.Second, MaxNudges: 3, TaskPoll: 60 * time.Second, StallAfter: 30 * time.Minute},
		Errors:   Errors{MaxConsecutive: 5, MaxTotal: 20, BackoffMin: time.Second, BackoffMax: 5 * time.Minute},
		Mailbox:  Mailbox{Retention: 720 * time.Hour},
		Worktree: Worktree{Dir: filepath.Join(root, ".swarm", "worktrees"), KeepCurrent: true},
		Merge:    Merge{CITimeout: 10 * time.Minute, Batch: 1},
		Sandbox:  Sandbox{Mode: sandbox.Auto},
		Notify:   defaultNotify,
		Budget:   defaultBudget,
		Spawn:    Spawn{MaxAgents: DefaultMaxAgents},
	}
}

// Error is a configuration problem at a place in the file.
type Error = tomlfile.Error

// ErrNoConfig means swarm.toml does not exist.
var ErrNoConfig = errors.New("no swarm.toml")

// Load reads and validates the swarm.toml at path. root is the repository
// root, against which @role files and [worktree] dir are resolved.
func Load(path, root string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: run 'swarm init' to create one", ErrNoConfig, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path, root)
}

// Parse validates a swarm.toml held in memory. name is used in errors.
func Parse(data []byte, name, root string) (*Config, error) {
	raw, lines, err := decode(data, name)
	if err != nil {
		return nil, err
	}
	b := builder{cfg: defaults(root), lines: lines, file: name, root: root}
	b.cfg.Path = name
	b.build(raw)
	if len(b.errs) > 0 {
		// In file order, as an editor would walk them.
		slices.SortStableFunc(b.errs, func(x, y error) int {
			var ex, ey *Error
			errors.As(x, &ex)
			errors.As(y, &ey)
			if ex == nil || ey == nil {
				return 0
			}
			return ex.Line - ey.Line
		})
		return nil, errors.Join(b.errs...)
	}
	return &b.cfg, nil
}

// NeedBeads names, in config order, the agents whose strategy cannot work
// without bd (queue, tree), with their strategies: "worker (queue)".
func (c *Config) NeedBeads() []string {
	var out []string
	for _, a := range c.Agents {
		if s := a.Spec(); s.NeedsBeads() {
			out = append(out, fmt.Sprintf("%s (%s)", a.Name, s.EffectiveStrategy()))
		}
	}
	return out
}

// AgentNames returns the agents' names in config order.
func (c *Config) AgentNames() []string {
	names := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		names[i] = a.Name
	}
	return names
}

// Agent returns the named agent. It takes constant time on a parsed
// Config, so callers may look agents up in a loop over thousands of them.
func (c *Config) Agent(name string) (Agent, bool) {
	// The index is checked against Agents, which callers may have changed.
	if i, ok := c.byName[name]; ok && i < len(c.Agents) && c.Agents[i].Name == name {
		return c.Agents[i], true
	}
	for _, a := range c.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// Recipients are the names mail can be addressed to: the agents and operator.
func (c *Config) Recipients() []string {
	return append(c.AgentNames(), Operator)
}

// EngineFor resolves the engine an agent runs on. override is `swarm up
// --engine`, and wins over the agent's own engine when set.
func (c *Config) EngineFor(a Agent, override string) (Engine, error) {
	name := a.Engine
	if override != "" {
		name = override
	}
	e, ok := c.engine(name)
	if !ok {
		return Engine{}, fmt.Errorf("unknown engine %q (valid: %s)", name, strings.Join(c.EngineNames(), ", "))
	}
	if e.Kind == EngineExec && a.Interrupt == InterruptBoundary {
		return Engine{}, fmt.Errorf("agent %s: interrupt = \"boundary\" needs an in-process engine, but %q runs an external command; use interrupt = \"cancel\"", a.Name, name)
	}
	return e, nil
}

func (c *Config) engine(name string) (Engine, bool) {
	if e, ok := c.Engines[name]; ok {
		return e, true
	}
	if name == EngineGemini || name == EngineScript {
		return Engine{Name: name, Kind: name}, true
	}
	return Engine{}, false
}

// EngineNames lists the built-ins and configured engines, sorted.
func (c *Config) EngineNames() []string {
	names := []string{EngineGemini, EngineScript}
	for n := range c.Engines {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}
