package config

import (
	"github.com/swarmhq/swarm/sandbox"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mode"
)

func TestStarterParses(t *testing.T) {
	cfg, err := Parse(Starter(), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatalf("starter file does not parse: %v", err)
	}
	if got := cfg.AgentNames(); strings.Join(got, ",") != "backend,frontend" {
		t.Errorf("agents = %v", got)
	}
	if !reflect.DeepEqual(cfg.Defaults, defaultSettings) {
		t.Errorf("starter defaults %+v differ from built-in defaults %+v", cfg.Defaults, defaultSettings)
	}
}

func TestDefaultsAndOverrides(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "prompts", "lead.md"), []byte("Lead the team.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `
[defaults]
engine = "script"
session_timeout = "5m"

[[agent]]
name = "backend"
role = "API owner"

[[agent]]
name = "lead"
mode = "delegate"
role = "@prompts/lead.md"
engine = "claude"
model = "opus"
session_timeout = "1h"
max_turns = 7
interrupt_grace = "3s"

[engine.claude]
kind = "exec"
preset = "claude"

[prompt]
message_cap = "1KiB"
task_limit = 5

[liveness]
nudge_after = "0s"

[worktree]
dir = "../wt"

[merge]
ci = "make test"
ci_timeout = "90s"
batch = 4
after_qa = true
`
	cfg, err := Parse([]byte(src), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	be, _ := cfg.Agent("backend")
	if be.Engine != "script" || be.Mode != mode.ExecuteMode || be.Strategy != mode.Simple || be.SessionTimeout != 5*time.Minute || be.MaxTurns != 100 || be.Role != "API owner" {
		t.Errorf("backend = %+v", be)
	}
	lead, _ := cfg.Agent("lead")
	if lead.Engine != "claude" || lead.Mode != mode.Delegate || lead.Strategy != mode.Default || lead.Model != "opus" || lead.SessionTimeout != time.Hour ||
		lead.MaxTurns != 7 || lead.InterruptGrace != 3*time.Second || lead.Role != "Lead the team." || lead.RoleFile != "prompts/lead.md" {
		t.Errorf("lead = %+v", lead)
	}
	if cfg.Prompt.MessageCap != 1024 || cfg.Prompt.TaskLimit != 5 || cfg.Prompt.BDTimeout != 5*time.Second {
		t.Errorf("prompt = %+v", cfg.Prompt)
	}
	if cfg.Liveness.NudgeAfter != 0 || cfg.Liveness.NudgeEvery != 300*time.Second {
		t.Errorf("liveness = %+v", cfg.Liveness)
	}
	if cfg.Merge != (Merge{CI: "make test", CITimeout: 90 * time.Second, Batch: 4, AfterQA: true}) {
		t.Errorf("merge = %+v", cfg.Merge)
	}
	if want := filepath.Join(filepath.Dir(root), "wt"); cfg.Worktree.Dir != want {
		t.Errorf("worktree dir = %q, want %q", cfg.Worktree.Dir, want)
	}
	e, err := cfg.EngineFor(lead, "")
	if err != nil || e.Kind != EngineExec || e.Preset != "claude" || e.Prompt != PromptStdin {
		t.Errorf("EngineFor(lead) = %+v, %v", e, err)
	}
	e, err = cfg.EngineFor(lead, "script")
	if err != nil || e.Kind != EngineScript {
		t.Errorf("override: %+v, %v", e, err)
	}
	if _, err := cfg.EngineFor(lead, "nope"); err == nil {
		t.Error("unknown override engine accepted")
	}
}

func TestModesAndStrategies(t *testing.T) {
	src := `[defaults]
engine = "script"
strategy = "queue"

[[agent]]
name = "worker"

[[agent]]
name = "lead"
mode = "coordinate"
strategy = "dag"
capabilities = { can_spawn_sessions = false }

[[agent]]
name = "planner"
mode = "delegate"

[[agent]]
name = "owner"
strategy = "tree"
tree_root = "demo-9z2"
`
	cfg, err := Parse([]byte(src), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, m mode.Mode, s mode.Strategy) Agent {
		a, _ := cfg.Agent(name)
		if a.Mode != m || a.Strategy != s {
			t.Errorf("%s: %s/%s, want %s/%s", name, a.Mode, a.Strategy, m, s)
		}
		return a
	}
	if w := check("worker", mode.ExecuteMode, mode.Queue); !w.Spec().Vector().Has(mode.CanUseQueue) {
		t.Error("worker cannot use the queue")
	}
	lead := check("lead", mode.CoordinateMode, mode.DAG)
	if v := lead.Spec().Vector(); v.Has(mode.CanSpawnSessions) || !v.Has(mode.CanDispatch) {
		t.Errorf("lead's overrides were not applied: %v", v)
	}
	check("planner", mode.Delegate, mode.Default)
	if o := check("owner", mode.ExecuteMode, mode.Tree); o.TreeRoot != "demo-9z2" {
		t.Errorf("tree_root = %q", o.TreeRoot)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // substring, including file:line
	}{
		{"unknown key on line 7", "[defaults]\nengine = \"script\"\n\n[[agent]]\nname = \"a\"\n\ncolour = \"red\"\n", `swarm.toml:7: unknown key "colour" in [[agent]] (valid: name, role, script, engine, model, mode, strategy, tree_root, [capabilities], session_timeout, max_turns, interrupt, interrupt_grace, [budget])`},
		{"unknown table", "[[agent]]\nname = \"a\"\n[bogus]\nx = 1\n", `swarm.toml:3: unknown table [bogus] (valid: [defaults], [[agent]], [engine.NAME], [prompt]`},
		{"misspelt agent key", "[[agent]]\nname = \"a\"\nengin = \"script\"\n", `swarm.toml:3: unknown key "engin" in [[agent]]; did you mean "engine"?`},
		{"misspelt agent table", "[defaults]\nengine = \"script\"\n[[agents]]\nname = \"a\"\n", `swarm.toml:3: unknown table [[agents]]; did you mean [[agent]]?`},
		{"agent written as a table", "[agents]\nname = \"a\"\n", `swarm.toml:1: unknown table [agents]; did you mean [[agent]]?`},
		{"misspelt engine table", "[engines.x]\nkind = \"script\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:1: unknown table [engines.x]; did you mean [engine.x]?`},
		{"misspelt engine key", "[engine.x]\nkind = \"exec\"\npreset = \"claude\"\npromt = \"arg\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:4: unknown key "promt" in [engine.x]; did you mean "prompt"?`},
		{"misspelt default", "[defaults]\nsession-timeout = \"5m\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: unknown key "session-timeout" in [defaults]; did you mean "session_timeout"?`},
		{"misspelt section", "[livenes]\nheartbeat = \"1s\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:1: unknown table [livenes]; did you mean [liveness]?`},
		{"top-level key", "colour = \"red\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:1: unknown key "colour" at the top level (valid: [defaults], [[agent]]`},
		{"top-level setting", "engine = \"script\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:1: engine: expected a table, got a string`},
		{"sub-table of an agent", "[[agent]]\nname = \"a\"\n[agent.bogus]\nx = 1\n", `swarm.toml:3: unknown table [agent.bogus] (valid: name, role, script, engine,`},
		{"bad name", "[[agent]]\nname = \"Backend\"\n", `swarm.toml:2: bad agent name "Backend"`},
		{"path name", "[[agent]]\nname = \"../x\"\n", `swarm.toml:2: bad agent name "../x"`},
		{"operator reserved", "[[agent]]\nname = \"operator\"\n", `swarm.toml:2: "operator" is reserved`},
		{"swarm reserved", "[[agent]]\nname = \"swarm\"\n", `swarm.toml:2: "swarm" is reserved for the runtime`},
		{"duplicate", "[[agent]]\nname = \"a\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:4: duplicate agent name "a" (first defined on line 2)`},
		{"bad duration", "[[agent]]\nname = \"a\"\nsession_timeout = \"soon\"\n", `swarm.toml:3: bad duration "soon"`},
		{"bad default duration", "[liveness]\nheartbeat = \"5\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: bad duration "5"`},
		{"unknown engine", "[[agent]]\nname = \"a\"\nengine = \"gpt\"\n", `swarm.toml:3: unknown engine "gpt"`},
		{"unknown default engine", "[defaults]\nengine = \"gpt\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: unknown engine "gpt"`},
		{"unknown mode", "[[agent]]\nname = \"a\"\nmode = \"boss\"\n", `swarm.toml:3: unknown mode "boss"`},
		{"push is not a remote", "[worktree]\npush = \"--mirror\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: push = "--mirror" is not a git remote name`},
		{"merge batch", "[merge]\nbatch = 0\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: [merge] batch = 0: test between 1 and 64`},
		{"merge ci_timeout", "[merge]\nci_timeout = \"0s\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: duration "0s" must be positive`},
		{"no agents", "[defaults]\nengine = \"script\"\n", `swarm.toml: no agents`},
		{"missing role file", "[[agent]]\nname = \"a\"\nrole = \"@prompts/none.md\"\n", `swarm.toml:3: role file prompts/none.md`},
		{"wrong type", "[[agent]]\nname = \"a\"\nmax_turns = \"ten\"\n", `swarm.toml:3:`},
		{"syntax", "[[agent]\nname = \"a\"\n", `swarm.toml`},
		{"exec without command", "[engine.x]\nkind = \"exec\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:1: an exec engine needs command`},
		{"exec arg without placeholder", "[engine.x]\nkind = \"exec\"\ncommand = [\"cat\"]\nprompt = \"arg\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:3: prompt = "arg" needs`},
		{"bad preset", "[engine.x]\nkind = \"exec\"\npreset = \"gpt\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:3: unknown preset "gpt"`},
		{"boundary on exec", "[engine.x]\nkind = \"exec\"\ncommand = [\"cat\"]\n[[agent]]\nname = \"a\"\nengine = \"x\"\ninterrupt = \"boundary\"\n", `swarm.toml:7: agent a: interrupt = "boundary" needs an in-process engine`},
		{"exec model without placeholder", "[engine.x]\nkind = \"exec\"\ncommand = [\"cat\"]\nmodel = \"opus\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:4: model = "opus" cannot reach the command: add a "{model}" argument`},
		{"agent model on command without placeholder", "[engine.x]\nkind = \"exec\"\ncommand = [\"cat\"]\n[[agent]]\nname = \"a\"\nengine = \"x\"\nmodel = \"opus\"\n", `swarm.toml:7: agent a sets model = "opus", but engine x's command has no "{model}" argument`},
		{"placeholder without model", "[engine.x]\nkind = \"exec\"\ncommand = [\"agent\", \"--model\", \"{model}\"]\n[[agent]]\nname = \"a\"\nengine = \"x\"\n", `swarm.toml:4: agent a runs engine x, whose command takes "{model}", but no model is set`},
		{"bad interrupt", "[[agent]]\nname = \"a\"\ninterrupt = \"kill\"\n", `swarm.toml:3: interrupt must be`},
		{"bad size", "[prompt]\nmessage_cap = \"lots\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: bad size "lots"`},
		{"no name", "[[agent]]\nrole = \"x\"\n", `swarm.toml:1: agent has no name`},
		{"strategy of the other mode", "[[agent]]\nname = \"a\"\nmode = \"execute\"\nstrategy = \"dag\"\n", `swarm.toml:4: strategy "dag" does not fit mode "execute", an execute mode (its strategies: simple, queue, tree)`},
		{"profile with a coordinate strategy", "[[agent]]\nname = \"a\"\nmode = \"code\"\nstrategy = \"intelligent-batching\"\n", `swarm.toml:4: strategy "intelligent-batching" does not fit mode "code"`},
		{"misspelt strategy", "[[agent]]\nname = \"a\"\nmode = \"coordinate\"\nstrategy = \"dga\"\n", `swarm.toml:4: unknown strategy "dga" for mode "coordinate" (valid: default, intelligent-batching, dag); did you mean "dag"?`},
		{"default strategy of the other mode", "[defaults]\nstrategy = \"queue\"\n[[agent]]\nname = \"a\"\n[[agent]]\nname = \"b\"\nmode = \"coordinate\"\nstrategy = \"queue\"\n", `swarm.toml:8: strategy "queue" does not fit mode "coordinate"`},
		{"misspelt capability", "[[agent]]\nname = \"a\"\ncapabilities = { can_edit_file = false }\n", `swarm.toml:3: unknown capability "can_edit_file" (valid: can_edit_files,`},
		{"misspelt capability suggestion", "[[agent]]\nname = \"a\"\ncapabilities = { can_edit_file = false }\n", `did you mean "can_edit_files"?`},
		{"tree without root", "[[agent]]\nname = \"a\"\nstrategy = \"tree\"\n", `swarm.toml:1: strategy = "tree" needs tree_root`},
		{"root without tree", "[[agent]]\nname = \"a\"\ntree_root = \"bd-1\"\n", `swarm.toml:3: tree_root only applies to strategy = "tree"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "swarm.toml", t.TempDir())
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "swarm.toml"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "swarm init") {
		t.Fatalf("err = %v, want a hint to run swarm init", err)
	}
}

func TestRoleFileMustBeRegular(t *testing.T) {
	root := t.TempDir()
	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(root, "big.md")
	if err := os.WriteFile(big, make([]byte, maxRoleFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ role, want string }{
		{"@fifo", "role file fifo: not a regular file"},
		{"@/dev/zero", "role file /dev/zero: under /dev, where the files are the system's"},
		{"@big.md", "role file big.md: 262145 bytes"},
	} {
		_, err := Parse([]byte("[[agent]]\nname = \"a\"\nrole = \""+tt.role+"\"\n"), "swarm.toml", root)
		if err == nil || !strings.Contains(err.Error(), "swarm.toml:3: "+tt.want) {
			t.Errorf("role %s: %v, want %q", tt.role, err, tt.want)
		}
	}
}

func TestSizeBounds(t *testing.T) {
	for _, v := range []string{`"9007199254740993KiB"`, `"18014398509481984KiB"`, `"2GiB"`, `0`, `2147483648`} {
		_, err := Parse([]byte("[prompt]\nmessage_cap = "+v+"\n[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
		if err == nil {
			t.Errorf("message_cap = %s accepted", v)
		}
	}
}

func TestErrorsComeInFileOrder(t *testing.T) {
	src := "[engine.x]\nkind = \"exec\"\n[[agent]]\nname = \"a\"\nmax_turns = 0\nsession_timeout = \"-5s\"\nscript = \"nope.toml\"\n"
	_, err := Parse([]byte(src), "swarm.toml", t.TempDir())
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"swarm.toml:1: an exec engine needs command", "swarm.toml:5: max_turns", "swarm.toml:6: duration", "swarm.toml:7: script file nope.toml does not exist"}
	if len(lines) != len(want) {
		t.Fatalf("errors:\n%s", err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

// TestDefaultsErrorsReportedOnce checks that a mistake in [defaults] is
// reported once, at its own line, not again for every agent inheriting it.
func TestDefaultsErrorsReportedOnce(t *testing.T) {
	agents := "[[agent]]\nname = \"a\"\n[[agent]]\nname = \"b\"\n[[agent]]\nname = \"c\"\n"
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"unknown engine", "[defaults]\nengine = \"gemni\"\n" + agents,
			[]string{`swarm.toml:2: unknown engine "gemni" (valid: gemini, script); did you mean "gemini"?`}},
		{"boundary on exec", "[defaults]\nengine = \"x\"\ninterrupt = \"boundary\"\n[engine.x]\nkind = \"exec\"\ncommand = [\"cat\"]\n" + agents,
			[]string{`swarm.toml:3: interrupt = "boundary" needs an in-process engine, but engine "x" runs an external command; use interrupt = "cancel"`}},
		{"one agent's own engine", "[defaults]\ninterrupt = \"boundary\"\n[engine.x]\nkind = \"exec\"\ncommand = [\"cat\"]\n" + agents + "engine = \"x\"\n",
			[]string{`swarm.toml:12: agent c: interrupt = "boundary" needs an in-process engine`}},
		{"bad default mode", "[defaults]\nmode = \"boss\"\n" + agents,
			[]string{`swarm.toml:2: unknown mode "boss"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "swarm.toml", t.TempDir())
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tt.want) {
				t.Fatalf("errors:\n%s\nwant %d", err, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %d = %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

func TestEnvPass(t *testing.T) {
	src := "[env]\npass = [\n  \"GH_TOKEN\",\n  \"NPM_AUTH_TOKEN\", \"_X1\",\n]\n[[agent]]\nname = \"a\"\n"
	cfg, err := Parse([]byte(src), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Env.Pass, ","); got != "GH_TOKEN,NPM_AUTH_TOKEN,_X1" {
		t.Errorf("Env.Pass = %q", cfg.Env.Pass)
	}
	cfg, err = Parse([]byte("[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil || cfg.Env.Pass != nil {
		t.Errorf("no [env]: Env.Pass = %q, %v", cfg.Env.Pass, err)
	}

	for _, tt := range []struct{ pass, want string }{
		{`["GH_TOKEN", "1X"]`, `swarm.toml:2: [env] pass lists "1X", which is not a variable name`},
		{"[\n\"GH_TOKEN\",\n\"GH TOKEN\"]", `swarm.toml:4: [env] pass lists "GH TOKEN", which is not a variable name`},
		{"[\n\"A\",\n\"\"]", `swarm.toml:4: [env] pass lists an empty name`},
		{`["AWS_*"]`, `swarm.toml:2: [env] pass lists the pattern "AWS_*"; list each variable by its full name`},
		{"[\n\"GH_TOKEN\",\n\"B\",\n\"GH_TOKEN\"]", `swarm.toml:5: [env] pass lists "GH_TOKEN" twice (first on line 3); remove one`},
		{`["GH_TOKEN=ghp_secret"]`, `swarm.toml:2: [env] pass lists "GH_TOKEN=..." with a value; list the name only`},
		{`"GH_TOKEN"`, `swarm.toml:2: env.pass: expected a list of strings, got a string`},
		{`[1]`, `swarm.toml:2: env.pass`},
	} {
		_, err := Parse([]byte("[env]\npass = "+tt.pass+"\n[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("pass = %s: %v, want %q", tt.pass, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "ghp_secret") {
			t.Errorf("the error shows the value: %v", err)
		}
	}
	_, err = Parse([]byte("[env]\npas = []\n[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `swarm.toml:2: unknown key "pas" in [env]; did you mean "pass"?`) {
		t.Errorf("misspelt pass: %v", err)
	}
}

// TestStarterMentionsEnvPass keeps [env] pass in the starter, commented
// out, and checks it parses when uncommented.
func TestStarterMentionsEnvPass(t *testing.T) {
	s := string(Starter())
	if !strings.Contains(s, "\n# [env]\n# pass = [") {
		t.Fatal("the starter does not mention [env] pass")
	}
	s = strings.Replace(s, "\n# [env]\n# pass = [", "\n[env]\npass = [", 1)
	cfg, err := Parse([]byte(s), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Env.Pass) == 0 {
		t.Error("uncommented [env] pass passes nothing")
	}
}

// TestRoleFileNotFromTheSystem checks that a role cannot read /proc, /sys
// or /dev, directly, by a relative path or through a symlink in the repo:
// role = "@/proc/self/environ" put the environment in every prompt.
func TestRoleFileNotFromTheSystem(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "prompts"), 0o755))
	must(os.WriteFile(filepath.Join(root, "prompts", "real.md"), []byte("Be good.\n"), 0o644))
	must(os.Symlink("/proc/self/environ", filepath.Join(root, "prompts", "env.md")))
	must(os.Symlink("/proc", filepath.Join(root, "prompts", "p")))
	must(os.Symlink("/dev/null", filepath.Join(root, "prompts", "null.md")))
	must(os.Symlink("real.md", filepath.Join(root, "prompts", "alias.md")))
	must(os.Symlink("env.md", filepath.Join(root, "prompts", "chain.md")))
	up := strings.Repeat("../", strings.Count(root, "/"))

	for _, tt := range []struct{ role, want string }{
		{"@/proc/self/environ", "role file /proc/self/environ: under /proc, where the files are the system's, not text you wrote; write the role in a regular file in the repository"},
		{"@/proc/self/../self/environ", "role file /proc/self/../self/environ: under /proc"},
		{"@" + up + "proc/self/environ", "under /proc"},
		{"@/sys/kernel/hostname", "under /sys"},
		{"@/dev/null", "under /dev"},
		{"@prompts/env.md", "role file prompts/env.md: links to /proc/"},
		{"@prompts/chain.md", "role file prompts/chain.md: links to /proc/"},
		{"@prompts/p/self/environ", "role file prompts/p/self/environ: links to /proc/"},
		{"@prompts/null.md", "role file prompts/null.md: links to /dev/null, under /dev"},
		{"@prompts", "role file prompts: not a regular file"},
	} {
		_, err := Parse([]byte("[[agent]]\nname = \"a\"\nrole = \""+tt.role+"\"\n"), "swarm.toml", root)
		if err == nil || !strings.Contains(err.Error(), "swarm.toml:3: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("role %s: %v, want %q", tt.role, err, tt.want)
		}
	}
	cfg, err := Parse([]byte("[[agent]]\nname = \"a\"\nrole = \"@prompts/alias.md\"\n"), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := cfg.Agent("a"); a.Role != "Be good." || a.RoleFile != "prompts/alias.md" {
		t.Errorf("a symlink to a file in the repo: %+v", a)
	}
}

func TestSessionModel(t *testing.T) {
	src := `[defaults]
model = "gemini-2.5-pro"
[engine.claude]
kind = "exec"
preset = "claude"
[engine.codex]
kind = "exec"
preset = "codex"
model = "o3"
[engine.mine]
kind = "exec"
command = ["agent", "--model={model}"]
[[agent]]
name = "g"
[[agent]]
name = "c"
engine = "claude"
[[agent]]
name = "c2"
engine = "claude"
model = "opus"
[[agent]]
name = "x"
engine = "codex"
[[agent]]
name = "m"
engine = "mine"
model = "big"
`
	cfg, err := Parse([]byte(src), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"g": "gemini-2.5-pro", "c": "", "c2": "opus", "x": "", "m": "big"} {
		a, _ := cfg.Agent(name)
		e, err := cfg.EngineFor(a, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := a.SessionModel(e.Kind); got != want {
			t.Errorf("agent %s: SessionModel = %q, want %q", name, got, want)
		}
	}
	if e := cfg.Engines["codex"]; e.Model != "o3" {
		t.Errorf("engine codex model = %q, want o3", e.Model)
	}
}

func TestMailboxURL(t *testing.T) {
	for _, tc := range []struct{ url, err string }{
		{"postgres://db.example/swarm?sslmode=require", ""},
		{"postgresql://swarm@db.example:5433/swarm", ""},
		{"postgres://me:hunter2@db.example/swarm", "PGPASSWORD"},
		{"postgres://db.example/swarm?password=hunter2", "PGPASSWORD"},
		{"mysql://db.example/swarm", "postgres://"},
		{"postgres://db.example", "names no database"},
	} {
		err := CheckDatabaseURL(tc.url)
		if tc.err == "" && err != nil {
			t.Errorf("%s: %v", tc.url, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "hunter2")) {
			t.Errorf("%s: %v, want an error with %q and no password", tc.url, err, tc.err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "swarm.toml")
	if err := os.WriteFile(path, StarterWithURL("postgres://db.example/swarm?sslmode=require"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mailbox.URL != "postgres://db.example/swarm?sslmode=require" || cfg.Mailbox.Retention != 720*time.Hour {
		t.Fatalf("mailbox = %+v", cfg.Mailbox)
	}
	bad := strings.Replace(string(StarterWithURL("postgres://db.example/swarm")), "postgres://db.example/swarm", "postgres://me:hunter2@db.example/swarm", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path, dir)
	if err == nil || !strings.Contains(err.Error(), "swarm.toml:") || !strings.Contains(err.Error(), "PGPASSWORD") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a URL with a password: %v", err)
	}
}

func TestWorkflowErrors(t *testing.T) {
	base := "[[agent]]\nname = \"backend\"\nengine = \"script\"\n[[agent]]\nname = \"critic\"\nengine = \"script\"\n"
	for _, tc := range []struct{ toml, want string }{
		{"[[workflow]]\nname = \"review\"\nkind = \"dev-reveiw\"\ndev = \"backend\"\n", `swarm.toml:9: unknown workflow kind "dev-reveiw" (valid: dev-review, dev-qa); did you mean "dev-review"?`},
		{"[[workflow]]\nname = \"qa\"\nkind = \"dev-qa\"\ndev = \"backend\"\nqa = \"backend\"\n", `swarm.toml:11: backend is bound to two roles of workflow "qa" (dev and qa)`},
		{"[[workflow]]\nname = \"r\"\nkind = \"dev-review\"\ndev = \"backend\"\nreviewer = \"critc\"\n", `swarm.toml:11: reviewer = "critc" is not a configured agent; did you mean "critic"?`},
		{"[[workflow]]\nname = \"r\"\nkind = \"dev-review\"\ndev = \"backend\"\n", `swarm.toml:7: workflow "r" (dev-review) needs reviewer = "<agent>"`},
		{"[[workflow]]\nname = \"r\"\nkind = \"dev-review\"\ndev = \"backend\"\nreviewer = \"critic\"\nmax_rejects = 0\n", `swarm.toml:12: max_rejects must be at least 1`},
		{"[[workflow]]\nname = \"q\"\nkind = \"dev-qa\"\ndev = \"backend\"\nqa = \"critic\"\ntimeout = \"soon\"\n", `swarm.toml:12: bad duration "soon"`},
		{"[[workflow]]\nname = \"r\"\nkind = \"dev-review\"\ndev = \"backend\"\nreviewer = \"critic\"\nresult_timeout = \"90s\"\n", `swarm.toml:12: result_timeout = "90s": use whole minutes`},
		{"[[workflow]]\nname = \"q\"\nkind = \"dev-qa\"\ndev = \"backend\"\nqa = \"critic\"\nresult_timeout = \"1h\"\n", `swarm.toml:12: result_timeout belongs to dev-review workflows`},
	} {
		_, err := Parse([]byte(base+tc.toml), "swarm.toml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config\n%s\nerr = %v\nwant %s", tc.toml, err, tc.want)
		}
	}
	cfg, err := Parse([]byte(base+"[[workflow]]\nname = \"review\"\nkind = \"dev-review\"\ndev = \"backend\"\nreviewer = \"critic\"\nci = [\"make\", \"test\"]\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, ok := cfg.Workflow("review")
	if !ok || w.MaxRejects != 3 || w.CIRetries != 2 || len(w.CI) != 2 || w.RoleOf("critic") != "reviewer" || w.ResultTimeout != 2*time.Hour {
		t.Fatalf("workflow = %+v", w)
	}
	cfg, err = Parse([]byte(base+"[[workflow]]\nname = \"review\"\nkind = \"dev-review\"\ndev = \"backend\"\nreviewer = \"critic\"\nresult_timeout = \"45m\"\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := cfg.Workflow("review"); w.ResultTimeout != 45*time.Minute {
		t.Fatalf("result_timeout = %s, want 45m", w.ResultTimeout)
	}
}

func TestSandboxMode(t *testing.T) {
	cfg, err := Parse([]byte("[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil || cfg.Sandbox.Mode != sandbox.Auto {
		t.Fatalf("default: %q, %v; want auto", cfg.Sandbox.Mode, err)
	}
	for _, m := range sandbox.Modes {
		cfg, err := Parse([]byte("[sandbox]\nmode = \""+string(m)+"\"\n[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
		if err != nil || cfg.Sandbox.Mode != m {
			t.Errorf("mode = %q: %q, %v", m, cfg.Sandbox.Mode, err)
		}
	}
	_, err = Parse([]byte("[sandbox]\nmode = \"docker\"\n[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `swarm.toml:2: [sandbox] mode = "docker" is not a mode: use "auto"`) {
		t.Errorf("bad mode: %v", err)
	}
}

// TestMergeDefaults: without [merge] there is no CI, one candidate at a
// time, a 10 minute CI timeout, and QA_PASSED queues nothing.
func TestMergeDefaults(t *testing.T) {
	cfg, err := Parse([]byte("[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil || cfg.Merge != (Merge{CITimeout: 10 * time.Minute, Batch: 1}) {
		t.Fatalf("default [merge] = %+v, %v", cfg.Merge, err)
	}
}

// [worktree] keep_current is on unless turned off.
func TestWorktreeKeepCurrent(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		toml string
		want bool
	}{
		{"[[agent]]\nname = \"a\"\n", true},
		{"[worktree]\nkeep_current = false\n[[agent]]\nname = \"a\"\n", false},
		{"[worktree]\nkeep_current = true\n[[agent]]\nname = \"a\"\n", true},
	} {
		cfg, err := Parse([]byte(tc.toml), "swarm.toml", root)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Worktree.KeepCurrent != tc.want {
			t.Errorf("%q: keep_current = %v, want %v", tc.toml, cfg.Worktree.KeepCurrent, tc.want)
		}
	}
}
