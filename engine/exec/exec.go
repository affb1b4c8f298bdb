// Package exec runs an external CLI agent (claude, codex, gemini-cli, or any
// command) headless in the agent's worktree, as an engine.Engine. It does
// not use the agent loop: the CLI brings its own model, tools and loop.
//
// Configuration is an [engine.NAME] table with kind = "exec" and either
// command = [...] or preset = "claude" | "codex" | "gemini-cli" plus
// optional args. The prompt goes in one of three ways:
//
//   - prompt = "stdin" (the default): written to the process's stdin;
//   - prompt = "arg": substituted for {prompt} in the arguments. One
//     argument is limited to 128 KiB by the kernel (MAX_ARG_STRLEN on
//     Linux), so a longer prompt is a clear error, not an E2BIG;
//   - prompt = "file": the prompt is written to a private temporary file
//     (outside the worktree, so it can never be committed), its path
//     substituted for {prompt_file}, and the file removed after the
//     session. Presets take no file: none of the CLIs reads its prompt from
//     one.
//
// The model ([engine.NAME] model, else Session.Model, which the supervisor
// leaves empty unless the agent sets one: config.Agent.SessionModel) goes in
// as a preset's Model flags, or for {model} in a custom command; a preset
// without a model runs its CLI's default.
//
// stdout is also read by a Meter: the token usage the CLI's JSON events
// report goes to Session.OnUsage as it comes and into Result.Usage, and
// the log's end line. Render makes such a log readable (swarm logs).
//
// The process runs with cwd = the worktree and Session.Env: the user's
// environment, API keys included (the CLI needs them), plus the session
// variables (engine.SessionEnv builds it when the supervisor left it nil).
// It gets its own process group, reported through Session.OnProcess. On
// cancel the group gets SIGTERM, then SIGKILL after Session.Grace
// (interrupt_grace); once the leader has exited, whatever is left of the
// group is killed at once, so no agent process outlives its session.
// stdout and stderr go to the session log.
//
// With Session.Sandbox the CLI runs in the session's bubblewrap
// (sandbox.Box.Command): its command is found as the supervisor would find
// it and shown read-only inside, with the prompt file; gemini-cli's
// per-session home is writable; the other presets' state directories
// (Preset.State) are fresh per session, their login and settings files
// bound read-only into them. Killing the process
// group kills bwrap, and with it the session's PID namespace: whatever the
// CLI started, setsid'd or not (Claude Code's Bash tool), ends too.
//
// Outcomes: exit 0 is Success; a non-zero exit is Failed with the status
// and the tail of stderr; the session timeout is Timeout; cancellation is
// Cancelled with Cause = context.Cause(ctx). Exec engines have no tool
// boundary, so interrupts always cancel.
//
// Presets were checked against the published CLIs (claude 2.1.197, codex
// 0.169.0, gemini-cli 0.61.0): each starts headless with the argv in
// Presets, reads the prompt both ways, sends the --model it is given, and
// fails at once on a rejected key when pointed at a local fake API.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/proc"
	contain "github.com/swarmhq/swarm/sandbox"
)

// MaxArgBytes is the longest single argument the kernel accepts
// (MAX_ARG_STRLEN = 128 KiB on Linux, the terminating NUL included).
const MaxArgBytes = 128 << 10

// Options configure an exec engine.
type Options struct {
	Name    string   // the [engine.NAME] table's name
	Command []string // argv template; or Preset
	Preset  string   // claude | codex | gemini-cli
	Args    []string // extra arguments, after the preset's own
	Prompt  string   // stdin (default) | arg | file
	// Model, when set, overrides the session's model ([engine.NAME] model).
	Model string
	// Env is added to every session's environment (after Session.Env).
	Env []string
	// EnvFile is a dotenv file (env_file) whose variables New reads with
	// config.ReadEnvFile and adds to every session's environment, after
	// Env: they win over the user's own environment.
	EnvFile string
}

// FromConfig converts an [engine.NAME] table.
func FromConfig(e config.Engine) Options {
	return Options{Name: e.Name, Command: e.Command, Preset: e.Preset, Args: e.Args, Prompt: e.Prompt, Model: e.Model, EnvFile: e.EnvFile}
}

