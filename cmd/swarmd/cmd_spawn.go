package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/worktree"
)

// SpawnOptions are the inputs of `swarm spawn`.
type SpawnOptions struct {
	App       *App
	Name      string
	Role      string
	Mode      string
	Strategy  string
	Engine    string
	Task      string
	Ephemeral bool
}

func newSpawnCmd(app *App, runF func(*SpawnOptions) error) *cobra.Command {
	opts := &SpawnOptions{App: app}
	cmd := &cobra.Command{
		Use:   "spawn <name> --role <role>",
		Short: "Add an agent to the running swarm",
		Long: `Add an agent to the swarm at run time (DESIGN §9.5): it gets its own
worktree and branch (swarm/<name>) from the base branch, its own runner, and
a task mail from whoever spawned it, saying its role (and --task). It is
stored with who spawned it, so 'swarm status' lists it, 'swarm down' merges
its work, and the next 'swarm up' brings it back after a crash.

Run by the operator, or from an agent's session with can_spawn_sessions
(coordinate mode); other sessions are refused. [spawn] max_agents (default
20) counts every agent not retired, configured ones included: a spawn past
it is refused. A name swarm.toml configures but that is not running is
started with its swarm.toml settings (--role and the others are not used).

--ephemeral: the agent retires when it goes Idle with no work left; its
worktree and branch stay for 'swarm down' or 'swarm retire' to merge or
discard. Without a running supervisor the agent is stored and starts with
the next 'swarm up'.

--json prints {"agent", "spawned_by", "role", "mode", "strategy", "engine",
"task", "ephemeral", "configured", "branch", "mail_id", "started"}.`,
		Example: `  swarm spawn worker-1 --role "write the tests for the users API" --task T-7 --ephemeral
  swarm spawn reviewer-2 --role "review the login change" --mode review
  swarm spawn planner --role "split the epic" --mode coordinate --strategy dag`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("swarm spawn takes one name, such as: swarm spawn worker-1 --role \"write the tests\"")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runSpawn(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Role, "role", "", "what the new agent is for (its role, and its first task mail)")
	f.StringVar(&opts.Mode, "mode", "", "execute, coordinate, or a profile (code, review, delegate); default [defaults]")
	f.StringVar(&opts.Strategy, "strategy", "", "a strategy of the mode; default the mode's")
	f.StringVar(&opts.Engine, "engine", "", "the engine it runs on; default [defaults]")
	f.StringVar(&opts.Task, "task", "", "the task it is spawned for")
	f.BoolVar(&opts.Ephemeral, "ephemeral", false, "retire when it goes Idle with no work left")
	return cmd
}

func runSpawn(ctx context.Context, opts *SpawnOptions) error {
	app := opts.App
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if opts.Engine != "" {
		if err := checkEngineFlag(cfg, opts.Engine); err != nil {
			return err
		}
	}
	sup, running := ping(ctx, l)
	isRunning := func(name string) bool {
		a, err := st.Agent(ctx, name)
		if err != nil || a.State == lifecycle.Stopped || !running {
			return false
		}
		for _, n := range sup.Agents {
			if n == name {
				return true
			}
		}
		return false
	}
	sp, m, err := verbs.Spawn(ctx, who, cfg, st, app.poster(st, l, cfg), verbs.SpawnRequest{Name: opts.Name, Role: opts.Role, Mode: opts.Mode,
		Strategy: opts.Strategy, Engine: opts.Engine, Task: opts.Task, Ephemeral: opts.Ephemeral, Running: isRunning}, time.Now())
	if err != nil {
		return err
	}
	started, err := swarm.StartSpawned(ctx, l, opts.Name)
	if err != nil {
		return fmt.Errorf("%s is spawned and stored, but the supervisor could not start it: %w; the next 'swarm up' starts it", opts.Name, err)
	}
	branch := worktree.Branch(opts.Name)
	if app.JSON {
		return app.printJSON(map[string]any{"agent": sp.Name, "spawned_by": sp.SpawnedBy, "role": sp.Role, "mode": sp.Mode,
			"strategy": sp.Strategy, "engine": sp.Engine, "task": sp.Task, "ephemeral": sp.Ephemeral, "configured": sp.Configured,
			"branch": branch, "mail_id": m.ID, "started": started})
	}
	where := "started on branch " + branch
	if !started {
		where = "no swarm is running: it starts with the next 'swarm up'"
	}
	fmt.Fprintf(app.Stdout, "spawned %s (by %s; task mail #%d): %s\n", sp.Name, sp.SpawnedBy, m.ID, where)
	return nil
}
