package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/team"
	"github.com/swarmhq/swarm/verbs"
)

// TeamOptions are the inputs of `swarm team`.
type TeamOptions struct {
	App *App
}

func newTeamCmd(app *App, runF func(*TeamOptions) error) *cobra.Command {
	opts := &TeamOptions{App: app}
	return &cobra.Command{
		Use:   "team",
		Short: "Show the team launch: its state, the core's ACKs and the breaches",
		Long: `Show the team launch of swarm.toml's [team] (DESIGN §9.5): its state
(INIT, TEAM_PROBED, TEAM_READY, MEMBERS_READY, CORE_READY, RUNNING or
FALLBACK), which core agents acknowledged their CORE_BOOTSTRAP_PING, and the
protocol breaches recorded. The supervisor runs the launch during 'swarm up';
'swarm events' has every step.

--json prints seed 003's RUNNING record: {"state", "team_name",
"launch_mode" ("team_launch"), "launch_method" ("supervisor"),
"selected_domains" (the non-core members), "active_core_members",
"core_ready_ack": {"<NAME>_CORE_READY_ACK": bool}, "breaches": [{"code",
"at", "agent"}], "relaunches", "escalation", "updated_at"}.`,
		Example: `  swarm team
  swarm team --json | jq .core_ready_ack`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runTeam(cmd.Context(), opts)
		},
	}
}

func runTeam(ctx context.Context, opts *TeamOptions) error {
	app := opts.App
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	who, err := app.callerOf(ctx, st, cfg)
	if err != nil {
		return err
	}
	rec, ok, err := verbs.Team(ctx, who, cfg, st)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("swarm.toml has no [team]; add one (name, core) to launch the agents as a team")
	}
	if app.JSON {
		return app.printJSON(rec)
	}
	w := app.Stdout
	fmt.Fprintf(w, "team %s: %s\n", rec.TeamName, rec.State)
	fmt.Fprintf(w, "  core:    %s\n", strings.Join(rec.ActiveCoreMembers, ", "))
	fmt.Fprintf(w, "  members: %s\n", strings.Join(rec.SelectedDomains, ", "))
	codes := make([]string, 0, len(rec.CoreReadyAck))
	for c := range rec.CoreReadyAck {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		mark := "waiting"
		if rec.CoreReadyAck[c] {
			mark = "acknowledged"
		}
		fmt.Fprintf(w, "  %-40s %s\n", c, mark)
	}
	if rec.Relaunches > 0 {
		fmt.Fprintf(w, "  relaunches: %d\n", rec.Relaunches)
	}
	for _, b := range rec.Breaches {
		fmt.Fprintf(w, "  breach %s  %s  %s\n", b.At.Local().Format("2006-01-02 15:04:05"), b.Code, b.Agent)
	}
	if rec.Escalation != nil {
		fmt.Fprintf(w, "  escalation %d: 'swarm escalation resume %d' starts the members, 'swarm escalation abort %d' stops the swarm\n", *rec.Escalation, *rec.Escalation, *rec.Escalation)
	}
	return nil
}

// teamLine is the launch on one line, for status: "team analysis:
// MEMBERS_READY (core ready: alpha; waiting for beta)".
func teamLine(r team.Record) string {
	var ready, waiting []string
	for _, c := range r.ActiveCoreMembers {
		if r.CoreReadyAck[team.AckCode(c)] {
			ready = append(ready, c)
		} else {
			waiting = append(waiting, c)
		}
	}
	line := fmt.Sprintf("team %s: %s", r.TeamName, r.State)
	if r.State == team.Running {
		return line
	}
	var parts []string
	if len(ready) > 0 {
		parts = append(parts, "core ready: "+strings.Join(ready, ", "))
	}
	if len(waiting) > 0 {
		parts = append(parts, "waiting for "+strings.Join(waiting, ", "))
	}
	if n := len(r.Breaches); n > 0 {
		parts = append(parts, fmt.Sprintf("%d breach(es): 'swarm team'", n))
	}
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, "; ") + ")"
	}
	return line
}
