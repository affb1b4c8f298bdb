package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/repo"
)

// PauseOptions are the inputs of `swarm pause` and `swarm resume`.
type PauseOptions struct {
	App    *App
	Agent  string
	Resume bool
}

func init() {
	commands = append(commands, func(app *App) *cobra.Command { return newPauseCmd(app, false) },
		func(app *App) *cobra.Command { return newPauseCmd(app, true) })
}

func newPauseCmd(app *App, resume bool) *cobra.Command {
	opts := &PauseOptions{App: app, Resume: resume}
	cmd := &cobra.Command{
		Use:   "pause <agent>",
		Short: "Pause an agent: its running session finishes, then it waits",
		Long: `Pause an agent of the running supervisor. A running session is not
cancelled: it finishes first (send urgent mail to interrupt it), and then
the agent stays Paused, starting no session even when mail or tasks
arrive, until 'swarm resume'. Mail sent meanwhile waits in its mailbox.

The supervisor must be running ('swarm up'). --json prints
{"agent", "action", "ok"}.`,
		Example: `  swarm pause backend
  swarm resume backend`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.completeAgents(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Agent = args[0]
			return runPause(cmd.Context(), opts)
		},
	}
	if resume {
		cmd.Use = "resume <agent>"
		cmd.Short = "Resume a paused agent"
		cmd.Long = `Resume an agent that 'swarm pause' paused: it starts a session at once
if it has work (mail or a ready task), else it goes Idle. Resuming an agent
whose pause is still pending (its session has not finished yet) cancels
the pause.

The supervisor must be running ('swarm up'). --json prints
{"agent", "action", "ok"}.`
		cmd.Example = `  swarm resume backend`
	}
	return cmd
}

func runPause(ctx context.Context, opts *PauseOptions) error {
	app := opts.App
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	if _, err := agentIn(cfg, opts.Agent); err != nil {
		return err
	}
	if err := pauseAgent(ctx, l, opts.Agent, !opts.Resume); err != nil {
		return err
	}
	action := "pause"
	if opts.Resume {
		action = "resume"
	}
	if app.JSON {
		return app.printJSON(map[string]any{"agent": opts.Agent, "action": action, "ok": true})
	}
	if opts.Resume {
		fmt.Fprintf(app.Stdout, "resuming %s\n", opts.Agent)
	} else {
		fmt.Fprintf(app.Stdout, "pausing %s: a running session finishes first ('swarm resume %s' undoes it)\n", opts.Agent, opts.Agent)
	}
	return nil
}

// pauseAgent asks the running supervisor to pause or resume an agent.
func pauseAgent(ctx context.Context, l repo.Layout, agent string, pause bool) error {
	op := control.OpResume
	if pause {
		op = control.OpPause
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := control.Call(ctx, l, control.Request{Op: op, Agent: agent})
	switch {
	case errors.Is(err, control.ErrNoSupervisor):
		return errNoSupervisor
	case err != nil && resp.Error != "":
		return fmt.Errorf("cannot %s %s: %s", op, agent, resp.Error)
	case err != nil:
		return fmt.Errorf("cannot %s %s: %w", op, agent, err)
	}
	return nil
}
