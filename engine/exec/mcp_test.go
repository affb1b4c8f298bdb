package exec

import (
	"encoding/json"
	"os"
	"path/filepath"
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

	args, env2, err := mcpRegistration(MCPClaude, srv, nil)
	if err != nil || len(args) != 2 || args[0] != "--mcp-config" || env2 != nil {
		t.Fatalf("claude: %q %q %v", args, env2, err)
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

	args, _, err = mcpRegistration(MCPCodex, srv, nil)
	if err != nil || len(args) != 8 {
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
		Command  string
		Args     []string
		Env      map[string]string
		Approval string `toml:"default_tools_approval_mode"`
	}
	if err := toml.Unmarshal([]byte(doc.String()), &got); err != nil {
		t.Fatalf("codex's -c values are not TOML: %v\n%s", err, doc.String())
	}
	if got.Command != srv.Command || !slices.Equal(got.Args, []string{"mcp"}) || got.Env["SWARM_ROOT"] != `/repo "quoted"` || got.Env["SWARM_AGENT"] != "backend2" || got.Approval != "approve" {
		t.Fatalf("codex reads %+v", got)
	}

	home := &geminiHome{Dir: t.TempDir(), User: t.TempDir(), Trust: "/work/tree", Exclude: []string{"write_file"}}
	args, env2, err = mcpRegistration(MCPGemini, srv, home)
	if err != nil || args != nil || !slices.Equal(env2, []string{"GEMINI_CLI_HOME=" + home.Dir}) {
		t.Fatalf("gemini-cli: %q %q %v", args, env2, err)
	}
	settings, err := os.ReadFile(filepath.Join(home.Dir, ".gemini", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(settings, &cfg); err != nil || cfg.MCPServers["swarm"].Env["SWARM_AGENT"] != "backend2" {
		t.Fatalf("gemini-cli settings %s: %v", settings, err)
	}
}

// TestGeminiHome: gemini-cli gets its settings from the session's own
// GEMINI_CLI_HOME (a system settings file outside a root-owned directory
// is skipped), built on the user's: their settings (comments and all) with
// swarm's server and the session's excluded tools added, swarm kept in
// their server lists, the worktree trusted, and their login and other
// files linked in.
func TestGeminiHome(t *testing.T) {
	user := filepath.Join(t.TempDir(), ".gemini")
	if err := os.MkdirAll(filepath.Join(user, "extensions"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(user, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("settings.json", `{
  // the user's own, with comments as gemini-cli allows
  "security": {"auth": {"selectedType": "oauth-personal"}}, /* keep */
  "mcpServers": {"theirs": {"command": "x // not a comment"}},
  "mcp": {"allowed": ["theirs"], "excluded": ["swarm"]},
  "tools": {"exclude": ["web_fetch"]}
}`)
	write("oauth_creds.json", `{"token":"t"}`)
	write("trustedFolders.json", `{"/home/me/src":"TRUST_FOLDER"}`)
	env := []string{"HOME=/nowhere", "GEMINI_CLI_HOME=" + filepath.Dir(user)}
	if got := userGeminiDir(env); got != user {
		t.Fatalf("userGeminiDir = %s, want %s ($GEMINI_CLI_HOME wins over $HOME)", got, user)
	}
	if got := userGeminiDir([]string{"HOME=/home/me"}); got != "/home/me/.gemini" {
		t.Fatalf("userGeminiDir = %s", got)
	}

	g := &geminiHome{Dir: t.TempDir(), User: user, Trust: "/work/tree", Exclude: []string{"write_file", "replace", "web_fetch"}}
	if err := g.write(newMCPServer([]string{"SWARM_AGENT=critic"})); err != nil {
		t.Fatal(err)
	}
	if g.SettingsPath() != filepath.Join(g.Dir, ".gemini", "settings.json") {
		t.Fatalf("settings path %s", g.SettingsPath())
	}
	var got struct {
		Security   map[string]any `json:"security"`
		MCPServers map[string]struct {
			Command string
			Env     map[string]string
			Trust   bool
		} `json:"mcpServers"`
		MCP struct {
			Allowed, Excluded []string
		} `json:"mcp"`
		Tools struct {
			Exclude []string
		} `json:"tools"`
	}
	b, err := os.ReadFile(g.SettingsPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Security == nil || got.MCPServers["theirs"].Command != "x // not a comment" || !got.MCPServers["swarm"].Trust || got.MCPServers["swarm"].Env["SWARM_AGENT"] != "critic" {
		t.Fatalf("settings keep the user's and add swarm's:\n%s", b)
	}
	if !slices.Equal(got.MCP.Allowed, []string{"theirs", "swarm"}) || len(got.MCP.Excluded) != 0 {
		t.Fatalf("swarm must pass the user's server lists: %+v", got.MCP)
	}
	if !slices.Equal(got.Tools.Exclude, []string{"web_fetch", "write_file", "replace"}) {
		t.Fatalf("tools.exclude = %q", got.Tools.Exclude)
	}
	trusted, err := readJSONObject(filepath.Join(g.Dir, ".gemini", "trustedFolders.json"))
	if err != nil || trusted["/work/tree"] != "TRUST_FOLDER" || trusted["/home/me/src"] != "TRUST_FOLDER" {
		t.Fatalf("trusted folders %v %v", trusted, err)
	}
	for _, name := range []string{"oauth_creds.json", "extensions"} {
		if dest, err := os.Readlink(filepath.Join(g.Dir, ".gemini", name)); err != nil || dest != filepath.Join(user, name) {
			t.Fatalf("%s is not linked to the user's: %q %v", name, dest, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(user, "settings.json")); !strings.Contains(string(b), "// the user's own") {
		t.Fatal("the user's settings were changed")
	}

	// A user without a gemini-cli directory gets swarm's settings alone.
	g2 := &geminiHome{Dir: t.TempDir(), User: filepath.Join(t.TempDir(), ".gemini")}
	if err := g2.write(newMCPServer(nil)); err != nil {
		t.Fatal(err)
	}
	// A broken settings file is an error that says to fix it.
	write("settings.json", `{"tools": `)
	err = (&geminiHome{Dir: t.TempDir(), User: user}).write(newMCPServer(nil))
	if err == nil || !strings.Contains(err.Error(), "fix the file") {
		t.Fatalf("broken settings: %v", err)
	}
}

func TestParseGeminiMCPList(t *testing.T) {
	out := "Warning: tools.exclude in settings.json is deprecated and will be removed in 1.0.\nConfigured MCP servers:\n\n\u2713 swarm: /usr/bin/swarm mcp (stdio) - Connected\n"
	l := parseGeminiMCPList([]byte(out))
	if !l.Listed || l.Status != "Connected" || len(l.Warnings) != 0 {
		t.Fatalf("%+v", l)
	}
	if s := l.String(); s != "gemini-cli loaded swarm's MCP server and connected to it" {
		t.Fatal(s)
	}
	l = parseGeminiMCPList([]byte("Security Warning: Skipping system settings file '/tmp/x/settings.json': Parent directory '/tmp' is insecure\nNo MCP servers configured.\n"))
	if l.Listed || len(l.Warnings) != 1 || !strings.Contains(l.String(), "did not load") {
		t.Fatalf("%+v %s", l, l)
	}
	if s := geminiLimits(l, &geminiHome{Exclude: []string{"write_file"}}); !strings.Contains(s, "NOT applied") {
		t.Fatal(s)
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
