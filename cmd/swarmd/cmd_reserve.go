package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/worktree"
)

// ReserveOptions are the inputs of `swarm reserve`.
type ReserveOptions struct {
	App       *App
	Globs     []string
	Exclusive bool
	TTL       time.Duration
	Reason    string
	Agent     string
}

// newReserveCmd builds `swarm reserve`; a non-nil runF runs instead of the
// command, with the parsed options (the flag tests' seam).
func newReserveCmd(app *App, runF func(*ReserveOptions) error) *cobra.Command {
	opts := &ReserveOptions{App: app}
	cmd := &cobra.Command{
		Use:   "reserve <glob>... [--exclusive] [--ttl D] [--reason TEXT]",
		Short: "Reserve files you are about to change, so teammates keep clear",
		Long: `Reserve the files some globs match (DESIGN §14): an advisory lease,
stored, listed in every teammate's prompt (Environment) until it is released
('swarm release'), it lapses (--ttl), or its agent retires.

A glob is ` + swarm.GlobHelp + `.

--exclusive: while it holds, a session of another agent that commits to one
of its files raises a 'reservation' escalation (a warning, naming both
agents and the files; nobody is held). An exclusive reservation that
overlaps another agent's exclusive one is refused, naming the holder; any
other overlap is allowed and warned of. A glob that matches no file tracked
on the agent's branch is stored with a warning (you may reserve a file you
are about to create). Reserving a glob you hold already refreshes it: its
--exclusive, --ttl and --reason are replaced.

Run from an agent's session (for that agent; needs can_edit_files), or by
the operator for an agent with --agent. --json prints {"reservations":
[{"id", "agent", "glob", "exclusive", "reason", "created_at", "expires_at",
"released_at"}], "warnings": [...]}.`,
		Example: `  swarm reserve 'api/**' --exclusive --ttl 2h --reason "migrating the schema"
  swarm reserve docs/setup.md 'web/src/*.ts'
  swarm reserve db/ --exclusive --agent backend`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("swarm reserve takes one or more globs, such as: swarm reserve 'api/**' --exclusive")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Globs = args
			if runF != nil {
				return runF(opts)
			}
			return runReserve(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Exclusive, "exclusive", false, "others' commits to these files raise a reservation escalation")
	f.DurationVar(&opts.TTL, "ttl", 0, "how long it lasts, such as 90m or 2h (default: until released)")
	f.StringVar(&opts.Reason, "reason", "", "why, in one short line teammates see")
	f.StringVar(&opts.Agent, "agent", "", "reserve for this agent (operator only; default: your session's agent)")
	return cmd
}

func runReserve(ctx context.Context, opts *ReserveOptions) error {
	app := opts.App
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := operatorsAgent(cfg, who, opts.Agent, "whose reservation? run it from an agent's session, or pass --agent <name>"); err != nil {
		return err
	}
	if opts.TTL < 0 {
		return usagef("--ttl %s is negative: give how long the reservation lasts, such as 2h", opts.TTL)
	}
	tracked := func(ctx context.Context, agent string) ([]string, error) {
		m, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Meta: st})
		if err != nil {
			return nil, err
		}
		return m.TrackedFiles(ctx, agent)
	}
	res, err := verbs.Reserve(ctx, who, verbs.ReserveRequest{Store: st, Agent: opts.Agent, Globs: opts.Globs,
		Exclusive: opts.Exclusive, TTL: opts.TTL, Reason: opts.Reason, Now: time.Now(), Tracked: tracked,
		Known: func(a string) bool { _, ok := cfg.Agent(a); return ok }})
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(res)
	}
	for _, r := range res.Reservations {
		fmt.Fprintf(app.Stdout, "reserved %s for %s%s\n", r.Glob, r.Agent, reservationTerms(r))
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(app.Stderr, "swarm: warning: %s\n", w)
	}
	return nil
}

// reservationTerms is ", exclusive, until 14:30 (why)" for a reservation.
func reservationTerms(r mailbox.Reservation) string {
	s := ""
	if r.Exclusive {
		s += ", exclusive"
	} else {
		s += ", shared"
	}
	if r.ExpiresAt != nil {
		s += ", until " + r.ExpiresAt.Local().Format("2006-01-02 15:04")
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// operatorsAgent checks the --agent of a reservation command run by the
// operator, who must name one that swarm.toml has (missing: a usage error
// saying missing). A session's --agent is for the verb's rule to judge.
func operatorsAgent(cfg *config.Config, who identity.Caller, agent, missing string) error {
	if !who.IsOperator() {
		return nil
	}
	if agent == "" {
		return usagef("%s", missing)
	}
	_, err := agentIn(cfg, agent)
	return err
}
