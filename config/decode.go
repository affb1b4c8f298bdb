package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/sandbox"
	"github.com/swarmhq/swarm/tomlfile"
)

// The raw file shape. Pointers tell "unset" from a zero value, so per-agent
// settings override [defaults] only when present.
type rawFile struct {
	Defaults rawSettings          `toml:"defaults"`
	Agent    []rawAgent           `toml:"agent"`
	Engine   map[string]rawEngine `toml:"engine"`
	Prompt   rawPrompt            `toml:"prompt"`
	Liveness rawLiveness          `toml:"liveness"`
	Errors   rawErrors            `toml:"errors"`
	Mailbox  rawMailbox           `toml:"mailbox"`
	Worktree rawWorktree          `toml:"worktree"`
	Merge    rawMerge             `toml:"merge"`
	Env      rawEnv               `toml:"env"`
	Sandbox  rawSandbox           `toml:"sandbox"`
	Web      rawWeb               `toml:"web"`
	Notify   rawNotify            `toml:"notify"`
	Budget   *rawBudget           `toml:"budget"`
	Prices   map[string]rawPrice  `toml:"prices"`
	Workflow []rawWorkflow        `toml:"workflow"`
	Team     *rawTeam             `toml:"team"`
	Spawn    rawSpawn             `toml:"spawn"`
}

type rawSettings struct {
	Engine   *string `toml:"engine"`
	Model    *string `toml:"model"`
	Mode     *string `toml:"mode"`
	Strategy *string `toml:"strategy"`
	TreeRoot *string `toml:"tree_root"`
	// Capabilities overrides the derived capability vector:
	// capabilities = { can_... = bool }.
	Capabilities   map[string]bool `toml:"capabilities"`
	SessionTimeout *string         `toml:"session_timeout"`
	MaxTurns       *int            `toml:"max_turns"`
	Interrupt      *string         `toml:"interrupt"`
	InterruptGrace *string         `toml:"interrupt_grace"`
}

type rawAgent struct {
	Name   string `toml:"name"`
	Role   string `toml:"role"`
	Script string `toml:"script"`
	rawSettings
	Budget *rawBudget `toml:"budget"` // budget = { tokens = ..., window = ..., action = ... }
}

type rawEngine struct {
	Kind       string   `toml:"kind"`
	Model      string   `toml:"model"`
	BaseURL    string   `toml:"base_url"`
	APIKeyFile *string  `toml:"api_key_file"`
	Command    []string `toml:"command"`
	Preset     string   `toml:"preset"`
	Args       []string `toml:"args"`
	Prompt     string   `toml:"prompt"`
	EnvFile    *string  `toml:"env_file"`
}

type rawPrompt struct {
	MessageCap   any     `toml:"message_cap"` // "4KiB" or a number of bytes
	TaskLimit    *int    `toml:"task_limit"`
	IncludeEpics *bool   `toml:"include_epics"`
	GitTimeout   *string `toml:"git_timeout"`
	BDTimeout    *string `toml:"bd_timeout"`
}

type rawLiveness struct {
	Heartbeat  *string `toml:"heartbeat"`
	NudgeAfter *string `toml:"nudge_after"`
	NudgeEvery *string `toml:"nudge_every"`
	MaxNudges  *int    `toml:"max_nudges"`
	TaskPoll   *string `toml:"task_poll"`
	StallAfter *string `toml:"stall_after"`
}

type rawErrors struct {
	MaxConsecutive *int    `toml:"max_consecutive"`
	MaxTotal       *int    `toml:"max_total"`
	BackoffMin     *string `toml:"backoff_min"`
	BackoffMax     *string `toml:"backoff_max"`
}

type rawMailbox struct {
	Retention *string `toml:"retention"`
	URL       *string `toml:"url"`
}

type rawWorktree struct {
	Dir         *string `toml:"dir"`
	Push        *string `toml:"push"`
	KeepCurrent *bool   `toml:"keep_current"`
}

type rawMerge struct {
	CI        *string `toml:"ci"`
	CITimeout *string `toml:"ci_timeout"`
	Batch     *int    `toml:"batch"`
	AfterQA   *bool   `toml:"after_qa"`
}

type rawSandbox struct {
	Mode *string `toml:"mode"`
}

