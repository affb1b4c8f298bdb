package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/open"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/termsafe"
)

// App holds what every command shares: the global flags and the process's
// streams and environment, injected so commands can be tested in-process.
type App struct {
	Dir     string
	JSON    bool
	Verbose int

	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    repo.Env
	Cwd    string

	// fallback is why swarm.toml did not read when loadRunning went on
	// with the database's agents instead; nil when it read.
	fallback error
	// db is the database this process opened, for errors about it.
	db string
	// inProcess is a command the supervisor runs for a session
	// (runForSession): it must not touch the process's globals, such as
	// the default logger.
	inProcess bool
	// nested is a command another one runs in this process (swarm mcp's
	// tools): it leaves the process's default logger alone too, but goes
	// through the supervisor as a session's command would.
	nested bool
	// caller is who runs the command when a door established it: the
	// session whose door the supervisor ran it for, or the operator for
	// the operator's door. nil in a CLI process (see callerOf).
	caller *identity.Caller
	// command is the running command's path ("swarm send"), for refusals.
	command string
	// shared is the supervisor's own store, which a command it runs for a
	// session or the operator uses instead of opening one (and does not
	// close): its connections are warm.
	shared mailbox.Store
	// safe is the termsafe writer app.Stdout became for a human-readable
	// command (safeOutput); nil for --json, --raw and machine output.
	safe *termsafe.Writer
	// supervising is set by swarm up once it holds the lock: the one
	// command that may create the database while a supervisor runs.
	supervising bool
}

// commands are the subcommands, in one list: a new command is a line here
// (cobra sorts them for help). Each constructor with options takes a
// runF, nil here, which a test sets to get the parsed options instead of
// running the command (flags_test.go), as cli/cli's commands do.
func commands(app *App) []*cobra.Command {
	return []*cobra.Command{
		newAckCmd(app, nil),
		newDiffCmd(app, nil),
		newDoctorCmd(app, nil),
		newDownCmd(app, nil),
		newEscalateCmd(app, nil),
		newEscalationCmd(app, nil),
		newEscalationsCmd(app, nil),
		newEventsCmd(app, nil),
		newInboxCmd(app, nil),
		newInitCmd(app, nil),
		newLandCmd(app, nil),
		newLogsCmd(app, nil),
		newMCPCmd(app, nil),
		newMergesCmd(app, nil),
		newPauseCmd(app, false, nil),
		newPauseCmd(app, true, nil), // swarm resume
		newPromptCmd(app, nil),
		newProtocolCmd(app, nil),
		newQueueCmd(app, nil),
		newReleaseCmd(app, nil),
		newReloadCmd(app, nil),
		newReplyCmd(app, nil),
		newReportCmd(app, nil),
		newReservationsCmd(app, nil),
		newReserveCmd(app, nil),
		newRetireCmd(app, nil),
		newSendCmd(app, nil),
		newSpawnCmd(app, nil),
		newStatusCmd(app, nil),
		newTeamCmd(app, nil),
		newThreadCmd(app, nil),
		newUpCmd(app, nil),
		newVersionCmd(app),
		newWatchCmd(app, nil),
		newWebCmd(app, nil),
		newWorkflowCmd(app, nil),
	}
}

const rootLong = `swarm runs a team of LLM coding agents in one git repository.

Every agent works in its own git worktree on its own branch, gets a prompt
rebuilt from the current state at the start of every session, and talks to
its teammates and to you through a mailbox stored in .swarm/swarm.db.

The repository is found from --dir, else $SWARM_ROOT, else by walking up from
the current directory (inside .swarm/worktrees/<agent>, that means the repo
that owns the worktree). $SWARM_DB overrides only the database path.

Exit codes:
  0  success
  1  error: something went wrong; the message says what to do
  2  usage: bad flags or arguments`

func newRootCmd(app *App) *cobra.Command { return newRoot(app, commands(app)...) }

// newRoot is the root command over the given subcommands: the flag tests
// give it one command built with their runF.
func newRoot(app *App, cmds ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:           "swarm",
		Short:         "Run a team of LLM coding agents in one git repository",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			app.command = strings.TrimPrefix(cmd.CommandPath(), "swarm ")
			level := slog.LevelWarn
			if app.Verbose > 0 {
				level = slog.LevelDebug
			}
			if !app.inProcess && !app.nested {
				slog.SetDefault(slog.New(slog.NewTextHandler(app.Stderr, &slog.HandlerOptions{Level: level})))
			}
			app.safeOutput(cmd)
			return nil
		},
	}
	root.SetVersionTemplate("swarm {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&app.Dir, "dir", "", "the repository to work on (default: $SWARM_ROOT, else found from the current directory)")
	pf.BoolVar(&app.JSON, "json", false, "print machine-readable JSON")
	pf.CountVarP(&app.Verbose, "verbose", "v", "log more (debug)")

	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{err: err, help: cmd.CommandPath()}
	})
	root.AddCommand(cmds...)
	// `swarm completion nope` would print help and exit 0: the shells are
	// its subcommands, so any argument is a mistake.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.NoArgs
			c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
		}
	}
	// Every command's positional-argument errors are usage errors too.
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// machineOutput names the commands whose stdout is not for reading:
// MCP's JSON-RPC, shell completion scripts, and git's coloured patches.
var machineOutput = map[string]bool{"mcp": true, "completion": true, "diff": true,
	cobra.ShellCompRequestCmd: true, cobra.ShellCompNoDescRequestCmd: true}

