package exec

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/swarmhq/swarm/internal/front"
)

// How a preset's CLI learns of an MCP server (Preset.MCP).
const (
	MCPClaude = "claude"     // --mcp-config '<json>'
	MCPCodex  = "codex"      // -c mcp_servers.swarm.<key>=<toml>
	MCPGemini = "gemini-cli" // the session's own GEMINI_CLI_HOME, whose .gemini/settings.json names it
)

// MCPServerName is the name the swarm's MCP server is registered under:
// claude calls its tools mcp__swarm__<tool>.
const MCPServerName = "swarm"

// mcpEnvKeys are the variables the MCP server gets from the session. Codex
// starts its servers with a minimal environment, so they are passed
// explicitly to every CLI.
var mcpEnvKeys = []string{"SWARM_AGENT", "SWARM_SESSION_ID", "SWARM_SESSION_SEQ", "SWARM_DB", "SWARM_AGENTS", "SWARM_ROOT",
	"SWARM_DOOR", "SWARM_MCP_PROBE", "PATH", "HOME", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}

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
	if exe, err := os.Executable(); err == nil && front.IsSwarm(exe) {
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
// after the preset's command and variables to add to its environment.
// gemini-cli is told through files: gem says where (nil for the others).
func mcpRegistration(kind string, srv mcpServer, gem *geminiHome) (args, env []string, err error) {
	switch kind {
	case MCPClaude:
		cfg := map[string]any{"mcpServers": map[string]any{MCPServerName: map[string]any{
			"type": "stdio", "command": srv.Command, "args": srv.Args, "env": srv.Env}}}
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, nil, err
		}
		return []string{"--mcp-config", string(b)}, nil, nil
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
			// Under a sandbox (a review session's read-only one) codex
			// exec asks approval for every MCP call and, never allowed
			// to ask, refuses it ("MCP tool call requires approval, but
			// approval policy is never"). swarm's tools check the
			// session's capabilities themselves.
			"-c", p + "default_tools_approval_mode=" + q("approve"),
		}, nil, nil
	case MCPGemini:
		if gem == nil {
			return nil, nil, fmt.Errorf("gemini-cli needs a home for its settings")
		}
		if err := gem.write(srv); err != nil {
			return nil, nil, err
		}
		return nil, []string{"GEMINI_CLI_HOME=" + gem.Dir}, nil
	}
	return nil, nil, fmt.Errorf("unknown MCP registration %q", kind)
}