type rawWeb struct {
	Addr      *string `toml:"addr"`
	TokenFile *string `toml:"token_file"`
}

type rawEnv struct {
	Pass []string `toml:"pass"`
}

func decode(data []byte, file string) (*rawFile, tomlfile.Lines, error) {
	var raw rawFile
	lines, err := tomlfile.Decode(data, file, &raw, "")
	if err != nil {
		return nil, nil, err
	}
	return &raw, lines, nil
}

type builder struct {
	cfg   Config
	lines tomlfile.Lines
	file  string
	root  string
	errs  []error

	reported map[errKey]struct{} // the errors in errs, to drop repeats
	roles    map[string]roleText // role files read, by path
}

// errorf records a problem at key's line. The same problem at the same
// line is recorded once, however many agents run into it.
func (b *builder) errorf(key, format string, args ...any) {
	e := &Error{File: b.file, Line: b.line(key), Msg: fmt.Sprintf(format, args...)}
	k := errKey{e.Line, e.Msg}
	if _, dup := b.reported[k]; dup {
		return
	}
	if b.reported == nil {
		b.reported = map[errKey]struct{}{}
	}
	b.reported[k] = struct{}{}
	b.errs = append(b.errs, e)
}

type errKey struct {
	line int
	msg  string
}

// unknownEngine says that name is no engine, and what it might have been.
func (b *builder) unknownEngine(name string) string {
	names := b.cfg.EngineNames()
	msg := fmt.Sprintf("unknown engine %q (valid: %s)", name, strings.Join(names, ", "))
	if slices.Contains(Presets, name) {
		return msg + fmt.Sprintf("; %s is an external CLI agent: define it with an [engine.%s] table holding kind = \"exec\" and preset = %q", name, name, name)
	}
	if s := Suggest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return msg
}

func (b *builder) line(key string) int { return b.lines.Line(key) }

func (b *builder) build(raw *rawFile) {
	b.settings(&b.cfg.Defaults, raw.Defaults, "defaults")
	b.engines(raw.Engine)
	b.prompt(raw.Prompt)
	b.liveness(raw.Liveness)
	b.errorsSection(raw.Errors)
	if raw.Mailbox.Retention != nil {
		b.cfg.Mailbox.Retention = b.duration("mailbox.retention", *raw.Mailbox.Retention, false)
	}
	if raw.Mailbox.URL != nil {
		if err := CheckDatabaseURL(*raw.Mailbox.URL); err != nil {
			b.errorf("mailbox.url", "%v", err)
		}
		b.cfg.Mailbox.URL = *raw.Mailbox.URL
	}
	if raw.Worktree.Dir != nil {
		dir := *raw.Worktree.Dir
		if dir == "" {
			b.errorf("worktree.dir", "dir must not be empty")
		} else if !filepath.IsAbs(dir) {
			dir = filepath.Join(b.root, dir)
		}
		b.cfg.Worktree.Dir = filepath.Clean(dir)
	}
	if raw.Worktree.Push != nil {
		r := *raw.Worktree.Push
		if r == "" || strings.HasPrefix(r, "-") || strings.ContainsAny(r, " \t\n") {
			b.errorf("worktree.push", "push = %q is not a git remote name: name one of 'git remote' (such as \"origin\"), or remove the key", r)
		} else {
			b.cfg.Worktree.Push = r
		}
	}
	b.merge(raw.Merge)
	if raw.Worktree.KeepCurrent != nil {
		b.cfg.Worktree.KeepCurrent = *raw.Worktree.KeepCurrent
	}
	b.env(raw.Env)
	if m := raw.Sandbox.Mode; m != nil {
		if slices.Contains(sandbox.Modes, sandbox.Mode(*m)) {
			b.cfg.Sandbox.Mode = sandbox.Mode(*m)
		} else {
			b.errorf("sandbox.mode", "[sandbox] mode = %q is not a mode: use \"auto\" (bubblewrap when usable), \"bwrap\" (required) or \"none\"", *m)
		}
	}
	if a := raw.Web.Addr; a != nil {
		b.cfg.Web.Addr = *a
	}
	if f := raw.Web.TokenFile; f != nil && *f != "" {
		tf := *f
		if !filepath.IsAbs(tf) {
			tf = filepath.Join(b.root, tf)
		}
		b.cfg.Web.TokenFile = filepath.Clean(tf)
	}
	b.notify(raw.Notify)
	b.budgets(raw.Budget)
	b.prices(raw.Prices)
	b.agents(raw.Agent)
	b.checkUSD()
	b.workflows(raw.Workflow)
	b.team(raw.Team)
	b.spawn(raw.Spawn)
	if len(raw.Agent) == 0 {
		b.errs = append(b.errs, &Error{File: b.file, Msg: "no agents: add at least one [[agent]] with a name"})
	}
}