// safeOutput puts a human-readable command's stdout through termsafe, so
// no command can print a control sequence from text swarm did not write
// (an escalation's summary, a CLI's stderr in a failure cause, a shell
// command in a log) however it formats it. --json and --raw stay
// byte-exact.
func (app *App) safeOutput(cmd *cobra.Command) {
	if app.JSON || app.safe != nil {
		return
	}
	for c := cmd; c != nil; c = c.Parent() { // swarm completion bash too
		if machineOutput[c.Name()] {
			return
		}
	}
	if f := cmd.Flags().Lookup("raw"); f != nil && f.Value.String() == "true" {
		return
	}
	app.safe = termsafe.NewWriter(app.Stdout)
	app.Stdout = app.safe
}

// flushOutput writes what the termsafe writer held back (an incomplete
// UTF-8 sequence at the very end) and gives stdout back.
func (app *App) flushOutput() {
	if app.safe == nil {
		return
	}
	if err := app.safe.Flush(); err != nil {
		slog.Warn("flush stdout", "err", err)
	}
	app.Stdout, app.safe = app.safe.Unwrap(), nil
}

func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &usageError{err: err, help: cmd.CommandPath()}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// layout finds the repository.
func (a *App) layout() (repo.Layout, error) {
	return repo.Find(a.Dir, a.Cwd, a.Env)
}

// loadConfig finds the repository and reads its swarm.toml.
func (a *App) loadConfig() (repo.Layout, *config.Config, error) {
	l, err := a.layout()
	if err != nil {
		return l, nil, err
	}
	cfg, err := config.Load(l.Config, l.Root)
	return l, cfg, err
}

// loadRunning is loadConfig for the commands that reach a swarm that may
// be running: status, send, inbox, events, logs, watch, pause, resume and
// down. A typo saved into swarm.toml while the swarm runs must not lock the
// operator out of it, so when swarm.toml does not read but the database
// knows agents, these commands go on with those agents and the default
// settings, after one warning line on stderr naming the error (file:line)
// and what was assumed.
func (a *App) loadRunning(ctx context.Context) (repo.Layout, *config.Config, error) {
	l, cfg, err := a.loadConfig()
	if err == nil || l.Root == "" {
		return l, cfg, err
	}
	fb, names, ferr := fallbackConfig(ctx, l, open.Choose(a.Env.Getenv, "", l.DB))
	if ferr != nil {
		slog.Debug("no fallback for a broken swarm.toml", "err", ferr)
		return l, nil, err
	}
	a.fallback = err
	fmt.Fprintf(a.Stderr, "swarm: warning: %s; going on with the %s the database knows (%s), default settings and worktrees in %s; fix swarm.toml ('swarm doctor' lists every problem)\n",
		firstProblem(err), text.Plural(len(names), "agent", "agents"), text.ListSome(names, 5), rel(l.Root, fb.Worktree.Dir))
	return l, fb, nil
}

// firstProblem is the first line of a config error, with a count of the
// others: swarm.toml can have several mistakes at once.
func firstProblem(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) > 1 {
		return fmt.Sprintf("%s (and %s)", lines[0], text.Plural(len(lines)-1, "more problem", "more problems"))
	}
	return lines[0]
}

