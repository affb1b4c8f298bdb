package exec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Placeholders in a command's arguments.
const (
	PromptPlaceholder     = "{prompt}"
	PromptFilePlaceholder = "{prompt_file}"
	ModelPlaceholder      = "{model}" // the session's model (config.ModelPlaceholder)
)

// Preset is a published CLI agent's headless command line, as data.
//
// The argv is Command, then Model when a model is set, then the user's args,
// then Stdin or Arg depending on how the prompt is passed. The prompt comes last so that a user's variadic
// flag (claude's --allowedTools a b ...) cannot swallow it; "--" ends the
// options before it where the CLI allows.
type Preset struct {
	Name    string
	Command []string // headless, tools auto-approved, output as JSON events
	Model   []string // added when a model is set; holds {model}
	Stdin   []string // appended when the prompt goes on stdin
	Arg     []string // appended when prompt = "arg"; holds {prompt}
	Env     []string // always added to the environment
	RootEnv []string // added when swarm runs as root
	Install string   // how to get the command
	// Keys are the environment variables that carry the CLI's API key;
	// one set is enough.
	Keys []string
	// Logins are files, relative to the home directory, that a login of
	// the CLI leaves behind; one present is enough. $CODEX_HOME-style
	// overrides are in LoginDirEnv.
	Logins []string
	// LoginDirEnv names a variable that moves the CLI's home directory
	// (CODEX_HOME); Logins are then looked for under it too, by their
	// base names.
	LoginDirEnv string
	// Login is how to log in instead of setting a key.
	Login string
	// MCP is how the CLI is told of swarm's MCP server (MCPClaude,
	// MCPCodex, MCPGemini): every session of a preset gets `swarm mcp`.
	MCP string
	// State is what the CLI writes in the home directory. In a sandbox
	// each session gets its own copy of those directories (the user's
	// stay untouched: a session cannot plant hooks or MCP servers in the
	// operator's own CLI), with the login and settings files bound
	// read-only into it.
	State presetState
}

// presetState is what a CLI keeps under $HOME (paths relative to it).
type presetState struct {
	dirs  []string // written during a session
	files []string // read: logins and settings
	env   []string // set inside the sandbox ({home} is $HOME)
}

// Credentials reports whether the preset's CLI looks able to authenticate:
// a key in env (NAME=value entries; later ones win) or a login file under
// home. It never reads a file's contents. The answer says what was found,
// or what to do; false is a warning, not proof: a CLI may keep its login
// elsewhere (the macOS keychain, say).
func (p Preset) Credentials(env []string, home string) (string, bool) {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vals[k] = v
		}
	}
	for _, k := range p.Keys {
		if vals[k] != "" {
			return k + " is set", true
		}
	}
	var files []string
	if d := vals[p.LoginDirEnv]; p.LoginDirEnv != "" && d != "" {
		for _, f := range p.Logins {
			files = append(files, filepath.Join(d, filepath.Base(f)))
		}
	}
	if home != "" {
		for _, f := range p.Logins {
			files = append(files, filepath.Join(home, f))
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			return "logged in (" + f + ")", true
		}
	}
	where := make([]string, len(p.Logins))
	for i, f := range p.Logins {
		where[i] = "~/" + f
	}
	return fmt.Sprintf("no %s set and no login found (%s); set one, or %s", strings.Join(p.Keys, " or "), strings.Join(where, ", "), p.Login), false
}

// Presets are the built-in CLI agents. Each was checked against the
// published CLI (see the package doc for versions and what was observed).
var Presets = map[string]Preset{
	// claude -p reads the prompt from stdin when none is given.
	// stream-json needs --verbose with -p ("When using --print,
	// --output-format=stream-json requires --verbose"). As root,
	// --dangerously-skip-permissions refuses to run ("cannot be used with
	// root/sudo privileges") unless IS_SANDBOX=1.
	"claude": {
		Name:    "claude",
		Command: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"},
		Model:   []string{"--model", ModelPlaceholder},
		Arg:     []string{"--", PromptPlaceholder},
		RootEnv: []string{"IS_SANDBOX=1"},
		Install: "npm install -g @anthropic-ai/claude-code",
		Keys:    []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
		Logins:  []string{".claude/.credentials.json"},
		Login:   "log in once by running claude and /login",
		MCP:     MCPClaude,
		// CLAUDE_CONFIG_DIR moves ~/.claude.json (rewritten by rename in
		// $HOME, which is read-only in a sandbox) into ~/.claude.
		State: presetState{dirs: []string{".claude"}, files: []string{".claude/.credentials.json", ".claude/settings.json"},
			env: []string{"CLAUDE_CONFIG_DIR={home}/.claude"}},
	},
	// codex exec reads the prompt from stdin given "-". Its workspace
	// sandbox blocks the linked worktree's git dir (it lives under the main
	// repository's .git) and the swarm database, so it runs unsandboxed.
	// --json prints its events as JSONL (turn.completed carries usage).
	"codex": {
		Name:        "codex",
		Command:     []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox"},
		Model:       []string{"--model", ModelPlaceholder},
		Stdin:       []string{"-"},
		Arg:         []string{"--", PromptPlaceholder},
		Install:     "npm install -g @openai/codex",
		Keys:        []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		Logins:      []string{".codex/auth.json"},
		LoginDirEnv: "CODEX_HOME",
		Login:       "log in once with 'codex login'",
		MCP:         MCPCodex,
		State:       presetState{dirs: []string{".codex"}, files: []string{".codex/auth.json", ".codex/config.toml"}},
	},
	// gemini -p is headless; stdin comes first and -p's text is appended
	// to it, so an empty -p runs the stdin prompt. Without --skip-trust a
	// headless run in an untrusted folder exits 55, and in untrusted
	// folders --yolo is overridden to the default approval mode.
	// -o stream-json prints JSONL events as they happen, the last a
	// "result" with the session's stats (-o json prints one object at the
	// end, so a log shows nothing until then).
	"gemini-cli": {
		Name:    "gemini-cli",
		Command: []string{"gemini", "--yolo", "--skip-trust", "-o", "stream-json"},
		Model:   []string{"--model", ModelPlaceholder},
		Stdin:   []string{"-p", ""},
		Arg:     []string{"-p", PromptPlaceholder},
		Install: "npm install -g @google/gemini-cli",
		Keys:    []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
		Logins:  []string{".gemini/oauth_creds.json"},
		Login:   "log in once by running gemini and choosing Login with Google",
		MCP:     MCPGemini,
		// No State: each session has its own GEMINI_CLI_HOME (gemini.go).
	},
}
