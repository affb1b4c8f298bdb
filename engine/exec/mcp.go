package exec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// How a preset's CLI learns of an MCP server (Preset.MCP).
const (
	MCPClaude = "claude"     // --mcp-config '<json>'
	MCPCodex  = "codex"      // -c mcp_servers.swarm.<key>=<toml>
	MCPGemini = "gemini-cli" // a settings file named by GEMINI_CLI_SYSTEM_SETTINGS_PATH
)

// MCPServerName is the name the swarm's MCP server is registered under:
// claude calls its tools mcp__swarm__<tool>.
const MCPServerName = "swarm"

// mcpEnvKeys are the variables the MCP server gets from the session. Codex
// starts its servers with a minimal environment, so they are passed
// explicitly to every CLI.
var mcpEnvKeys = []string{"SWARM_AGENT", "SWARM_SESSION_ID", "SWARM_SESSION_SEQ", "SWARM_DB", "SWARM_AGENTS", "SWARM_ROOT",
	"SWARM_DOOR", "PATH", "HOME", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}

// mcpServer is `swarm mcp` as a session's CLI starts it.
type mcpServer struct {
	Command string
	Args    []string
	Env     map[string]string
}

// newMCPServer is the session's `swarm mcp`: the running swarm binary (or
// swarm from PATH), with the session's identity from env.
func newMCPServer(env []string) mcpServer {
	cmd := "swarm"
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "swarm" {
		cmd = exe
	}
	srv := mcpServer{Command: cmd, Args: []string{"mcp"}, Env: map[string]string{}}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(mcpEnvKeys, k) {
			srv.Env[k] = v // later entries win, as in exec
		}
	}
	return srv
}

// mcpRegistration returns what registers srv with the CLI: arguments to add
// after the preset's command, variables to add to its environment, and the
// content of a settings file to write at settingsPath (gemini-cli, which
// also takes the tools a session may not use there).
func mcpRegistration(kind string, srv mcpServer, settingsPath string, exclude []string) (args, env []string, settings []byte, err error) {
	switch kind {
	case MCPClaude:
		cfg := map[string]any{"mcpServers": map[string]any{MCPServerName: map[string]any{
			"type": "stdio", "command": srv.Command, "args": srv.Args, "env": srv.Env}}}
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		return []string{"--mcp-config", string(b)}, nil, nil, nil
	case MCPCodex:
		// -c values are TOML; a JSON string is a valid TOML basic string.
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		items := make([]string, len(srv.Args))
		for i, a := range srv.Args {
			items[i] = q(a)
		}
		keys := make([]string, 0, len(srv.Env))
		for k := range srv.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + " = " + q(srv.Env[k])
		}
		p := "mcp_servers." + MCPServerName + "."
		return []string{
			"-c", p + "command=" + q(srv.Command),
			"-c", p + "args=[" + strings.Join(items, ", ") + "]",
			"-c", p + "env={" + strings.Join(pairs, ", ") + "}",
		}, nil, nil, nil
	case MCPGemini:
		cfg := map[string]any{"mcpServers": map[string]any{MCPServerName: map[string]any{
			"command": srv.Command, "args": srv.Args, "env": srv.Env, "trust": true}}}
		if len(exclude) > 0 {
			// The session's limits: gemini-cli never offers these tools.
			cfg["tools"] = map[string]any{"exclude": exclude}
		}
		b, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			return nil, nil, nil, err
		}
		return nil, []string{"GEMINI_CLI_SYSTEM_SETTINGS_PATH=" + settingsPath}, b, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown MCP registration %q", kind)
}