// Engine runs one CLI agent per session.
type Engine struct {
	name   string
	argv   []string // template, placeholders unexpanded
	prompt string   // stdin | arg | file
	model  string   // Options.Model
	// modelArgs (a preset's Model) go in at modelAt when a session has a
	// model; a custom command takes it through {model} instead.
	modelArgs []string
	modelAt   int
	env       []string
	install   string // how to install argv[0], for Preflight
	// mcp is how the preset's CLI is told of `swarm mcp` (Preset.MCP);
	// empty for a custom command.
	mcp string
	// state is what the CLI keeps in the home directory, given a
	// per-session copy in a sandbox (Preset.State).
	state       presetState
	loginDirEnv string // Preset.LoginDirEnv
}

var (
	_ engine.Engine    = (*Engine)(nil)
	_ engine.Preflight = (*Engine)(nil)
	_ engine.Unmetered = (*Engine)(nil)
)

// Unmetered reports a custom command: only the presets' CLIs print the
// JSON events the Meter reads usage from.
func (e *Engine) Unmetered() bool { return e.mcp == "" }

// New checks opts and builds the command template.
func New(opts Options) (*Engine, error) {
	e := &Engine{name: opts.Name, prompt: opts.Prompt, model: opts.Model, env: slices.Clone(opts.Env)}
	if e.name == "" {
		e.name = opts.Preset
	}
	if e.prompt == "" {
		e.prompt = config.PromptStdin
	}
	switch e.prompt {
	case config.PromptStdin, config.PromptArg, config.PromptFile:
	default:
		return nil, fmt.Errorf("exec engine %s: prompt must be %q, %q or %q, not %q", e.name, config.PromptStdin, config.PromptArg, config.PromptFile, e.prompt)
	}
	switch {
	case len(opts.Command) > 0 && opts.Preset != "":
		return nil, fmt.Errorf("exec engine %s: set either command or preset, not both", e.name)
	case opts.Preset != "":
		p, ok := Presets[opts.Preset]
		if !ok {
			return nil, fmt.Errorf("exec engine %s: unknown preset %q (valid: %s)", e.name, opts.Preset, strings.Join(slices.Sorted(maps.Keys(Presets)), ", "))
		}
		e.argv = append(slices.Clone(p.Command), opts.Args...)
		e.modelArgs, e.modelAt, e.mcp = p.Model, len(p.Command), p.MCP
		switch e.prompt {
		case config.PromptStdin:
			e.argv = append(e.argv, p.Stdin...)
		case config.PromptArg:
			e.argv = append(e.argv, p.Arg...)
		case config.PromptFile:
			return nil, fmt.Errorf("exec engine %s: preset %s cannot read its prompt from a file; use prompt = \"stdin\" or \"arg\"", e.name, p.Name)
		}
		e.env = append(slices.Clone(p.Env), e.env...)
		if os.Geteuid() == 0 {
			e.env = append(slices.Clone(p.RootEnv), e.env...)
		}
		e.install = "install it with: " + p.Install
		e.state, e.loginDirEnv = p.State, p.LoginDirEnv
	case len(opts.Command) > 0:
		if opts.Command[0] == "" {
			return nil, fmt.Errorf("exec engine %s: command[0] must name a program", e.name)
		}
		e.argv = append(slices.Clone(opts.Command), opts.Args...)
		e.install = fmt.Sprintf("install it, or fix command in [engine.%s]", e.name)
	default:
		return nil, fmt.Errorf("exec engine %s: set command = [...] or preset = \"claude\" | \"codex\" | \"gemini-cli\"", e.name)
	}
	if opts.EnvFile != "" {
		vars, err := config.ReadEnvFile(opts.EnvFile)
		if err != nil {
			return nil, fmt.Errorf("exec engine %s: env_file: %w", e.name, err)
		}
		e.env = append(e.env, vars...)
	}
	all := strings.Join(e.argv, "\x00")
	switch {
	case e.prompt == config.PromptArg && !strings.Contains(all, PromptPlaceholder):
		return nil, fmt.Errorf("exec engine %s: prompt = \"arg\" needs a %q argument in command", e.name, PromptPlaceholder)
	case e.prompt == config.PromptFile && !strings.Contains(all, PromptFilePlaceholder):
		return nil, fmt.Errorf("exec engine %s: prompt = \"file\" needs a %q argument in command", e.name, PromptFilePlaceholder)
	case e.model != "" && e.modelArgs == nil && !strings.Contains(all, ModelPlaceholder):
		return nil, fmt.Errorf("exec engine %s: model = %q cannot reach the command: add a %q argument to command, or remove model", e.name, e.model, ModelPlaceholder)
	}
	return e, nil
}

