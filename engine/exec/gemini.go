package exec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/proc"
)

// gemini-cli reads settings from a system file, the user's
// ~/.gemini/settings.json and the workspace's .gemini/settings.json. The
// system file is what an operator would use, but gemini-cli 0.61.0 skips
// one whose parent directories are not root-owned and closed ("Security
// Warning: Skipping system settings file"), which no file a non-root user
// writes can be, and /tmp never is. The user file has no such check, and
// GEMINI_CLI_HOME moves it (paths.ts: homedir() is $GEMINI_CLI_HOME when
// set; Storage.getGlobalSettingsPath is <home>/.gemini/settings.json). So
// each session gets its own home, built from the user's.

// geminiDir is gemini-cli's directory under its home.
const geminiDir = ".gemini"

// geminiHome is one session's GEMINI_CLI_HOME.
type geminiHome struct {
	Dir string // the session's home, private to it
	// User is the user's own gemini-cli directory ($GEMINI_CLI_HOME/.gemini,
	// else $HOME/.gemini): its settings are the base of the session's, and
	// its other entries (the login, GEMINI.md, extensions, chats) are
	// linked in, so the CLI works as it does for the user.
	User string
	// Trust is the worktree, trusted in the session's trustedFolders.json
	// (the preset runs with --skip-trust; `gemini mcp list`, which has no
	// such flag, needs it to show the server).
	Trust   string
	Exclude []string // the session's limits: tools gemini-cli never offers
}

// userGeminiDir is the user's gemini-cli directory as env names it.
func userGeminiDir(env []string) string {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vals[k] = v // later entries win, as in exec
		}
	}
	home := vals["GEMINI_CLI_HOME"]
	if home == "" {
		home = vals["HOME"]
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, geminiDir)
}

// SettingsPath is where gemini-cli reads the session's settings.
func (g *geminiHome) SettingsPath() string {
	return filepath.Join(g.Dir, geminiDir, "settings.json")
}

// write builds the session's home: the user's settings with srv added as
// the "swarm" server and the session's excluded tools added to theirs, the
// worktree trusted, and everything else of the user's directory linked.
func (g *geminiHome) write(srv mcpServer) error {
	dir := filepath.Join(g.Dir, geminiDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("gemini-cli home: %w", err)
	}
	settings, err := readJSONObject(filepath.Join(g.User, "settings.json"))
	if err != nil {
		return fmt.Errorf("gemini-cli settings: %w; fix the file (gemini-cli refuses it too)", err)
	}
	servers := object(settings, "mcpServers")
	servers[MCPServerName] = map[string]any{"command": srv.Command, "args": srv.Args, "env": srv.Env, "trust": true}
	// The user's own allow and deny lists of servers must not drop swarm's.
	if mcp, ok := settings["mcp"].(map[string]any); ok {
		if allowed, ok := mcp["allowed"].([]any); ok && len(allowed) > 0 && !slices.Contains(allowed, any(MCPServerName)) {
			mcp["allowed"] = append(allowed, MCPServerName)
		}
		if excluded, ok := mcp["excluded"].([]any); ok {
			mcp["excluded"] = slices.DeleteFunc(excluded, func(v any) bool { return v == MCPServerName })
		}
	}
	if len(g.Exclude) > 0 {
		tools := object(settings, "tools")
		exclude, _ := tools["exclude"].([]any)
		for _, t := range g.Exclude {
			if !slices.Contains(exclude, any(t)) {
				exclude = append(exclude, t)
			}
		}
		tools["exclude"] = exclude
	}
	if err := writeJSON(g.SettingsPath(), settings); err != nil {
		return err
	}
	trusted, err := readJSONObject(filepath.Join(g.User, "trustedFolders.json"))
	if err != nil {
		trusted = map[string]any{} // gemini-cli ignores a broken one too
	}
	if g.Trust != "" {
		trusted[g.Trust] = "TRUST_FOLDER"
	}
	if err := writeJSON(filepath.Join(dir, "trustedFolders.json"), trusted); err != nil {
		return err
	}
	entries, err := os.ReadDir(g.User)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("gemini-cli home: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "settings.json" && n != "trustedFolders.json" {
			if err := os.Symlink(filepath.Join(g.User, n), filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("gemini-cli home: %w", err)
			}
		}
	}
	return nil
}

// object is m[key] as an object, made one when it is not.
func object(m map[string]any, key string) map[string]any {
	o, ok := m[key].(map[string]any)
	if !ok {
		o = map[string]any{}
		m[key] = o
	}
	return o
}

// readJSONObject reads a JSON object with comments, as gemini-cli reads
// its settings (strip-json-comments, then JSON.parse). A missing file is
// an empty object.
func readJSONObject(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if len(bytes.TrimSpace(b)) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(stripJSONComments(b), &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("gemini-cli home: %w", err)
	}
	return nil
}

// stripJSONComments blanks // and /* */ comments outside strings.
func stripJSONComments(b []byte) []byte {
	out := slices.Clone(b)
	inString, escaped := false, false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			stop := len(out)
			if end >= 0 {
				stop = i + 2 + end + 2
			}
			for ; i < stop; i++ {
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
			i--
		}
	}
	return out
}

