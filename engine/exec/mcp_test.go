package exec

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
)

func TestMCPRegistration(t *testing.T) {
	env := []string{"SWARM_AGENT=backend", "SWARM_SESSION_ID=backend-3", "GEMINI_API_KEY=secret", "PATH=/bin", `SWARM_ROOT=/repo "quoted"`, "SWARM_AGENT=backend2"}
	srv := newMCPServer(env)
	if srv.Env["SWARM_AGENT"] != "backend2" || srv.Env["GEMINI_API_KEY"] != "" || srv.Env["PATH"] != "/bin" || !slices.Equal(srv.Args, []string{"mcp"}) {
		t.Fatalf("server %+v: the session's identity, the last value winning, and no credential", srv)
	}

	args, env2, settings, err := mcpRegistration(MCPClaude, srv, "", nil)
	if err != nil || len(args) != 2 || args[0] != "--mcp-config" || env2 != nil || settings != nil {
		t.Fatalf("claude: %q %q %s %v", args, env2, settings, err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type, Command string
			Args          []string
			Env           map[string]string
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(args[1]), &cfg); err != nil {
		t.Fatal(err)
	}
	if s := cfg.MCPServers["swarm"]; s.Type != "stdio" || s.Env["SWARM_SESSION_ID"] != "backend-3" || s.Env["SWARM_ROOT"] != `/repo "quoted"` {
		t.Fatalf("claude's config %+v", cfg)
	}

	args, _, _, err = mcpRegistration(MCPCodex, srv, "", nil)
	if err != nil || len(args) != 6 {
		t.Fatalf("codex: %q %v", args, err)
	}
	// Each -c value is key=TOML: read them back as codex would.
	var doc strings.Builder
	for i := 1; i < len(args); i += 2 {
		if args[i-1] != "-c" {
			t.Fatalf("codex args %q", args)
		}
		k, v, _ := strings.Cut(args[i], "=")
		doc.WriteString(strings.TrimPrefix(k, "mcp_servers.swarm.") + " = " + v + "\n")
	}
	var got struct {
		Command string
		Args    []string
		Env     map[string]string
	}
	if err := toml.Unmarshal([]byte(doc.String()), &got); err != nil {
		t.Fatalf("codex's -c values are not TOML: %v\n%s", err, doc.String())
	}
	if got.Command != srv.Command || !slices.Equal(got.Args, []string{"mcp"}) || got.Env["SWARM_ROOT"] != `/repo "quoted"` || got.Env["SWARM_AGENT"] != "backend2" {
		t.Fatalf("codex reads %+v", got)
	}

	args, env2, settings, err = mcpRegistration(MCPGemini, srv, "/tmp/x/settings.json", []string{"write_file"})
	if err != nil || args != nil || !slices.Equal(env2, []string{"GEMINI_CLI_SYSTEM_SETTINGS_PATH=/tmp/x/settings.json"}) {
		t.Fatalf("gemini-cli: %q %q %v", args, env2, err)
	}
	if err := json.Unmarshal(settings, &cfg); err != nil || cfg.MCPServers["swarm"].Env["SWARM_AGENT"] != "backend2" {
		t.Fatalf("gemini-cli settings %s: %v", settings, err)
	}
}

// TestMCPArgsGoAfterTheModel: the registration sits after the preset's
// command and model flag, before the user's args and the prompt, and is
// not expanded as a template.
func TestMCPArgsGoAfterTheModel(t *testing.T) {
	e, err := New(Options{Preset: "claude", Args: []string{"--max-turns", "3"}, Prompt: "arg"})
	if err != nil {
		t.Fatal(err)
	}
	argv, _, err := e.args("opus", "do {model} it", "", []string{"--mcp-config", `{"x":"{prompt}"}`})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	want := `claude -p --output-format stream-json --verbose --dangerously-skip-permissions --model opus --mcp-config {"x":"{prompt}"} --max-turns 3 -- do {model} it`
	if got != want {
		t.Fatalf("argv\n%s\nwant\n%s", got, want)
	}
}