func (b *builder) settings(dst *Settings, src rawSettings, at string) {
	if src.Engine != nil {
		dst.Engine = *src.Engine
	}
	if src.Model != nil {
		dst.Model = *src.Model
	}
	if src.Mode != nil {
		m, err := mode.Parse(*src.Mode)
		if err != nil {
			b.errorf(at+".mode", "%v", err)
		} else {
			dst.Mode = m
			// A mode set without a strategy drops an inherited strategy of
			// the other kind for the mode's default.
			if src.Strategy == nil && mode.CheckStrategy(m, dst.Strategy) != nil {
				dst.Strategy = ""
			}
		}
	}
	if src.Strategy != nil {
		dst.Strategy = mode.Strategy(*src.Strategy)
	}
	if src.TreeRoot != nil {
		dst.TreeRoot = *src.TreeRoot
	}
	if src.Capabilities != nil {
		caps := make(map[mode.Capability]bool, len(dst.Capabilities)+len(src.Capabilities))
		for c, on := range dst.Capabilities {
			caps[c] = on
		}
		for name, on := range src.Capabilities {
			c := mode.Capability(name)
			if !c.Valid() {
				msg := fmt.Sprintf("unknown capability %q (valid: %s)", name, strings.Join(mode.CapabilityNames(), ", "))
				if s := Suggest(name, mode.CapabilityNames()); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				b.errorf(at+".capabilities."+name, "%s", msg)
				continue
			}
			caps[c] = on
		}
		dst.Capabilities = caps
	}
	if src.SessionTimeout != nil {
		dst.SessionTimeout = b.duration(at+".session_timeout", *src.SessionTimeout, false)
	}
	if src.MaxTurns != nil {
		if *src.MaxTurns < 1 {
			b.errorf(at+".max_turns", "max_turns must be at least 1, got %d", *src.MaxTurns)
		} else {
			dst.MaxTurns = *src.MaxTurns
		}
	}
	if src.Interrupt != nil {
		switch *src.Interrupt {
		case InterruptCancel, InterruptBoundary:
			dst.Interrupt = *src.Interrupt
		default:
			b.errorf(at+".interrupt", "interrupt must be %q or %q, got %q", InterruptCancel, InterruptBoundary, *src.Interrupt)
		}
	}
	if src.InterruptGrace != nil {
		dst.InterruptGrace = b.duration(at+".interrupt_grace", *src.InterruptGrace, false)
	}
}

