package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// PauseOptions are the inputs of `swarm pause` and `swarm resume`.
type PauseOptions struct {
	App    *App
	Agent  string
	Resume bool
}

func newPauseCmd(app *App, resume bool, runF func(*PauseOptions) error) *cobra.Command {
	opts := &PauseOptions{App: app, Resume: resume}
	cmd := &cobra.Command{
		Use:   "pause <agent>",
		Short: "Pause an agent: its running session finishes, then it waits",
		Long: `Pause an agent of the running supervisor. An agent between sessions
(Idle, CoolingDown) pauses at once. A running session is not cancelled: it
finishes first (send urgent mail to interrupt it). Then the agent stays
Paused, starting no session even when mail or tasks arrive, until 'swarm
resume'. Mail sent meanwhile waits in its mailbox.

The supervisor must be running ('swarm up'). --json prints
{"agent", "action", "ok", "effect"}, effect being now, after_session or
already.`,
		Example: `  swarm pause backend
  swarm resume backend`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.completeAgents(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Agent = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runPause(cmd.Context(), opts)
		},
	}
	if resume {
		cmd.Use = "resume <agent>"
		cmd.Short = "Resume a paused agent"
		cmd.Long = `Resume an agent that 'swarm pause' paused: it starts a session at once
if it has work (mail or a ready task), else it goes Idle. Resuming an agent
whose pause is still pending (its session has not finished yet) cancels
the pause. Resuming an agent that is neither paused nor pausing is an
error (exit 1).

The supervisor must be running ('swarm up'). --json prints
{"agent", "action", "ok", "effect"}, effect being resumed or cancelled.`
		cmd.Example = `  swarm resume backend`
	}
	return cmd
}

func runPause(ctx context.Context, opts *PauseOptions) error {
	app := opts.App
	action := "pause"
	if opts.Resume {
		action = "resume"
	}
	who, err := app.callerOf(ctx, nil, nil)
	if err != nil {
		return err
	}
	verb := verbs.Pause
	if opts.Resume {
		verb = verbs.Resume
	}
	effect, err := verb(ctx, who, socketRuntime{app: app}, opts.Agent)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(map[string]any{"agent": opts.Agent, "action": action, "ok": true, "effect": effect})
	}
	a := opts.Agent
	switch effect {
	case swarm.PauseNow:
		fmt.Fprintf(app.Stdout, "pausing %s now: it is between sessions, and starts none until 'swarm resume %s'\n", a, a)
	case swarm.PauseAlready:
		fmt.Fprintf(app.Stdout, "%s is already paused ('swarm resume %s' resumes it)\n", a, a)
	case swarm.PauseCancelled:
		fmt.Fprintf(app.Stdout, "cancelled the pause of %s: its session had not finished, and it carries on\n", a)
	case swarm.Resumed:
		fmt.Fprintf(app.Stdout, "resuming %s\n", a)
	default: // PauseAfterSession
		fmt.Fprintf(app.Stdout, "pausing %s: its running session finishes first ('swarm resume %s' undoes it)\n", a, a)
	}
	return nil
}

// pauseAgent asks the running supervisor to pause or resume an agent, and
// returns what that does (swarm.PauseNow, swarm.Resumed, ...).
func pauseAgent(ctx context.Context, l repo.Layout, agent string, pause bool) (string, error) {
	op := control.OpResume
	if pause {
		op = control.OpPause
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := control.Call(ctx, l, control.Request{Op: op, Agent: agent})
	switch {
	case errors.Is(err, control.ErrNoSupervisor):
		return "", errNoSupervisor
	case err != nil && strings.Contains(resp.Error, swarm.ErrNotPaused.Error()):
		return "", errors.New(resp.Error)
	case err != nil && resp.Error != "":
		return "", fmt.Errorf("cannot %s %s: %s", op, agent, resp.Error)
	case err != nil:
		return "", fmt.Errorf("cannot %s %s: %w", op, agent, err)
	}
	var d struct {
		Effect string `json:"effect"`
	}
	_ = json.Unmarshal(resp.Data, &d) // an older supervisor says nothing
	return d.Effect, nil
}
