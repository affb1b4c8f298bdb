package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/message"
)

// fuzzRole is the only role file the fuzzer may name: Parse reads @files
// from disk, and an input naming a device or a FIFO would make it read
// forever, which is not what this target looks for.
const fuzzRole = `@prompts/role.md"`

// FuzzParse feeds arbitrary bytes to the swarm.toml parser. It must never
// panic; what it rejects must be reported as *Error values naming the file
// with a line inside it (or none); what it accepts must hold every rule the
// supervisor relies on; and parsing the same input twice must give the same
// answer. The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(Starter())
	f.Add([]byte("[[agent]]\nname = \"a\"\n"))
	f.Add([]byte("[defaults]\nengine = \"script\"\ninterrupt = \"boundary\"\n[[agent]]\nname = \"lead\"\nmode = \"delegate\"\nrole = \"" + fuzzRole + "\n"))
	f.Add([]byte("[engine.claude]\nkind = \"exec\"\npreset = \"claude\"\nprompt = \"file\"\n[[agent]]\nname = \"r\"\nengine = \"claude\"\n"))
	f.Add([]byte("[env]\npass = [\"GH_TOKEN\", \"NPM_TOKEN\"]\n[[agent]]\nname = \"a\"\n"))
	f.Add([]byte("[prompt]\nmessage_cap = 4096\ntask_limit = 0\n[liveness]\nnudge_after = \"0s\"\n[errors]\nbackoff_min = \"2s\"\nbackoff_max = \"1s\"\n[[agent]]\nname = \"x\"\n"))
	root := f.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "prompts"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "prompts", "role.md"), []byte("# Lead\nLead the team.\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !safeRoleFiles(data) {
			return
		}
		cfg, err := Parse(data, "swarm.toml", root)
		again, err2 := Parse(data, "swarm.toml", root)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("two parses disagree: %v / %v", err, err2)
		}
		if err != nil {
			lines := bytes.Count(data, []byte("\n")) + 1
			leaves := leafErrors(err)
			if len(leaves) == 0 {
				t.Fatalf("error without a cause: %v", err)
			}
			for _, e := range leaves {
				var ce *Error
				if !errors.As(e, &ce) {
					t.Fatalf("error %q (%T) is not a *config.Error", e, e)
				}
				if ce.File != "swarm.toml" || ce.Line < 0 || ce.Line > lines || ce.Msg == "" {
					t.Fatalf("error %+v: want file swarm.toml, a line in 0..%d and a message", ce, lines)
				}
			}
			if a, b := sortedLines(err), sortedLines(err2); !slices.Equal(a, b) {
				t.Fatalf("two parses report different errors:\n%q\n%q", a, b)
			}
			return
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("two parses differ:\n%+v\n%+v", cfg, again)
		}
		checkConfig(t, cfg)
	})
}

// safeRoleFiles reports whether every role file data could name is the
// fixture: no '@' but in front of it, and no escapes that could spell one.
func safeRoleFiles(data []byte) bool {
	s := string(data)
	if strings.Contains(s, `\u`) || strings.Contains(s, `\U`) {
		return false
	}
	for i := strings.IndexByte(s, '@'); i >= 0; i = strings.IndexByte(s, '@') {
		if !strings.HasPrefix(s[i:], fuzzRole) {
			return false
		}
		s = s[i+1:]
	}
	return true
}

func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

func sortedLines(err error) []string {
	lines := strings.Split(err.Error(), "\n")
	slices.Sort(lines)
	return lines
}

// checkConfig asserts what the rest of swarm assumes of a parsed config.
func checkConfig(t *testing.T, c *Config) {
	t.Helper()
	if len(c.Agents) == 0 {
		t.Fatal("accepted a config without agents")
	}
	seen := map[string]bool{}
	for _, a := range c.Agents {
		switch {
		case !message.ValidName(a.Name) || a.Name == Operator:
			t.Fatalf("accepted agent name %q", a.Name)
		case seen[a.Name]:
			t.Fatalf("accepted duplicate agent %q", a.Name)
		case !a.Mode.Valid():
			t.Fatalf("agent %s: mode %q", a.Name, a.Mode)
		case a.MaxTurns < 1 || a.SessionTimeout <= 0 || a.InterruptGrace <= 0:
			t.Fatalf("agent %s: max_turns %d, session_timeout %s, interrupt_grace %s", a.Name, a.MaxTurns, a.SessionTimeout, a.InterruptGrace)
		case a.Interrupt != InterruptCancel && a.Interrupt != InterruptBoundary:
			t.Fatalf("agent %s: interrupt %q", a.Name, a.Interrupt)
		}
		seen[a.Name] = true
		if _, err := c.EngineFor(a, ""); err != nil {
			t.Fatalf("agent %s was accepted but its engine is not: %v", a.Name, err)
		}
	}
	for name, e := range c.Engines {
		if (e.APIKeyFile != "" && (e.Kind != EngineGemini || !filepath.IsAbs(e.APIKeyFile))) ||
			(e.EnvFile != "" && (e.Kind != EngineExec || !filepath.IsAbs(e.EnvFile))) {
			t.Fatalf("engine %s: kind %q, api_key_file %q, env_file %q", name, e.Kind, e.APIKeyFile, e.EnvFile)
		}
		switch e.Kind {
		case EngineGemini, EngineScript:
		case EngineExec:
			if (len(e.Command) == 0) == (e.Preset == "") {
				t.Fatalf("engine %s: command %q, preset %q", name, e.Command, e.Preset)
			}
			if !slices.Contains([]string{PromptStdin, PromptArg, PromptFile}, e.Prompt) {
				t.Fatalf("engine %s: prompt %q", name, e.Prompt)
			}
		default:
			t.Fatalf("engine %s: kind %q", name, e.Kind)
		}
	}
	passed := map[string]bool{}
	for _, name := range c.Env.Pass {
		if !envName.MatchString(name) || passed[name] {
			t.Fatalf("[env] pass: accepted %q in %q", name, c.Env.Pass)
		}
		passed[name] = true
	}
	p, l, e := c.Prompt, c.Liveness, c.Errors
	switch {
	case p.MessageCap < 1 || p.TaskLimit < 0 || p.GitTimeout <= 0 || p.BDTimeout <= 0:
		t.Fatalf("prompt settings %+v", p)
	case l.Heartbeat <= 0 || l.NudgeAfter < 0 || l.NudgeEvery <= 0 || l.MaxNudges < 0 || l.TaskPoll <= 0:
		t.Fatalf("liveness settings %+v", l)
	case e.MaxConsecutive < 1 || e.MaxTotal < 1 || e.BackoffMin <= 0 || e.BackoffMax < e.BackoffMin:
		t.Fatalf("error settings %+v", e)
	case c.Mailbox.Retention <= 0:
		t.Fatalf("mailbox retention %s", c.Mailbox.Retention)
	case !filepath.IsAbs(c.Worktree.Dir):
		t.Fatalf("worktree dir %q is not absolute", c.Worktree.Dir)
	}
}