// geminiProbeTimeout bounds `gemini mcp list`, which starts the server.
const geminiProbeTimeout = time.Minute

// GeminiLoaded is what gemini-cli says it loaded from a session's home.
type GeminiLoaded struct {
	Listed   bool     // the swarm server is configured: the settings file was read
	Status   string   // the server's status as listed: Connected, Disconnected, Disabled
	Warnings []string // what gemini-cli printed about its settings or servers
}

// String is the finding as the session log and swarm doctor print it.
func (l GeminiLoaded) String() string {
	var s string
	switch {
	case !l.Listed:
		s = "gemini-cli did not load swarm's MCP server (its settings were not read)"
	case l.Status == "Connected":
		s = "gemini-cli loaded swarm's MCP server and connected to it"
	default:
		s = fmt.Sprintf("gemini-cli loaded swarm's MCP server, status %s", strings.ToLower(l.Status))
	}
	if len(l.Warnings) > 0 {
		s += ": " + strings.Join(l.Warnings, "; ")
	}
	return s
}

// probeGemini asks gemini-cli (bin) what it loads in dir with env, by
// `gemini mcp list`: the swarm server is listed only when the settings
// file swarm wrote was read, and "Connected" when `swarm mcp` started and
// answered.
func probeGemini(ctx context.Context, bin, dir string, env []string) (GeminiLoaded, error) {
	res, err := proc.Run(ctx, proc.Spec{Dir: dir, Env: env, Timeout: geminiProbeTimeout}, bin, "mcp", "list")
	var ee *proc.ExitError
	if err != nil && !errors.As(err, &ee) {
		return GeminiLoaded{}, fmt.Errorf("gemini mcp list: %w", err)
	}
	out := parseGeminiMCPList(append(res.Stdout, res.Stderr...))
	if err != nil && !out.Listed {
		return out, fmt.Errorf("gemini mcp list: %w", err)
	}
	return out, nil
}

// parseGeminiMCPList reads `gemini mcp list`'s output, a line per server
// ("✓ swarm: /path/swarm mcp (stdio) - Connected") after warnings.
func parseGeminiMCPList(out []byte) GeminiLoaded {
	var l GeminiLoaded
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		_, rest, ok := strings.Cut(line, " "+MCPServerName+": ")
		if ok && !l.Listed {
			l.Listed = true
			if i := strings.LastIndex(rest, " - "); i >= 0 {
				l.Status = strings.TrimSpace(rest[i+3:])
			}
			continue
		}
		low := strings.ToLower(line)
		// The deprecation of tools.exclude is noise here: it still applies.
		if (strings.Contains(low, "warning") || strings.Contains(low, "error")) && !strings.Contains(low, "deprecated") {
			l.Warnings = append(l.Warnings, line)
		}
	}
	return l
}

// geminiLimits says whether the session's limits took: they are in the
// same file as the server, so they did when the server is listed.
func geminiLimits(l GeminiLoaded, g *geminiHome) string {
	switch {
	case len(g.Exclude) == 0:
		return ""
	case l.Listed:
		return "; its limits (tools.exclude " + strings.Join(g.Exclude, ",") + ") are read from the same file"
	default:
		return "; its limits (tools.exclude " + strings.Join(g.Exclude, ",") + ") are NOT applied"
	}
}

// ProbeGemini asks a gemini-cli preset's CLI what it loads with the
// settings a session of agent with capabilities caps would get, built in
// a temporary home, in dir (swarm doctor: the repository). env is the
// environment a session would start from; `swarm mcp` runs without a
// door in its probe mode, so a connection says only that the server
// starts. ok is false for an engine that is not gemini-cli.
func (e *Engine) ProbeGemini(ctx context.Context, dir string, env []string, agent string, caps mode.Vector) (loaded GeminiLoaded, ok bool, err error) {
	if e.mcp != MCPGemini {
		return GeminiLoaded{}, false, nil
	}
	home, err := os.MkdirTemp("", "swarm-gemini-")
	if err != nil {
		return GeminiLoaded{}, true, fmt.Errorf("gemini-cli home: %w", err)
	}
	defer os.RemoveAll(home)
	env = append(slices.Clip(env), e.env...)
	// No session, no door: `swarm mcp` starts with no tools
	// (SWARM_MCP_PROBE), which is all a connection needs to show.
	env = append(env, "SWARM_AGENT="+agent, "SWARM_MCP_PROBE=1", "SWARM_ROOT="+dir)
	g := &geminiHome{Dir: home, User: userGeminiDir(env), Trust: dir, Exclude: limitsFor(e.mcp, caps).exclude}
	_, menv, err := mcpRegistration(e.mcp, newMCPServer(env), g)
	if err != nil {
		return GeminiLoaded{}, true, err
	}
	loaded, err = probeGemini(ctx, e.argv[0], dir, append(env, menv...))
	return loaded, true, err
}
