package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/verbs"
)

// ReservationsOptions are the inputs of `swarm reservations`.
type ReservationsOptions struct {
	App *App
	All bool
}

func newReservationsCmd(app *App, runF func(*ReservationsOptions) error) *cobra.Command {
	opts := &ReservationsOptions{App: app}
	cmd := &cobra.Command{
		Use:   "reservations [--all]",
		Short: "List the file reservations",
		Long: `List the file reservations ('swarm reserve') that hold now, oldest
first: who holds which glob, exclusive or shared, until when, and why.
--all adds the released and lapsed ones. --json prints an array of
{"id", "agent", "glob", "exclusive", "reason", "created_at", "expires_at",
"released_at"}.`,
		Example: `  swarm reservations
  swarm reservations --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runReservations(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "released and lapsed reservations too")
	return cmd
}

func runReservations(ctx context.Context, opts *ReservationsOptions) error {
	app := opts.App
	_, _, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	rs, err := verbs.Reservations(ctx, who, verbs.ReservationsRequest{Store: st, All: opts.All, Now: now})
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(rs)
	}
	if len(rs) == 0 {
		fmt.Fprintln(app.Stdout, "no file reservations")
		return nil
	}
	w := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AGENT\tGLOB\tKIND\tUNTIL\tREASON")
	for _, r := range rs {
		kind := "shared"
		if r.Exclusive {
			kind = "exclusive"
		}
		var until string
		switch {
		case r.ReleasedAt != nil && r.ExpiresAt != nil && !r.ReleasedAt.Before(*r.ExpiresAt):
			until = "lapsed " + r.ExpiresAt.Local().Format("2006-01-02 15:04")
		case r.ReleasedAt != nil:
			until = "released " + r.ReleasedAt.Local().Format("2006-01-02 15:04")
		case r.ExpiresAt != nil && !r.ExpiresAt.After(now):
			until = "lapsed " + r.ExpiresAt.Local().Format("2006-01-02 15:04")
		case r.ExpiresAt != nil:
			until = r.ExpiresAt.Local().Format("2006-01-02 15:04")
		default:
			until = "until released"
		}
		reason := r.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Agent, r.Glob, kind, until, reason)
	}
	return w.Flush()
}