// Name is the engine's configured name.
func (e *Engine) Name() string { return e.name }

// Argv is the command template, placeholders unexpanded.
func (e *Engine) Argv() []string { return slices.Clone(e.argv) }

// Env is what the engine adds to each session's environment.
func (e *Engine) Env() []string { return slices.Clone(e.env) }

// Preflight checks that the command can be found. A command with a slash
// is checked only when absolute: a relative one is resolved in the
// worktree when the session starts.
func (e *Engine) Preflight(context.Context) error {
	name := e.argv[0]
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		return nil
	}
	if _, err := osexec.LookPath(name); err != nil {
		return fmt.Errorf("exec engine %s: command %q not found on PATH; %s", e.name, name, e.install)
	}
	return nil
}

// Args expands the template for a session: the engine's own model, else
// model (the session's), goes in as the preset's model flag or for {model};
// {prompt} and {prompt_file} are substituted. It returns the argv, and the
// stdin to send (nil for none). An argument the kernel would refuse is an
// error, and so is a {model} with no model to put there.
func (e *Engine) Args(model, prompt, promptFile string) (argv []string, stdin []byte, err error) {
	return e.args(model, prompt, promptFile, nil)
}

// args is Args with extra arguments after the preset's command and model
// flag (the MCP registration); they are not templates.
func (e *Engine) args(model, prompt, promptFile string, extra []string) (argv []string, stdin []byte, err error) {
	if e.model != "" {
		model = e.model
	}
	var modelArgs []string
	if model != "" && e.modelArgs != nil {
		modelArgs = e.modelArgs
	}
	tmpl := slices.Concat(e.argv[:e.modelAt], modelArgs, e.argv[e.modelAt:])
	fixed := map[int]bool{}
	if len(extra) > 0 {
		at := e.modelAt + len(modelArgs)
		tmpl = slices.Concat(tmpl[:at], extra, tmpl[at:])
		for i := range extra {
			fixed[at+i] = true
		}
	}
	argv = make([]string, len(tmpl))
	for i, a := range tmpl {
		if fixed[i] {
			argv[i] = a
			continue
		}
		if strings.Contains(a, ModelPlaceholder) {
			if model == "" {
				return nil, nil, fmt.Errorf("exec engine %s: the command takes %q, but the session has no model; set model on the agent or in [engine.%s]", e.name, ModelPlaceholder, e.name)
			}
			a = strings.ReplaceAll(a, ModelPlaceholder, model)
		}
		a = strings.ReplaceAll(a, PromptPlaceholder, prompt)
		a = strings.ReplaceAll(a, PromptFilePlaceholder, promptFile)
		if len(a) >= MaxArgBytes {
			return nil, nil, fmt.Errorf("exec engine %s: the prompt is %d bytes, over the 128 KiB limit of one command-line argument; use prompt = \"stdin\" (or \"file\")", e.name, len(prompt))
		}
		argv[i] = a
	}
	if e.prompt == config.PromptStdin {
		stdin = []byte(prompt)
	}
	return argv, stdin, nil
}