func (b *builder) agents(raws []rawAgent) {
	seen := make(map[string]int, len(raws))
	b.cfg.Agents = make([]Agent, 0, len(raws))
	for i, ra := range raws {
		at := "agent[" + strconv.Itoa(i) + "]"
		a := Agent{Settings: b.cfg.Defaults, Name: ra.Name, Script: ra.Script}
		a.Budget = b.budget(b.cfg.Budget.Budget, ra.Budget, at+".budget", false)
		switch {
		case ra.Name == "":
			b.errorf(at, "agent has no name")
		case ra.Name == Operator:
			b.errorf(at+".name", "%q is reserved for the human operator; pick another name", Operator)
		case ra.Name == message.Swarm:
			b.errorf(at+".name", "%q is reserved for the runtime, which sends the supervisor's own messages from it; pick another name", message.Swarm)
		case !message.ValidName(ra.Name):
			b.errorf(at+".name", "bad agent name %q: use lower-case letters, digits and '-', starting with a letter", ra.Name)
		default:
			if first, dup := seen[ra.Name]; dup {
				b.errorf(at+".name", "duplicate agent name %q (first defined on line %d); rename or remove one", ra.Name, b.line("agent["+strconv.Itoa(first)+"].name"))
			} else {
				seen[ra.Name] = i
			}
		}
		b.settings(&a.Settings, ra.rawSettings, at)
		a.ModelSet = ra.Model != nil
		b.strategy(a.Settings, ra.rawSettings, at)
		a.Strategy = a.Spec().EffectiveStrategy()
		if rest, ok := strings.CutPrefix(ra.Role, "@"); ok {
			a.RoleFile = rest
			p := rest
			if !filepath.IsAbs(p) {
				p = filepath.Join(b.root, p)
			}
			role, err := b.roleFile(p)
			if err != nil {
				b.errorf(at+".role", "role file %s: %v", rest, err)
			}
			a.Role = role
		} else {
			a.Role = strings.TrimSpace(ra.Role)
		}
		if ra.Script != "" && !filepath.IsAbs(ra.Script) {
			a.Script = filepath.Join(b.root, ra.Script)
		}
		if a.Script != "" {
			if fi, err := os.Stat(a.Script); err != nil || !fi.Mode().IsRegular() {
				b.errorf(at+".script", "script file %s does not exist (or is not a file); write it, or remove script to use .swarm/scripts/%s.toml", ra.Script, ra.Name)
			}
		}
		// A mistake inherited from [defaults] is reported once, there; the
		// agents that inherit it do not repeat it.
		if _, ok := b.cfg.engine(a.Engine); !ok {
			key := at + ".engine"
			if ra.Engine == nil {
				key = "defaults.engine"
			}
			b.errorf(key, "%s", b.unknownEngine(a.Engine))
		} else if e, err := b.cfg.EngineFor(a, ""); err == nil {
			b.execModel(a, e, at)
		} else {
			switch {
			case ra.Engine == nil && ra.Interrupt == nil:
				b.errorf("defaults.interrupt", "interrupt = %q needs an in-process engine, but engine %q runs an external command; use interrupt = %q", a.Interrupt, a.Engine, InterruptCancel)
			case ra.Interrupt != nil:
				b.errorf(at+".interrupt", "%v", err)
			default:
				b.errorf(at+".engine", "%v", err)
			}
		}
		b.cfg.Agents = append(b.cfg.Agents, a)
	}
	// Every agent has a good, unique name when the file parses, so seen
	// indexes Agents.
	b.cfg.byName = seen
}

// strategy checks that the agent's strategy fits its mode. A mistake
// inherited from [defaults] is reported there, once.
func (b *builder) strategy(s Settings, own rawSettings, at string) {
	if err := mode.CheckStrategy(s.Mode, s.Strategy); err != nil {
		key := at + ".strategy"
		switch {
		case own.Strategy == nil && own.Mode != nil:
			key = at + ".mode"
		case own.Strategy == nil:
			key = "defaults.strategy"
		}
		if s := Suggest(string(s.Strategy), strategyNames(s.Mode)); s != "" && !strings.Contains(err.Error(), "does not fit") {
			b.errorf(key, "%v; did you mean %q?", err, s)
			return
		}
		b.errorf(key, "%v; set strategy to one of these, or change mode", err)
		return
	}
	if s.Mode.Kind() == mode.Execute && s.Strategy == mode.Tree && s.TreeRoot == "" {
		b.errorf(at, "strategy = \"tree\" needs tree_root = \"<beads id>\": the task whose subtree the agent owns")
	}
	if s.TreeRoot != "" && s.Strategy != mode.Tree {
		key := at + ".tree_root"
		if own.TreeRoot == nil {
			key = "defaults.tree_root"
		}
		b.errorf(key, "tree_root only applies to strategy = \"tree\"; set the strategy or remove tree_root")
	}
}

func strategyNames(m mode.Mode) []string {
	var out []string
	for _, s := range m.Kind().Strategies() {
		out = append(out, string(s))
	}
	return out
}

// roleFile reads a role file once however many agents share it.
func (b *builder) roleFile(path string) (string, error) {
	if r, ok := b.roles[path]; ok {
		return r.text, r.err
	}
	text, err := readRoleFile(path)
	r := roleText{strings.TrimSpace(string(text)), err}
	if b.roles == nil {
		b.roles = map[string]roleText{}
	}
	b.roles[path] = r
	return r.text, r.err
}

