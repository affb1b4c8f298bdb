package exec_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/mode"
)

// fakeGemini is a gemini on PATH that reads its settings as gemini-cli
// 0.61.0 does where it matters here: the user settings in
// ${GEMINI_CLI_HOME:-$HOME}/.gemini/settings.json, and no system settings
// file outside a root-owned closed directory (so none under /tmp: it
// ignores GEMINI_CLI_SYSTEM_SETTINGS_PATH). A session saves the settings it
// saw in $SEEN; `gemini mcp list` lists the swarm server when they name it.
const fakeGemini = `#!/bin/sh
s="${GEMINI_CLI_HOME:-$HOME}/.gemini/settings.json"
if [ "$1" = mcp ] && [ "$2" = list ]; then
	if grep -q '"swarm"' "$s" 2>/dev/null; then
		printf 'Configured MCP servers:\n\n\342\234\223 swarm: swarm mcp (stdio) - Connected\n'
	else
		echo "No MCP servers configured."
	fi
	exit 0
fi
cat "$s" > "$SEEN" 2>/dev/null || echo '{}' > "$SEEN"
cat > /dev/null
`

// TestGeminiSessionSettings: a review session of the gemini-cli preset
// hands gemini-cli swarm's MCP server and its limits (tools.exclude) in
// settings gemini-cli reads for any user, its own ~/.gemini settings kept,
// and its log says what gemini-cli loaded.
func TestGeminiSessionSettings(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "gemini"), []byte(fakeGemini), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	seen := filepath.Join(t.TempDir(), "seen.json")

	s := newSession(t, "review this")
	s.Mode = mode.Review
	s.Caps = mode.Spec{Mode: mode.Review}.Vector()
	var env []string
	for _, kv := range s.Env {
		if k, _, _ := strings.Cut(kv, "="); k != "PATH" && k != "HOME" && k != "GEMINI_CLI_HOME" {
			env = append(env, kv)
		}
	}
	path := bin + string(os.PathListSeparator) + os.Getenv("PATH")
	t.Setenv("PATH", path) // exec finds the command on swarm's own PATH
	s.Env = append(env, "PATH="+path, "HOME="+home, "SEEN="+seen)
	e := mustNew(t, execengine.Options{Name: "gemini-cli", Preset: "gemini-cli"})
	if res := e.Run(context.Background(), s.Session); res.Outcome != engine.Success {
		t.Fatalf("result %+v\n%s", res, s.log.String())
	}

	var got struct {
		Security   map[string]any            `json:"security"`
		MCPServers map[string]map[string]any `json:"mcpServers"`
		Tools      struct {
			Exclude []string `json:"exclude"`
		} `json:"tools"`
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("settings gemini-cli saw: %v\n%s", err, b)
	}
	if got.MCPServers["swarm"] == nil {
		t.Fatalf("gemini-cli saw no swarm MCP server in its settings:\n%s\n%s", b, s.log.String())
	}
	for _, tool := range []string{"write_file", "replace", "run_shell_command"} {
		if !slices.Contains(got.Tools.Exclude, tool) {
			t.Fatalf("a review session's gemini-cli does not exclude %s: %q", tool, got.Tools.Exclude)
		}
	}
	if got.Security == nil {
		t.Fatalf("the user's own settings were dropped:\n%s", b)
	}
	log := s.log.String()
	for _, want := range []string{
		"=== limits: tools.exclude write_file,replace,run_shell_command",
		"=== mcp: gemini-cli loaded swarm's MCP server and connected to it; its limits (tools.exclude write_file,replace,run_shell_command) are read from the same file",
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %q:\n%s", want, log)
		}
	}

	// swarm doctor's question, with the same settings.
	loaded, ok, err := e.ProbeGemini(context.Background(), s.Worktree, s.Env, "alice", s.Caps)
	if err != nil || !ok || !loaded.Listed || loaded.Status != "Connected" {
		t.Fatalf("ProbeGemini = %+v %v %v", loaded, ok, err)
	}
	if _, ok, _ := mustNew(t, execengine.Options{Preset: "codex"}).ProbeGemini(context.Background(), s.Worktree, s.Env, "alice", s.Caps); ok {
		t.Fatal("ProbeGemini of codex")
	}
}
