package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// ReloadOptions are the inputs of `swarm reload`.
type ReloadOptions struct {
	App *App
}

func newReloadCmd(app *App, runF func(*ReloadOptions) error) *cobra.Command {
	opts := &ReloadOptions{App: app}
	return &cobra.Command{
		Use:   "reload",
		Short: "Apply an edited swarm.toml to the running swarm, without a restart",
		Long: `Ask the running supervisor to read swarm.toml again. What can change
safely is applied: [budget], [prices] and [notify] at once (an agent held
by a budget that is no longer spent is released, its escalation resolved
by swarm), [liveness] nudges and task polling at once, and each agent's
role, mode, strategy, capabilities, session_timeout, max_turns and budget
from its next session. What cannot change while the swarm runs (engines,
models, interrupt, new or removed agents, [prompt], [errors], [mailbox],
[worktree], [env], workflows, the team, heartbeat, stall_after) is listed
as needing a restart ('swarm down', then 'swarm up').

A swarm.toml with an error is refused with its file:line and the running
configuration stays (exit 1). Sending SIGHUP to the 'swarm up' process
does the same as this command. For the operator only.

--json prints {"path", "applied": [...], "restart": [...]}.`,
		Example: `  $EDITOR swarm.toml   # tokens = 5_000_000
  swarm reload
  swarm reload --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runReload(cmd.Context(), opts)
		},
	}
}

func runReload(ctx context.Context, opts *ReloadOptions) error {
	app := opts.App
	who, err := app.callerOf(ctx, nil, nil)
	if err != nil {
		return err
	}
	rep, err := verbs.Reload(ctx, who, socketRuntime{app: app})
	if err != nil {
		return err
	}
	l, err := app.layout()
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(rep)
	}
	printReload(app.Stdout, l.Root, rep)
	return nil
}

// printReload says what a reload applied and what waits for a restart.
func printReload(w io.Writer, root string, rep swarm.ReloadReport) {
	if len(rep.Applied) == 0 && len(rep.Restart) == 0 {
		fmt.Fprintf(w, "reloaded %s: nothing changed\n", rel(root, rep.Path))
		return
	}
	fmt.Fprintf(w, "reloaded %s\n", rel(root, rep.Path))
	if len(rep.Applied) > 0 {
		fmt.Fprintln(w, "applied:")
		for _, s := range rep.Applied {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(rep.Restart) > 0 {
		fmt.Fprintln(w, "needs a restart ('swarm down', then 'swarm up'):")
		for _, s := range rep.Restart {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
}