// Run runs the CLI for one session and blocks until it exits.
func (e *Engine) Run(ctx context.Context, s *engine.Session) (res engine.Result) {
	var logw io.Writer = io.Discard
	if s.Log != nil {
		logw = s.Log
	}
	lw := &lockedWriter{w: logw}
	fmt.Fprintf(lw, "=== session %d of %s · engine %s · exec %s\n", s.Seq, s.Agent, e.name, strings.Join(e.argv, " "))
	meter := NewMeter(s.OnUsage)
	defer func() {
		fmt.Fprintf(lw, "\n=== end: %s", res.Outcome)
		if u := res.Usage; !u.IsZero() {
			fmt.Fprintf(lw, " · %s", FormatUsage(u))
		}
		switch {
		case res.Err != nil:
			fmt.Fprintf(lw, " · %v", res.Err)
		case res.Cause != nil:
			fmt.Fprintf(lw, " · cause: %v", res.Cause)
		}
		fmt.Fprintln(lw)
	}()
	// Runs first: every result carries what the stream reported.
	defer func() { res.Usage, res.Turns = meter.Usage(), meter.Turns() }()

	parent := ctx
	if ctx.Err() != nil {
		return engine.Result{Outcome: engine.Cancelled, Cause: context.Cause(ctx)}
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.Timeout,
			fmt.Errorf("%w: %s passed: %w", engine.ErrSessionTimeout, s.Timeout, context.DeadlineExceeded))
		defer cancel()
	}
	fail := func(err error) engine.Result { return engine.Result{Outcome: engine.Failed, Err: err} }

	var promptFile string
	if e.prompt == config.PromptFile {
		dir, err := os.MkdirTemp("", "swarm-prompt-")
		if err != nil {
			return fail(fmt.Errorf("exec engine %s: prompt file: %w", e.name, err))
		}
		defer os.RemoveAll(dir)
		promptFile = filepath.Join(dir, fmt.Sprintf("%s-%d.md", safeName(s.Agent), s.Seq))
		if err := os.WriteFile(promptFile, []byte(s.Prompt), 0o600); err != nil {
			return fail(fmt.Errorf("exec engine %s: prompt file: %w", e.name, err))
		}
	}
	env := s.Env
	if env == nil {
		env = engine.SessionEnv(os.Environ(), s)
	}
	env = append(slices.Clip(env), e.env...)
	// Every session of a preset can use the swarm's verbs as MCP tools:
	// `swarm mcp`, with this session's identity.
	var mcpArgs []string
	lim := limitsFor(e.mcp, s.Caps)
	if lim.tools.How != "" {
		fmt.Fprintf(lw, "=== limits: %s\n", lim.tools.How)
	}
	var gem *geminiHome
	if e.mcp != "" {
		if e.mcp == MCPGemini {
			dir, err := os.MkdirTemp("", "swarm-gemini-")
			if err != nil {
				return fail(fmt.Errorf("exec engine %s: gemini-cli home: %w", e.name, err))
			}
			defer os.RemoveAll(dir)
			gem = &geminiHome{Dir: dir, User: userGeminiDir(env), Trust: s.Worktree, Exclude: lim.exclude}
		}
		args, menv, err := mcpRegistration(e.mcp, newMCPServer(env), gem)
		if err != nil {
			return fail(fmt.Errorf("exec engine %s: %w", e.name, err))
		}
		mcpArgs, env = append(lim.args, args...), append(env, menv...)
		where := ""
		if gem != nil {
			where = " in " + gem.SettingsPath()
		}
		fmt.Fprintf(lw, "=== mcp: swarm mcp registered as %q%s\n", MCPServerName, where)
	}
	argv, stdin, err := e.args(s.Model, s.Prompt, promptFile, mcpArgs)
	if err != nil {
		return fail(err)
	}
	if r := lim.replace; r[0] != "" {
		if i := slices.Index(argv, r[0]); i > 0 {
			argv[i] = r[1]
		}
	}

	// The CLI, as errors and the activity name it (argv[0] becomes
	// bwrap in a sandbox).
	cli := argv[0]
	if s.Sandbox != nil {
		// Found where the supervisor would find it (a relative path in
		// the worktree), then shown inside.
		bin := argv[0]
		switch {
		case strings.Contains(bin, "/"):
			if !filepath.IsAbs(bin) {
				bin = filepath.Join(s.Worktree, bin)
			}
		default:
			var err error
			if bin, err = osexec.LookPath(bin); err != nil {
				return fail(fmt.Errorf("exec engine %s: start %s: %w", e.name, argv[0], err))
			}
		}
		argv[0] = bin
		x := contain.Extra{ReadOnly: []string{filepath.Dir(bin)}, State: e.state.dirs, StateFiles: e.state.files, Env: e.state.env}
		// A CLI whose home the user moved ($CODEX_HOME) keeps its state
		// there: that directory is the one given per session.
		if d := lookupEnv(env, e.loginDirEnv); e.loginDirEnv != "" && filepath.IsAbs(d) {
			x.State, x.StateFiles = []string{d}, nil
			for _, f := range e.state.files {
				x.StateFiles = append(x.StateFiles, filepath.Join(d, filepath.Base(f)))
			}
		}
		if promptFile != "" {
			x.ReadOnly = append(x.ReadOnly, filepath.Dir(promptFile))
		}
		if gem != nil {
			// gemini-cli's home for this session: it writes there.
			x.Writable = append(x.Writable, gem.Dir)
		}
		var err error
		if argv, err = s.Sandbox.Command(argv, x); err != nil {
			return fail(fmt.Errorf("exec engine %s: %w", e.name, err))
		}
	}
	cmd := osexec.CommandContext(ctx, argv[0], argv[1:]...)
	proc.Configure(cmd, s.Grace)
	s.Sandbox.Attach(cmd) // nil-safe: no sandbox, nothing to attach
	cmd.Dir = s.Worktree
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	stderrTail := &tail{max: 4 << 10}
	stdoutTail := &tail{max: 4 << 10}
	cmd.Stdout = io.MultiWriter(lw, stdoutTail, meter)
	cmd.Stderr = io.MultiWriter(lw, stderrTail)

	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return stopped(parent, ctx)
		}
		return fail(fmt.Errorf("exec engine %s: start %s: %w", e.name, cli, err))
	}
	if gem != nil {
		// What gemini-cli really loaded goes in the log; asked beside the
		// session, not before it, so the session does not wait for it
		// (and beside its sandbox: it only reads the session's settings).
		probed := make(chan struct{})
		go func() {
			defer close(probed)
			loaded, err := probeGemini(ctx, cli, s.Worktree, env)
			switch {
			case err != nil && ctx.Err() == nil:
				fmt.Fprintf(lw, "\n=== mcp: could not ask gemini-cli what it loaded: %v\n", err)
			case err == nil:
				fmt.Fprintf(lw, "\n=== mcp: %s%s\n", loaded, geminiLimits(loaded, gem))
			}
		}()
		defer func() { <-probed }()
	}
	pgid := cmd.Process.Pid
	if s.OnProcess != nil {
		s.OnProcess(pgid)
	}
	if s.OnActivity != nil {
		s.OnActivity("exec: " + filepath.Base(cli))
	}
	werr := cmd.Wait()
	// The leader is gone: nothing of its group may outlive the session.
	_ = proc.KillGroup(pgid)

	if ctx.Err() != nil {
		return stopped(parent, ctx)
	}
	// ErrWaitDelay: the leader exited, but something it left in the group
	// held stdout or stderr open until the wait delay ran out. The agent's
	// own exit status decides.
	if werr == nil || (errors.Is(werr, osexec.ErrWaitDelay) && cmd.ProcessState.Success()) {
		return engine.Result{Outcome: engine.Success}
	}
	var ee *osexec.ExitError
	if !errors.As(werr, &ee) {
		return fail(fmt.Errorf("exec engine %s: %s: %w", e.name, cli, werr))
	}
	why := strings.TrimSpace(stderrTail.String())
	if why == "" {
		why = strings.TrimSpace(stdoutTail.String())
	}
	status := ee.ProcessState.String() // "exit status 2", "signal: killed"
	if why == "" {
		return fail(fmt.Errorf("exec engine %s: %s: %s", e.name, filepath.Base(cli), status))
	}
	return fail(fmt.Errorf("exec engine %s: %s: %s: %s", e.name, filepath.Base(cli), status, lastLines(why, 10, 1<<10)))
}

// stopped is the result of a session whose context ended: a cancellation
// of the parent keeps its cause; otherwise the session timeout passed.
func stopped(parent, ctx context.Context) engine.Result {
	if parent.Err() != nil {
		return engine.Result{Outcome: engine.Cancelled, Cause: context.Cause(parent)}
	}
	return engine.Result{Outcome: engine.Timeout, Err: context.Cause(ctx)}
}

func safeName(s string) string {
	if s == "" || strings.ContainsAny(s, `/\`) {
		return "session"
	}
	return s
}

// lastLines keeps the last n lines of s, and at most max bytes of them.
func lastLines(s string, n, max int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > max {
		s = "…" + strings.ToValidUTF8(s[len(s)-max:], "")
	}
	return s
}

// lockedWriter serialises the stdout and stderr copiers' writes to the
// session log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A broken log must not stop the agent: its output is only a view.
	_, _ = l.w.Write(p)
	return len(p), nil
}

// tail keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "")
}

// lookupEnv is the last value of key in env (NAME=value entries).
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
