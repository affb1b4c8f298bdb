package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

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
