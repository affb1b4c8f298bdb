package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/worktree"
)

// InitOptions are the inputs of `swarm init`.
type InitOptions struct {
	App   *App
	Force bool
	// Join sets up a clone whose swarm.toml exists already (committed by
	// the first host): everything but writing swarm.toml.
	Join bool
	DB   string // a PostgreSQL URL for [mailbox] url; empty: .swarm/swarm.db
}

func newInitCmd(app *App, runF func(*InitOptions) error) *cobra.Command {
	opts := &InitOptions{App: app}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Set up swarm in this git repository",
		Long: `Set up swarm in the current git repository (or --dir):

  - writes a commented swarm.toml with two example agents,
  - creates .swarm/ and its database .swarm/swarm.db,
  - adds .swarm/ to .git/info/exclude, so git never shows swarm's files.

With --db postgres://host/dbname?sslmode=..., the mailbox lives in that
PostgreSQL database instead (for several hosts): init writes the URL to
swarm.toml's [mailbox] url and migrates the database. The URL must not
carry a password: put it in PGPASSWORD or ~/.pgpass.

It refuses to overwrite an existing swarm.toml unless --force is given.
With --join it keeps the swarm.toml there is (a clone on a second host,
whose swarm.toml the first host committed) and does the rest: .swarm/,
the exclude line, and the database its [mailbox] url names.`,
		Example: `  swarm init
  swarm init --join              # a second host's clone of a swarm's repository
  swarm init --dir ~/src/myrepo
  PGPASSWORD=... swarm init --db 'postgres://swarm@db.internal/swarm?sslmode=verify-full'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runInit(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite an existing swarm.toml")
	cmd.Flags().BoolVar(&opts.Join, "join", false, "keep the existing swarm.toml and set up the rest (a clone on another host)")
	cmd.Flags().StringVar(&opts.DB, "db", "", "keep the mailbox in this PostgreSQL database (postgres://host/dbname?sslmode=...; no password in it)")
	cmd.MarkFlagsMutuallyExclusive("join", "force")
	return cmd
}

type initResult struct {
	Root     string `json:"root"`
	Config   string `json:"config"`
	Database string `json:"database"`
	Exclude  string `json:"exclude"`
	Wrote    bool   `json:"wrote_config"`
}

func runInit(ctx context.Context, opts *InitOptions) error {
	app := opts.App
	if opts.Join && opts.DB != "" {
		return usagef("--join keeps swarm.toml's [mailbox] url; --db writes a new one: give one of them")
	}
	if opts.DB != "" {
		if err := config.CheckDatabaseURL(opts.DB); err != nil {
			return usagef("--db: %v", err)
		}
	}
	start := app.Cwd
	if app.Dir != "" {
		start = app.Dir
		if !filepath.IsAbs(start) {
			start = filepath.Join(app.Cwd, start)
		}
	} else if r := app.Env.Getenv("SWARM_ROOT"); r != "" {
		start = r
	}
	// Inside an agent's worktree, init means the swarm that owns it, as for
	// every other command: never a second swarm inside a worktree.
	if owner, ok := repo.WorktreeOwner(start); ok {
		start = owner
	}
	root, err := gitOutput(ctx, start, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	l := repo.At(root, app.Env.Getenv("SWARM_DB"))
	res := initResult{Root: root, Config: l.Config, Database: l.DB}

	_, statErr := os.Stat(l.Config)
	switch {
	case opts.Join && statErr != nil:
		return fmt.Errorf("no %s to join: pull the commit that adds it, or run 'swarm init' to write a starter file", l.Config)
	case opts.Join:
		// Read it before touching anything: a clone's broken file is
		// reported, not half set up.
		if _, err := config.Load(l.Config, l.Root); err != nil {
			return err
		}
	case statErr == nil && !opts.Force:
		return fmt.Errorf("%s already exists; edit it, run 'swarm init --join' to set up this clone with it, or 'swarm init --force' to replace it with the starter file", l.Config)
	default:
		starter := config.Starter()
		if opts.DB != "" {
			starter = config.StarterWithURL(opts.DB)
		}
		if err := writeFileAtomic(l.Config, starter); err != nil {
			return fmt.Errorf("write %s: %w", l.Config, err)
		}
		res.Wrote = true
	}
	if err := os.MkdirAll(l.State, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", l.State, err)
	}
	if res.Exclude, err = excludeState(ctx, root); err != nil {
		return err
	}
	cfg, err := config.Load(l.Config, l.Root)
	if err != nil {
		return err
	}
	target := app.storeTarget(l, cfg)
	res.Database = target.String()
	st, err := target.Open(ctx)
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(res)
	}
	if opts.Join {
		fmt.Fprintf(app.Stdout, "Joined the swarm of %s\n", root)
		fmt.Fprintf(app.Stdout, "  kept     %s (agents: %s)\n", rel(root, l.Config), strings.Join(cfg.AgentNames(), ", "))
	} else {
		fmt.Fprintf(app.Stdout, "Initialized swarm in %s\n", root)
		fmt.Fprintf(app.Stdout, "  wrote    %s (agents: %s)\n", rel(root, l.Config), strings.Join(cfg.AgentNames(), ", "))
	}
	if target.URL != "" {
		fmt.Fprintf(app.Stdout, "  migrated %s\n", target)
	} else {
		fmt.Fprintf(app.Stdout, "  created  %s\n", rel(root, l.DB))
	}
	fmt.Fprintf(app.Stdout, "  ignored  .swarm/ in %s\n", rel(root, res.Exclude))
	if opts.Join {
		fmt.Fprintln(app.Stdout, "Next: 'swarm doctor' checks this host, then 'swarm up'.")
		return nil
	}
	fmt.Fprintln(app.Stdout, "Next: edit swarm.toml, set GEMINI_API_KEY, then run 'swarm up' (or 'swarm up --engine script' to try it offline).")
	return nil
}

// excludeState adds /.swarm/ to the repository's git exclude file, so git
// never shows swarm's files, and returns the file's path. swarm init does
// it, and so does swarm up, for a clone that was never init-ed.
func excludeState(ctx context.Context, root string) (string, error) {
	// --path-format=absolute needs git 2.31; older ones may answer relative
	// to the directory git ran in.
	commonDir, err := gitOutput(ctx, root, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(commonDir) {
		commonDir = filepath.Join(root, commonDir)
	}
	exclude := filepath.Join(commonDir, "info", "exclude")
	if err := worktree.AddExclude(exclude, "/"+repo.StateDir+"/", "swarm's state (agents' worktrees, database, logs)"); err != nil {
		return exclude, fmt.Errorf("update %s: %w", exclude, err)
	}
	return exclude, nil
}

// gitOutput runs git in dir and returns its trimmed stdout, turning the
// usual failures into errors that say what to do.
func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	res, err := proc.Run(ctx, proc.Spec{Dir: dir}, "git", args...)
	var ee *proc.ExitError
	switch {
	case errors.Is(err, os.ErrNotExist) || isNotFound(err):
		return "", errors.New("git is not installed or not on PATH; install git 2.20 or newer")
	case errors.As(err, &ee) && strings.Contains(ee.Stderr, "not a git repository"):
		return "", fmt.Errorf("%s is not inside a git repository; run 'git init' first, or pass --dir", dir)
	case err != nil:
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// writeFileAtomic writes through a temporary file and a rename, so a crash
// never leaves half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}
