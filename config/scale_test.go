package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mode"
)

// manyAgents returns a swarm.toml with n agents, each overriding a few
// settings, as a large generated swarm would.
func manyAgents(n int) []byte {
	var sb strings.Builder
	sb.WriteString("[defaults]\nengine = \"script\"\nsession_timeout = \"10m\"\n\n")
	for i := range n {
		fmt.Fprintf(&sb, "[[agent]]\nname = \"agent-%d\"\nrole = \"You are agent %d.\"\n", i, i)
		if i%2 == 0 {
			sb.WriteString("mode = \"review\"\nmax_turns = 7\n")
		}
		sb.WriteString("\n")
	}
	return []byte(sb.String())
}

func benchmarkParse(b *testing.B, n int) {
	data := manyAgents(n)
	root := b.TempDir()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Parse(data, "swarm.toml", root); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse1k(b *testing.B)  { benchmarkParse(b, 1000) }
func BenchmarkParse4k(b *testing.B)  { benchmarkParse(b, 4000) }
func BenchmarkParse10k(b *testing.B) { benchmarkParse(b, 10000) }

// TestParseManyAgents parses 10,000 agents and checks what came out,
// including that an error at the last one names its line. How fast that is
// is measured by BenchmarkParse10k, not asserted here.
func TestParseManyAgents(t *testing.T) {
	const n = 10000
	data := manyAgents(n)
	cfg, err := Parse(data, "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Agents) != n || len(cfg.AgentNames()) != n {
		t.Fatalf("%d agents, want %d", len(cfg.Agents), n)
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		name := fmt.Sprintf("agent-%d", i)
		a, ok := cfg.Agent(name)
		if !ok || a.Name != name || a.Role != fmt.Sprintf("You are agent %d.", i) || a.Engine != EngineScript || a.SessionTimeout != 10*time.Minute {
			t.Fatalf("Agent(%q) = %+v, %v", name, a, ok)
		}
		wantMode, wantTurns := mode.ExecuteMode, 100
		if i%2 == 0 {
			wantMode, wantTurns = mode.Review, 7
		}
		if a.Mode != wantMode || a.MaxTurns != wantTurns {
			t.Fatalf("agent %d: mode %s, max_turns %d", i, a.Mode, a.MaxTurns)
		}
		if cfg.Agents[i].Name != name {
			t.Fatalf("agent %d is %q: config order lost", i, cfg.Agents[i].Name)
		}
	}
	if _, ok := cfg.Agent(fmt.Sprintf("agent-%d", n)); ok {
		t.Fatal("found an agent that is not there")
	}

	// A mistake in the last agent, and a repeat of the first, are reported
	// at their own lines.
	bad := append(slices.Clone(data), "[[agent]]\nname = \"agent-0\"\nmax_turns = 0\n"...)
	last := bytes.Count(data, []byte("\n"))
	_, err = Parse(bad, "swarm.toml", t.TempDir())
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		fmt.Sprintf("swarm.toml:%d: duplicate agent name \"agent-0\" (first defined on line 6)", last+2),
		fmt.Sprintf("swarm.toml:%d: max_turns must be at least 1", last+3),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// TestAgentLookupAfterChange checks that Agent stays right when a caller
// edits Agents after parsing, which its index must not hide.
func TestAgentLookupAfterChange(t *testing.T) {
	cfg, err := Parse(manyAgents(3), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agents = slices.Delete(cfg.Agents, 0, 1)
	if _, ok := cfg.Agent("agent-0"); ok {
		t.Error("found a removed agent")
	}
	for _, name := range []string{"agent-1", "agent-2"} {
		if a, ok := cfg.Agent(name); !ok || a.Name != name {
			t.Errorf("Agent(%q) = %+v, %v", name, a, ok)
		}
	}
	cfg.Agents = append(cfg.Agents, Agent{Name: "late"})
	if _, ok := cfg.Agent("late"); !ok {
		t.Error("an appended agent is not found")
	}
	var zero Config
	if _, ok := zero.Agent("x"); ok {
		t.Error("found an agent in an empty config")
	}
}

// TestManyUnknownKeys checks that 10,000 agents each with a misspelt key
// get 10,000 errors at the right lines. The decoder's own unknown-key
// errors took 14 s for this; BenchmarkParse10kUnknownKeys measures it.
func TestManyUnknownKeys(t *testing.T) {
	const n = 10000
	_, err := Parse(misspeltAgents(n), "swarm.toml", t.TempDir())
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != n {
		t.Fatalf("%d errors, want %d", len(lines), n)
	}
	for _, i := range []int{0, n - 1} {
		want := fmt.Sprintf(`swarm.toml:%d: unknown key "engin" in [[agent]]; did you mean "engine"?`, 3*i+3)
		if lines[i] != want {
			t.Errorf("error %d = %q, want %q", i, lines[i], want)
		}
	}
}

func misspeltAgents(n int) []byte {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "[[agent]]\nname = \"agent-%d\"\nengin = \"script\"\n", i)
	}
	return []byte(sb.String())
}

func BenchmarkParse10kUnknownKeys(b *testing.B) {
	data := misspeltAgents(10000)
	root := b.TempDir()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "swarm.toml", root); err == nil {
			b.Fatal("no error")
		}
	}
}

// TestSharedRoleFile checks that agents sharing a role file all get it.
func TestSharedRoleFile(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "prompts", "worker.md"), "  Work.\n", 0o644)
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, "[[agent]]\nname = \"w%d\"\nrole = \"@prompts/worker.md\"\n", i)
	}
	cfg, err := Parse([]byte(sb.String()), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.Agents {
		if a.Role != "Work." || a.RoleFile != "prompts/worker.md" {
			t.Fatalf("agent %s: role %q from %q", a.Name, a.Role, a.RoleFile)
		}
	}
	_, err = Parse([]byte(sb.String()), "swarm.toml", t.TempDir())
	if err == nil || strings.Count(err.Error(), "role file prompts/worker.md: no such file") != 1000 {
		t.Errorf("a missing shared role file is not reported at each agent: %.300v", err)
	}
}
