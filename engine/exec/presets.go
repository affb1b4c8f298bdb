package exec

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
	},
	// codex exec reads the prompt from stdin given "-". Its workspace
	// sandbox blocks the linked worktree's git dir (it lives under the main
	// repository's .git) and the swarm database, so it runs unsandboxed.
	// --json prints its events as JSONL (turn.completed carries usage).
	"codex": {
		Name:    "codex",
		Command: []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox"},
		Model:   []string{"--model", ModelPlaceholder},
		Stdin:   []string{"-"},
		Arg:     []string{"--", PromptPlaceholder},
		Install: "npm install -g @openai/codex",
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
	},
}
