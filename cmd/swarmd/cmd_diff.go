package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/worktree"
)

// DiffOptions are the inputs of `swarm diff`.
type DiffOptions struct {
	App   *App
	Agent string
	Stat  bool
	// Color is git's colouring: "auto" colours on a terminal.
	Color string
	// Commit is a commit on the agent's branch to read instead of the
	// branch and worktree (a reviewer's read), Paths the files to show.
	Commit string
	Paths  []string
}

func newDiffCmd(app *App, runF func(*DiffOptions) error) *cobra.Command {
	opts := &DiffOptions{App: app}
	cmd := &cobra.Command{
		Use:   "diff <agent> [--commit <hash> [-- <path>...]]",
		Short: "Show an agent's work against the base branch",
		Long: `Show what an agent changed: its branch against the base branch (git diff
<base>...swarm/<agent>: only the agent's side, not what the base branch did
since), then, set apart, what its worktree holds uncommitted (git diff
HEAD there) and the untracked files. 'swarm down' commits the uncommitted
work before it keeps or merges the branch.

The patch is coloured by git on a terminal (--color always|never|auto).
--stat prints the files and their changed lines instead of the patch. It
only reads, and works with or without a running supervisor.

--json prints {"agent", "branch", "base", "commits", "files": [{"path",
"status", "added", "deleted", "binary"}], "worktree", "uncommitted":
[...same...], "untracked"}; status is A, M, D or T.

--commit reads one commit of the agent's branch instead, as a reviewer
does: git diff <base>...<commit>, of the paths after -- when given. The
commit must be on swarm/<agent>. --json then prints {"agent", "branch",
"base", "commit", "paths", "diff"}. A review-mode agent may run it: a
review request whose diff was cut names the files it left out.

Exit status 0 whether or not there are changes; 1 when the agent has no
branch yet (it has not run) or git fails; 2 for a usage error.`,
		Example: `  swarm diff backend --stat
  swarm diff backend | less -R
  swarm diff backend --json | jq -r '.files[].path'
  swarm diff backend --commit 1a2b3c4 -- api/users.go`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: app.completeAgents(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 && len(args) > 1 || cmd.ArgsLenAtDash() == 0 {
				return usagef("give one agent, then the paths after --: swarm diff <agent> --commit <hash> -- <path>")
			}
			opts.Agent, opts.Paths = args[0], args[1:]
			if len(opts.Paths) > 0 && opts.Commit == "" {
				return usagef("paths after -- need --commit <hash>: swarm diff %s --commit <hash> -- <path>", opts.Agent)
			}
			if runF != nil {
				return runF(opts)
			}
			return runDiff(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Stat, "stat", false, "list the changed files and their line counts instead of the patch")
	f.StringVar(&opts.Color, "color", "auto", "colour the patch: always, never or auto (on a terminal)")
	f.StringVar(&opts.Commit, "commit", "", "read this commit of the agent's branch against the base branch (a review)")
	cmd.RegisterFlagCompletionFunc("color", cobra.FixedCompletions([]cobra.Completion{"auto", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runDiff(ctx context.Context, opts *DiffOptions) error {
	app := opts.App
	color := opts.Color
	switch color {
	case "auto":
		color = "never"
		if !app.JSON && isTerminal(app.Stdout) {
			color = "always"
		}
	case "always", "never":
	default:
		return usagef("--color must be always, never or auto, got %q", opts.Color)
	}
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	if _, err := app.knownAgent(ctx, l, cfg, opts.Agent); err != nil {
		return err
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Meta: st})
	if err != nil {
		return err
	}
	if opts.Commit != "" {
		return printReviewedDiff(ctx, app, m, opts, color)
	}
	c, err := m.Changes(ctx, opts.Agent)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(c)
	}
	flags := []string{"--color=" + color}
	if opts.Stat {
		flags = append(flags, "--stat")
	}
	var w io.Writer = app.Stdout
	if color == "never" {
		// The patch is the agents' text; without git's own colours (which
		// termsafe would show as text) it is shown safely too.
		sw := termsafe.NewWriter(app.Stdout)
		defer sw.Flush()
		w = sw
	}
	if len(c.Files) == 0 {
		fmt.Fprintf(w, "%s has no changes against %s (%s).\n", c.Branch, c.Base, downPlural(len(c.Commits), "commit"))
	} else {
		fmt.Fprintf(w, "%s against %s: %s, %s (git diff %s...%s)\n\n", c.Branch, c.Base, downPlural(len(c.Commits), "commit"),
			downPlural(len(c.Files), "file"), c.Base, c.Branch)
		text, err := m.DiffText(ctx, opts.Agent, false, flags...)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, text)
	}
	if len(c.Uncommitted) == 0 && len(c.Untracked) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nUncommitted in %s (not on %s yet; 'swarm down' commits it):\n", rel(l.Root, c.Worktree), c.Branch)
	if len(c.Uncommitted) > 0 {
		text, err := m.DiffText(ctx, opts.Agent, true, flags...)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s\n", text)
	}
	if len(c.Untracked) > 0 {
		fmt.Fprintf(w, "\nUntracked: %s\n", text.ListSome(c.Untracked, 20))
	}
	return nil
}

// printReviewedDiff prints one commit of the agent's branch against the
// base branch (swarm diff --commit).
func printReviewedDiff(ctx context.Context, app *App, m *worktree.Manager, opts *DiffOptions, color string) error {
	flags := []string{"--color=" + color}
	if opts.Stat {
		flags = append(flags, "--stat")
	}
	d, err := m.ReviewedDiff(ctx, opts.Agent, opts.Commit, opts.Paths, flags...)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(d)
	}
	if d.Diff == "" {
		fmt.Fprintf(app.Stdout, "%s at %s changes nothing against %s here.\n", d.Branch, d.Commit[:12], d.Base)
		return nil
	}
	fmt.Fprintf(app.Stdout, "%s at %s against %s (git diff %s...%s)\n\n%s\n", d.Branch, d.Commit[:12], d.Base, d.Base, d.Commit[:12], d.Diff)
	return nil
}