type roleText struct {
	text string
	err  error
}

func (b *builder) engines(raws map[string]rawEngine) {
	for name, re := range raws {
		at := "engine." + name
		e := Engine{Name: name, Kind: re.Kind, Model: re.Model, BaseURL: re.BaseURL, Command: re.Command, Preset: re.Preset, Args: re.Args, Prompt: re.Prompt}
		if !message.ValidName(name) {
			b.errorf(at, "bad engine name %q: use lower-case letters, digits and '-'", name)
		}
		switch e.Kind {
		case EngineGemini, EngineScript:
			if len(e.Command) > 0 || e.Preset != "" || e.Prompt != "" || len(e.Args) > 0 {
				b.errorf(at, "command, preset, args and prompt only apply to kind = \"exec\"")
			}
			if re.EnvFile != nil {
				b.errorf(at+".env_file", "env_file only applies to kind = \"exec\"; a %s engine runs in swarm's own process", e.Kind)
			}
		case EngineExec:
			b.execEngine(&e, at)
			if re.EnvFile != nil {
				e.EnvFile = b.envFile(at+".env_file", *re.EnvFile)
			}
		case "":
			b.errorf(at, "engine %s has no kind: set kind = \"gemini\", \"script\" or \"exec\"", name)
		default:
			b.errorf(at+".kind", "unknown engine kind %q (valid: gemini, script, exec)", e.Kind)
		}
		if re.APIKeyFile != nil {
			if e.Kind == EngineGemini {
				e.APIKeyFile = b.secretFile(at+".api_key_file", "api_key_file", *re.APIKeyFile)
			} else if e.Kind == EngineScript || e.Kind == EngineExec {
				b.errorf(at+".api_key_file", "api_key_file only applies to kind = \"gemini\"; for an exec engine, put the key in an env_file")
			}
		}
		b.cfg.Engines[name] = e
	}
}

// secretFile checks a file holding credentials, named by key in the file:
// it must be a regular file that only its owner may read. It returns the
// path made absolute; the file is read when the engine starts.
func (b *builder) secretFile(key, what, path string) string {
	abs, err := b.path(path)
	if err != nil {
		b.errorf(key, "%s %s: %v", what, path, err)
		return ""
	}
	if err := checkSecretFile(abs); err != nil {
		b.errorf(key, "%s %s: %v", what, path, err)
		return ""
	}
	return abs
}

// envFile checks an exec engine's env_file: a secret file in the format
// ReadEnvFile reads.
func (b *builder) envFile(key, path string) string {
	abs := b.secretFile(key, "env_file", path)
	if abs == "" {
		return ""
	}
	if _, err := ReadEnvFile(abs); err != nil {
		msg := err.Error()
		var fe *Error
		if errors.As(err, &fe) {
			msg = fe.Msg
			if fe.Line > 0 {
				msg = fmt.Sprintf("line %d: %s", fe.Line, fe.Msg)
			}
		}
		b.errorf(key, "env_file %s: %s", path, msg)
		return ""
	}
	return abs
}

// path resolves a path written in swarm.toml: "~/" is the home directory,
// and a relative path is relative to the repository root.
func (b *builder) path(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path; name a file")
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand ~: %v; write the full path", err)
		}
		return filepath.Join(home, p[1:]), nil
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	}
	return filepath.Join(b.root, p), nil
}

