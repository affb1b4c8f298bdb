package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// RetireOptions are the inputs of `swarm retire`.
type RetireOptions struct {
	App     *App
	Name    string
	Merge   bool
	Squash  bool
	Discard bool
}

func newRetireCmd(app *App, runF func(*RetireOptions) error) *cobra.Command {
	opts := &RetireOptions{App: app}
	cmd := &cobra.Command{
		Use:   "retire <name> [--merge|--squash|--discard]",
		Short: "End a spawned agent, and merge, squash or discard its work",
		Long: `End an agent that 'swarm spawn' added (DESIGN §9.5): it is marked retired, a
running supervisor stops it (a running session ends as at shutdown), and
it becomes Stopped with cause "retired"; 'swarm status --json' marks it
"retired": true and max_agents no longer counts it.

Its worktree and branch are kept by default; --merge or --squash merges
its branch into the base branch as 'swarm down' does (refused while the
main checkout is dirty or off the base branch), --discard removes them.
Configured agents do not retire: remove them from swarm.toml instead.

For the operator only: it refuses to run inside an agent session. --json
prints {"agent", "stopped", "work"}, work being what 'swarm down --json'
prints for one agent (null when kept).`,
		Example: `  swarm retire worker-1
  swarm retire worker-1 --merge
  swarm retire worker-1 --discard --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("swarm retire takes one agent name, such as: swarm retire worker-1")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runRetire(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Merge, "merge", false, "merge its branch into the base branch")
	f.BoolVar(&opts.Squash, "squash", false, "squash its branch into one commit on the base branch")
	f.BoolVar(&opts.Discard, "discard", false, "remove its worktree and branch")
	cmd.MarkFlagsMutuallyExclusive("merge", "squash", "discard")
	return cmd
}

func runRetire(ctx context.Context, opts *RetireOptions) error {
	app := opts.App
	who, err := app.callerOf(ctx, nil, nil)
	if err != nil {
		return err
	}
	mode := swarm.DownKeep
	switch {
	case opts.Merge:
		mode = swarm.DownMerge
	case opts.Squash:
		mode = swarm.DownSquash
	case opts.Discard:
		mode = swarm.DownDiscard
	}
	l, cfg, st, err := app.openConfigured(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := verbs.Retire(ctx, who, verbs.RetireRequest{Config: cfg, Layout: l, Store: st, Name: opts.Name, Mode: mode})
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(res)
	}
	fmt.Fprintf(app.Stdout, "retired %s\n", res.Agent)
	if res.Work == nil && mode != swarm.DownKeep {
		fmt.Fprintf(app.Stdout, "%s: no worktree or branch; nothing to %s\n", res.Agent, mode)
	}
	if w := res.Work; w != nil {
		// As swarm down says it: "nothing to merge" when the branch had
		// no commits of its own, never a bare "merged".
		printDownAgent(app.Stdout, l.Root, res.BaseBranch, *w)
		if w.Error != "" {
			return fmt.Errorf("%s: %s", w.Agent, w.Error)
		}
		if w.Status == "conflict" {
			return fmt.Errorf("%s: its branch conflicts with the base branch in %v; resolve it by hand, or 'swarm retire %s --discard'", w.Agent, w.ConflictFiles, w.Agent)
		}
	}
	return nil
}
