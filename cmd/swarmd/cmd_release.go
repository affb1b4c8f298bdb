package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/verbs"
)

// ReleaseOptions are the inputs of `swarm release`.
type ReleaseOptions struct {
	App   *App
	Globs []string
	Agent string
}

func newReleaseCmd(app *App, runF func(*ReleaseOptions) error) *cobra.Command {
	opts := &ReleaseOptions{App: app}
	cmd := &cobra.Command{
		Use:   "release [<glob>...]",
		Short: "Release file reservations: the globs named, or all of yours",
		Long: `Release file reservations taken with 'swarm reserve': the globs named
(as they were reserved; 'swarm reservations' lists them), or without any,
every one of the agent's. A glob not held is warned of and skipped.
Retiring an agent releases its reservations too.

Run from an agent's session (its own agent's), or by the operator for an
agent with --agent. --json prints {"released": [...], "warnings": [...]}.`,
		Example: `  swarm release 'api/**'
  swarm release
  swarm release --agent backend`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Globs = args
			if runF != nil {
				return runF(opts)
			}
			return runRelease(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "release this agent's (operator only; default: your session's agent)")
	return cmd
}

func runRelease(ctx context.Context, opts *ReleaseOptions) error {
	app := opts.App
	_, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := operatorsAgent(cfg, who, opts.Agent, "whose reservations? pass --agent <name> ('swarm reservations' lists them)"); err != nil {
		return err
	}
	res, err := verbs.Release(ctx, who, verbs.ReleaseRequest{Store: st, Agent: opts.Agent, Globs: opts.Globs, Now: time.Now()})
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(res)
	}
	for _, r := range res.Released {
		fmt.Fprintf(app.Stdout, "released %s of %s\n", r.Glob, r.Agent)
	}
	if len(res.Released) == 0 && len(opts.Globs) == 0 {
		fmt.Fprintln(app.Stdout, "no reservations to release")
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(app.Stderr, "swarm: warning: %s\n", w)
	}
	return nil
}