// fallbackConfig is the configuration of the agents the database knows,
// with default settings: what the commands that reach a running swarm need
// when swarm.toml does not read. Worktrees are where the database says
// they are when all of them share a directory. It never creates a SQLite
// database. The database is t: $SWARM_DB_URL's, else the SQLite file (a
// [mailbox] url cannot be read from a swarm.toml that does not read).
func fallbackConfig(ctx context.Context, l repo.Layout, t open.Target) (*config.Config, []string, error) {
	if t.URL == "" {
		if _, err := os.Stat(t.Path); err != nil {
			return nil, nil, err
		}
	}
	st, err := t.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	rows, err := st.Agents(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(rows) == 0 {
		return nil, nil, errors.New("the database knows no agents")
	}
	var b strings.Builder
	dir := ""
	for i, r := range rows {
		if d := filepath.Dir(r.Worktree); r.Worktree != "" && (i == 0 || d == dir) {
			dir = d
		} else {
			dir = "-" // not all in one place: the default
		}
	}
	if dir != "" && dir != "-" && filepath.IsAbs(dir) {
		fmt.Fprintf(&b, "[worktree]\ndir = %q\n", dir)
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		fmt.Fprintf(&b, "[[agent]]\nname = %q\n", r.Name)
		if _, err := mode.Parse(r.Mode); err == nil && r.Mode != "" {
			fmt.Fprintf(&b, "mode = %q\n", r.Mode)
		}
		names = append(names, r.Name)
	}
	cfg, err := config.Parse([]byte(b.String()), l.Config, l.Root)
	if err != nil {
		return nil, nil, fmt.Errorf("the database's agents: %w", err)
	}
	return cfg, names, nil
}

// checkEngineFlag checks --engine NAME against every agent of cfg. A
// preset name (claude, codex, gemini-cli) without its [engine.NAME] table
// gets the table to add.
func checkEngineFlag(cfg *config.Config, name string) error {
	for _, a := range cfg.Agents {
		if _, err := cfg.EngineFor(a, name); err != nil {
			if _, defined := cfg.Engines[name]; !defined && slices.Contains(config.Presets, name) {
				return usagef("--engine %s: swarm.toml has no [engine.%s] table. %s is an external CLI agent; add this to swarm.toml:\n\n"+
					"    [engine.%s]\n    kind = \"exec\"\n    preset = %q\n\nand run 'swarm doctor --engine %s' again", name, name, name, name, name, name)
			}
			return usagef("--engine: %v", err)
		}
	}
	return nil
}

// agentIn returns the named agent of cfg, or an error that suggests the
// agent meant ("Backend" → backend) and lists the agents.
func agentIn(cfg *config.Config, name string) (config.Agent, error) {
	a, ok := cfg.Agent(name)
	if !ok {
		return a, unknownName("agent", name, cfg.AgentNames(), "swarm.toml has")
	}
	return a, nil
}

// knownAgent is agentIn for commands that name an agent before (or
// without) opening the store: an agent `swarm spawn` added is not in
// swarm.toml, so the store's spawned agents are read before giving up.
func (a *App) knownAgent(ctx context.Context, l repo.Layout, cfg *config.Config, name string) (config.Agent, error) {
	if ag, err := agentIn(cfg, name); err == nil {
		return ag, nil
	}
	if st, err := a.openStore(ctx, l, cfg); err == nil {
		st.Close()
	}
	return agentIn(cfg, name)
}

// recipientIn checks a name mail can go to: an agent of cfg or operator.
func recipientIn(cfg *config.Config, name string) error {
	if name == config.Operator {
		return nil
	}
	if _, ok := cfg.Agent(name); ok {
		return nil
	}
	return unknownName("recipient", name, cfg.Recipients(), "known names are")
}

// unknownName says that name is not one of names, with the nearest one as
// a suggestion when there is one close enough.
func unknownName(what, name string, names []string, have string) error {
	msg := fmt.Sprintf("unknown %s %q: ", what, name)
	if s := config.Suggest(name, names); s != "" {
		msg += fmt.Sprintf("did you mean %q? ", s)
	}
	return errors.New(msg + have + " " + text.ListSome(names, 20))
}

// storeTarget is the repository's database: $SWARM_DB_URL, else
// swarm.toml's [mailbox] url (PostgreSQL), else the SQLite file.
func (a *App) storeTarget(l repo.Layout, cfg *config.Config) open.Target {
	return open.Choose(a.Env.Getenv, cfg.Mailbox.URL, l.DB)
}

// openStore opens the repository's database.
func (a *App) openStore(ctx context.Context, l repo.Layout, cfg *config.Config) (mailbox.Store, error) {
	var st mailbox.Store
	if a.shared != nil {
		st = unclosed{a.shared}
	} else {
		// The one place a CLI process opens the store: never from inside
		// a session, which reaches the swarm through its door.
		if err := a.outsideSessions(); err != nil {
			return nil, err
		}
		t := a.storeTarget(l, cfg)
		a.db = t.String()
		// While a supervisor runs, its database exists: one missing now was
		// deleted under it, and a fresh one would take mail it never reads.
		pid, running := 0, false
		if t.URL == "" && !a.supervising {
			pid, running = swarm.LockHolder(l.Lock())
			t.NoCreate = running
		}
		var err error
		if st, err = t.Open(ctx); err != nil {
			if errors.Is(err, open.ErrNoDatabase) && running {
				return nil, fmt.Errorf("%w, yet the supervisor (pid %d) runs: the database was deleted under it, and it stops once it notices; then run 'swarm init' and 'swarm up' again", err, pid)
			}
			return nil, err
		}
	}
	// The agents `swarm spawn` added are agents like the configured ones
	// for every command: status, send, down, and the next swarm up.
	if cfg != nil {
		problems, err := swarm.WithSpawned(ctx, cfg, st)
		switch {
		case err != nil && st.Unavailable(err):
			// The database away for a moment (a PostgreSQL restart): the
			// command goes on with swarm.toml's agents, and its own
			// writes wait for the database as they do.
			slog.Warn("could not read the spawned agents; going on with swarm.toml's", "err", err)
		case err != nil:
			st.Close()
			return nil, fmt.Errorf("read the spawned agents: %w", err)
		}
		for _, p := range problems {
			slog.Warn("a spawned agent cannot run with this swarm.toml", "problem", p)
		}
	}
	return st, nil
}

// openConfigured reads swarm.toml and opens the store it names: what most
// commands that read or post do first. The caller closes the store.
func (a *App) openConfigured(ctx context.Context) (repo.Layout, *config.Config, mailbox.Store, error) {
	l, cfg, err := a.loadConfig()
	if err != nil {
		return l, nil, nil, err
	}
	st, err := a.openStore(ctx, l, cfg)
	if err != nil {
		return l, nil, nil, err
	}
	return l, cfg, st, nil
}

// unclosed is a store a command uses but does not own.
type unclosed struct{ mailbox.Store }

func (unclosed) Close() error { return nil }

// explainDamage adds what to do to an error that says the database is
// damaged: the damage can show in any query, long after the store opened.
func (a *App) explainDamage(err error) error {
	if err == nil || !errors.Is(err, mailbox.ErrDamaged) || strings.Contains(err.Error(), "swarm doctor") {
		return err
	}
	path := a.db
	if path == "" {
		l, lerr := a.layout()
		if lerr != nil {
			return err
		}
		path = l.DB
	}
	return fmt.Errorf("%w; database %s: %s", err, path, open.DamagedAdvice(path))
}

// poster is this process's mail service: it validates against cfg's
// agents, stores, and tells a running supervisor what it stored.
func (a *App) poster(st mailbox.Store, l repo.Layout, cfg *config.Config) *mailbox.Poster {
	p, _ := a.announcingPoster(st, l, cfg)
	return p
}

// announcingPoster is poster, with the supervisor's answer about the mail
// it announced.
func (a *App) announcingPoster(st mailbox.Store, l repo.Layout, cfg *config.Config) (*mailbox.Poster, *announcer) {
	an := &announcer{l: l}
	return mailbox.NewPoster(st, cfg.AgentNames(), an), an
}

// announceWait bounds the wait for the supervisor's answer about new mail:
// it wakes the recipients first and answers at once.
const announceWait = 2 * time.Second

// announcer is the mail waker of a CLI process: it announces stored mail
// to a running supervisor and keeps its answer.
type announcer struct {
	l repo.Layout

	mu         sync.Mutex
	supervisor bool // a supervisor answered
	err        error
	deliveries map[int64]control.Delivery
}

func (an *announcer) Wake(ctx context.Context, ms []message.Message) {
	ctx, cancel := context.WithTimeout(ctx, announceWait)
	defer cancel()
	ds, err := control.Announce(ctx, an.l, ms)
	an.mu.Lock()
	defer an.mu.Unlock()
	if an.deliveries == nil {
		an.deliveries = map[int64]control.Delivery{}
	}
	for _, d := range ds {
		an.deliveries[d.ID] = d
	}
	switch {
	case err == nil:
		an.supervisor = true
	case errors.Is(err, control.ErrNoSupervisor):
	default:
		// A supervisor is there but did not answer (or is older and does
		// not know the request): its change feed finds the mail within
		// a poll interval.
		an.supervisor, an.err = true, err
		slog.Debug("announce mail", "err", err)
	}
}

// answer returns what the supervisor said about message id, whether one
// answered at all, and why an answer is missing.
func (an *announcer) answer(id int64) (control.Delivery, bool, error) {
	an.mu.Lock()
	defer an.mu.Unlock()
	d, ok := an.deliveries[id]
	if !ok {
		d = control.Delivery{ID: id}
	}
	return d, an.supervisor, an.err
}

func (a *App) printJSON(v any) error {
	enc := json.NewEncoder(a.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// completeAgents completes agent names from swarm.toml; with operator when
// the argument may be operator too.
func (a *App) completeAgents(withOperator bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		_, cfg, err := a.loadConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := cfg.AgentNames()
		if withOperator {
			names = append(names, config.Operator)
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
