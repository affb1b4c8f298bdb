package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/open"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
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
}

// commands are the subcommands. Each command's file registers itself in an
// init function, so adding a command touches only its own file.
var commands []func(*App) *cobra.Command

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

func newRootCmd(app *App) *cobra.Command {
	root := &cobra.Command{
		Use:           "swarm",
		Short:         "Run a team of LLM coding agents in one git repository",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			level := slog.LevelWarn
			if app.Verbose > 0 {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(app.Stderr, &slog.HandlerOptions{Level: level})))
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
	for _, newCmd := range commands {
		root.AddCommand(newCmd(app))
	}
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

// agentIn returns the named agent of cfg, or an error that lists the agents.
func agentIn(cfg *config.Config, name string) (config.Agent, error) {
	a, ok := cfg.Agent(name)
	if !ok {
		return a, fmt.Errorf("unknown agent %q: swarm.toml has %s", name, strings.Join(cfg.AgentNames(), ", "))
	}
	return a, nil
}

// storeTarget is the repository's database: $SWARM_DB_URL, else
// swarm.toml's [mailbox] url (PostgreSQL), else the SQLite file.
func (a *App) storeTarget(l repo.Layout, cfg *config.Config) open.Target {
	return open.Choose(a.Env.Getenv, cfg.Mailbox.URL, l.DB)
}

// openStore opens the repository's database.
func (a *App) openStore(ctx context.Context, l repo.Layout, cfg *config.Config) (mailbox.Store, error) {
	return a.storeTarget(l, cfg).Open(ctx)
}

// poster is this process's mail service: it validates against cfg's
// agents, stores, and pokes a running supervisor with what it stored.
func (a *App) poster(st mailbox.Store, l repo.Layout, cfg *config.Config) *mailbox.Poster {
	return mailbox.NewPoster(st, cfg.AgentNames(), mailbox.WakerFunc(func(_ context.Context, ms []message.Message) {
		control.Poke(l, ms)
	}))
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
