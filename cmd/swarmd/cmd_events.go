package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/swarmhq/swarm/fsm"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/mailbox"
)

// EventsOptions are the inputs of `swarm events`.
type EventsOptions struct {
	App    *App
	Agent  string
	Since  int64
	Limit  int
	Follow bool
	Poll   time.Duration
}

func newEventsCmd(app *App, runF func(*EventsOptions) error) *cobra.Command {
	opts := &EventsOptions{App: app, Poll: 200 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List lifecycle transitions, oldest first",
		Long: `List the agents' lifecycle transitions as recorded in the database, oldest
first: when, which agent, from which state to which, why, and in which
session. An agent's first event has no from state.

--json prints an array of {"id", "at", "agent", "from", "to", "cause",
"session_seq"}; with -f it prints one such object per line as events happen.`,
		Example: `  swarm events --agent backend
  swarm events --since 120 --json
  swarm events -f`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runEvents(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Agent, "agent", "", "only this agent's events")
	f.Int64Var(&opts.Since, "since", 0, "only events after event `ID`")
	f.IntVar(&opts.Limit, "limit", 0, "only the newest N events (0 means all)")
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new events until interrupted")
	cmd.RegisterFlagCompletionFunc("agent", app.completeAgents(false))
	return cmd
}

func runEvents(ctx context.Context, opts *EventsOptions) error {
	app := opts.App
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	if opts.Agent != "" {
		if _, err := app.knownAgent(ctx, l, cfg, opts.Agent); err != nil {
			return err
		}
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	evs, err := st.Events(ctx, mailbox.EventFilter{Agent: opts.Agent, SinceID: opts.Since, Limit: opts.Limit})
	if err != nil {
		return err
	}
	if !opts.Follow {
		if app.JSON {
			if evs == nil {
				evs = []fsm.Event{}
			}
			return app.printJSON(evs)
		}
		if len(evs) == 0 {
			msg, err := noEvents(ctx, st, opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(app.Stdout, msg)
		}
		for _, e := range evs {
			printEvent(app, e)
		}
		return nil
	}
	last := opts.Since
	for {
		for _, e := range evs {
			printEvent(app, e)
			last = e.ID
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Poll):
		}
		evs, err = st.Events(ctx, mailbox.EventFilter{Agent: opts.Agent, SinceID: last})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// noEvents says why the listing is empty: nothing happened yet, or
// nothing after --since (naming the newest event).
func noEvents(ctx context.Context, st mailbox.Store, opts *EventsOptions) (string, error) {
	of := ""
	if opts.Agent != "" {
		of = " of " + opts.Agent
	}
	newest, err := st.Events(ctx, mailbox.EventFilter{Agent: opts.Agent, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(newest) == 0 {
		return fmt.Sprintf("no events%s yet ('swarm up' starts the agents)", of), nil
	}
	return fmt.Sprintf("no events%s after #%d; the newest is #%d", of, opts.Since, newest[0].ID), nil
}

func printEvent(app *App, e fsm.Event) {
	if app.JSON {
		if err := json.NewEncoder(app.Stdout).Encode(e); err != nil {
			slog.Warn("print event", "err", err)
		}
		return
	}
	from := "-"
	if e.From != nil {
		from = *e.From
	}
	subject := e.Subject
	if e.SubjectKind != fsm.SubjectAgent {
		subject = string(e.SubjectKind) + " " + e.Subject
	}
	fmt.Fprintf(app.Stdout, "%6d  %s  %-12s s%-3d %s → %s  %s\n", e.ID, e.At.Local().Format("2006-01-02 15:04:05.000"), subject, e.SessionSeq, from, e.To, oneLineCause(e.Cause))
}

// oneLineCause keeps a table row on one line: a cause of several lines
// (an error with its output) shows its first line and "…"; --json has it
// whole.
func oneLineCause(s string) string {
	line, _, more := strings.Cut(strings.TrimRight(s, "\n"), "\n")
	line = strings.TrimRight(line, "\r")
	if more {
		return line + " …"
	}
	return line
}