func (b *builder) execEngine(e *Engine, at string) {
	switch {
	case len(e.Command) > 0 && e.Preset != "":
		b.errorf(at, "set either command or preset, not both")
	case len(e.Command) == 0 && e.Preset == "":
		b.errorf(at, "an exec engine needs command = [...] or preset = one of %s", strings.Join(Presets, ", "))
	case e.Preset != "" && !slices.Contains(Presets, e.Preset):
		b.errorf(at+".preset", "unknown preset %q (valid: %s)", e.Preset, strings.Join(Presets, ", "))
	case len(e.Command) > 0 && e.Command[0] == "":
		b.errorf(at+".command", "command[0] must name a program")
	}
	if e.Prompt == "" {
		e.Prompt = PromptStdin
	}
	if !slices.Contains([]string{PromptStdin, PromptArg, PromptFile}, e.Prompt) {
		b.errorf(at+".prompt", "prompt must be %q, %q or %q, got %q", PromptStdin, PromptArg, PromptFile, e.Prompt)
		return
	}
	if len(e.Command) > 0 {
		all := strings.Join(e.Command, "\x00")
		if e.Model != "" && !strings.Contains(all, ModelPlaceholder) {
			b.errorf(at+".model", "model = %q cannot reach the command: add a %q argument to command (e.g. \"--model\", %q), or remove model", e.Model, ModelPlaceholder, ModelPlaceholder)
		}
		switch {
		case e.Prompt == PromptArg && !strings.Contains(all, "{prompt}"):
			b.errorf(at+".command", "prompt = \"arg\" needs a \"{prompt}\" argument in command")
		case e.Prompt == PromptFile && !strings.Contains(all, "{prompt_file}"):
			b.errorf(at+".command", "prompt = \"file\" needs a \"{prompt_file}\" argument in command")
		}
	}
}

// execModel checks that an agent's model can reach its exec engine's custom
// command, and that a command asking for {model} gets one.
func (b *builder) execModel(a Agent, e Engine, at string) {
	if e.Kind != EngineExec || len(e.Command) == 0 || e.Model != "" {
		return
	}
	takes := strings.Contains(strings.Join(e.Command, "\x00"), ModelPlaceholder)
	switch {
	case a.ModelSet && !takes:
		b.errorf(at+".model", "agent %s sets model = %q, but engine %s's command has no %q argument to pass it in; add one to [engine.%s] command (e.g. \"--model\", %q), or remove model", a.Name, a.Model, e.Name, ModelPlaceholder, e.Name, ModelPlaceholder)
	case !a.ModelSet && takes:
		b.errorf(at, "agent %s runs engine %s, whose command takes %q, but no model is set; set model on the agent or in [engine.%s]", a.Name, e.Name, ModelPlaceholder, e.Name)
	}
}

// envName is what [env] pass accepts: a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (b *builder) env(r rawEnv) {
	seen := make(map[string]int, len(r.Pass))
	for i, name := range r.Pass {
		key := "env.pass[" + strconv.Itoa(i) + "]"
		if before, _, hasValue := strings.Cut(name, "="); hasValue {
			// Never echo what follows "=": it is likely the secret itself.
			b.errorf(key, "[env] pass lists %q with a value; list the name only (the value comes from your environment)", before+"=...")
			continue
		}
		switch {
		case name == "":
			b.errorf(key, "[env] pass lists an empty name; remove it")
			continue
		case strings.ContainsAny(name, "*?["):
			b.errorf(key, "[env] pass lists the pattern %q; list each variable by its full name", name)
			continue
		case !envName.MatchString(name):
			b.errorf(key, "[env] pass lists %q, which is not a variable name: use letters, digits and '_', not starting with a digit", name)
			continue
		}
		if first, dup := seen[name]; dup {
			b.errorf(key, "[env] pass lists %q twice (first on line %d); remove one", name, b.line("env.pass["+strconv.Itoa(first)+"]"))
			continue
		}
		seen[name] = i
		b.cfg.Env.Pass = append(b.cfg.Env.Pass, name)
	}
}

func (b *builder) prompt(r rawPrompt) {
	p := &b.cfg.Prompt
	if r.MessageCap != nil {
		n, err := parseSize(r.MessageCap)
		if err != nil {
			b.errorf("prompt.message_cap", "%v", err)
		} else {
			p.MessageCap = n
		}
	}
	if r.TaskLimit != nil {
		if *r.TaskLimit < 0 {
			b.errorf("prompt.task_limit", "task_limit must not be negative")
		} else {
			p.TaskLimit = *r.TaskLimit
		}
	}
	if r.IncludeEpics != nil {
		p.IncludeEpics = *r.IncludeEpics
	}
	if r.GitTimeout != nil {
		p.GitTimeout = b.duration("prompt.git_timeout", *r.GitTimeout, false)
	}
	if r.BDTimeout != nil {
		p.BDTimeout = b.duration("prompt.bd_timeout", *r.BDTimeout, false)
	}
}

