package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

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