func (b *builder) liveness(r rawLiveness) {
	l := &b.cfg.Liveness
	if r.Heartbeat != nil {
		l.Heartbeat = b.duration("liveness.heartbeat", *r.Heartbeat, false)
	}
	if r.NudgeAfter != nil {
		l.NudgeAfter = b.duration("liveness.nudge_after", *r.NudgeAfter, true)
	}
	if r.NudgeEvery != nil {
		l.NudgeEvery = b.duration("liveness.nudge_every", *r.NudgeEvery, false)
	}
	if r.MaxNudges != nil {
		if *r.MaxNudges < 0 {
			b.errorf("liveness.max_nudges", "max_nudges must not be negative")
		} else {
			l.MaxNudges = *r.MaxNudges
		}
	}
	if r.TaskPoll != nil {
		l.TaskPoll = b.duration("liveness.task_poll", *r.TaskPoll, false)
	}
	if r.StallAfter != nil {
		l.StallAfter = b.duration("liveness.stall_after", *r.StallAfter, true)
	}
}

func (b *builder) errorsSection(r rawErrors) {
	e := &b.cfg.Errors
	positive := func(key string, v *int, dst *int) {
		if v == nil {
			return
		}
		if *v < 1 {
			b.errorf(key, "must be at least 1, got %d", *v)
			return
		}
		*dst = *v
	}
	positive("errors.max_consecutive", r.MaxConsecutive, &e.MaxConsecutive)
	positive("errors.max_total", r.MaxTotal, &e.MaxTotal)
	if r.BackoffMin != nil {
		e.BackoffMin = b.duration("errors.backoff_min", *r.BackoffMin, false)
	}
	if r.BackoffMax != nil {
		e.BackoffMax = b.duration("errors.backoff_max", *r.BackoffMax, false)
	}
	if e.BackoffMax < e.BackoffMin {
		b.errorf("errors.backoff_max", "backoff_max (%s) is below backoff_min (%s)", e.BackoffMax, e.BackoffMin)
	}
}

// merge reads [merge].
func (b *builder) merge(r rawMerge) {
	m := &b.cfg.Merge
	if r.CI != nil {
		m.CI = strings.TrimSpace(*r.CI)
	}
	if r.CITimeout != nil {
		m.CITimeout = b.duration("merge.ci_timeout", *r.CITimeout, false)
	}
	if r.Batch != nil {
		if *r.Batch < 1 || *r.Batch > 64 {
			b.errorf("merge.batch", "[merge] batch = %d: test between 1 and 64 candidates at once", *r.Batch)
		} else {
			m.Batch = *r.Batch
		}
	}
	if r.AfterQA != nil {
		m.AfterQA = *r.AfterQA
	}
}

// duration parses a Go duration string ("90s", "5m", "1h30m"). zeroOK allows
// "0s", which turns a feature off.
func (b *builder) duration(key, s string, zeroOK bool) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		b.errorf(key, "bad duration %q: write it like \"90s\", \"5m\" or \"1h30m\"", s)
		return 0
	}
	if d < 0 || (d == 0 && !zeroOK) {
		b.errorf(key, "duration %q must be positive", s)
		return 0
	}
	return d
}

// maxSize bounds sizes such as message_cap: far above any sensible value,
// and far below where multiplying by a unit could overflow.
const maxSize = 1 << 30

// parseSize accepts a number of bytes or a string like "4KiB", "1MiB", "512B".
func parseSize(v any) (int, error) {
	switch v := v.(type) {
	case int64:
		if v < 1 || v > maxSize {
			return 0, fmt.Errorf("size must be between 1 and %d bytes (1GiB), got %d", maxSize, v)
		}
		return int(v), nil
	case string:
		s := strings.TrimSpace(v)
		mult := 1
		for _, u := range []struct {
			suffix string
			mult   int
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000_000}, {"B", 1}} {
			if rest, ok := strings.CutSuffix(s, u.suffix); ok {
				s, mult = strings.TrimSpace(rest), u.mult
				break
			}
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxSize/mult {
			return 0, fmt.Errorf("bad size %q: write it like \"4KiB\" or 4096 (at most 1GiB)", v)
		}
		return n * mult, nil
	default:
		return 0, fmt.Errorf("bad size %v: write it like \"4KiB\" or 4096", v)
	}
}
