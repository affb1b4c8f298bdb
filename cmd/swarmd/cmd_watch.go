package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/swarmhq/swarm/lifecycle"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/tui"
)

// WatchOptions are the inputs of `swarm watch`.
type WatchOptions struct {
	App   *App
	NoTUI bool
}

func newWatchCmd(app *App, runF func(*WatchOptions) error) *cobra.Command {
	opts := &WatchOptions{App: app}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Attach the live view to the running swarm",
		Long: `Attach the live view of 'swarm up' to the supervisor running in this
repository, from another terminal: agents and their states, the latest
mail, the selected agent's session log, and the same keys (m, u, i, p,
enter, ?). q leaves the view; the swarm keeps running.

When stdout is not a terminal, or with --no-tui, it prints one line per
transition and message instead, as 'swarm up --no-tui' does; with --json,
one JSON object per notice: {"at", "agent", "kind", "from", "to", "cause",
"session_seq", "message", "text"}. It ends when the supervisor stops.

With no supervisor running it exits 1.`,
		Example: `  swarm watch
  swarm watch --json | jq -c 'select(.kind == "transition")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runWatch(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.NoTUI, "no-tui", false, "print plain lines instead of the full-screen view")
	return cmd
}

func runWatch(ctx context.Context, opts *WatchOptions) error {
	app := opts.App
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	stream, err := control.Watch(ctx, l)
	if errors.Is(err, control.ErrNoSupervisor) {
		return errNoSupervisor
	}
	if err != nil {
		return err
	}
	defer stream.Close()

	pid, _ := supervisorPid(ctx, l)
	if app.JSON || opts.NoTUI || !isTerminal(app.Stdout) {
		// On stderr, so stdout stays one notice per line; the stream is
		// live from here on.
		fmt.Fprintf(app.Stderr, "swarm watch: attached to the supervisor (pid %d); Ctrl-C leaves, the swarm keeps running\n", pid)
		return watchLines(ctx, app, stream)
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	err = tui.Run(ctx, &watchSource{storeSource: newStoreSource(l, cfg, st, app.poster(st, l, cfg)), stream: stream}, tui.Options{
		Title: fmt.Sprintf("swarm watch · %s · pid %d", l.Root, pid),
	})
	if errors.Is(err, tui.ErrSourceEnded) {
		fmt.Fprintln(app.Stderr, "swarm watch: the supervisor stopped")
		return nil
	}
	return err
}

// watchSource is the live view's source in `swarm watch`: notices from the
// control socket, the rest as in `swarm up`.
type watchSource struct {
	*storeSource
	stream *control.Stream
}

func (s *watchSource) Next(ctx context.Context) (lifecycle.Notice, error) {
	// The view is the stream's only reader: when it is done, so is the
	// stream.
	stop := context.AfterFunc(ctx, func() { s.stream.Close() })
	defer stop()
	n, err := nextNotice(s.stream)
	if err != nil {
		if ctx.Err() != nil {
			return lifecycle.Notice{}, context.Cause(ctx)
		}
		return lifecycle.Notice{}, err
	}
	return n, nil
}

func nextNotice(s *control.Stream) (lifecycle.Notice, error) {
	var n lifecycle.Notice
	raw, err := s.Next()
	if err != nil {
		return n, err
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return n, fmt.Errorf("bad notice from the supervisor: %w", err)
	}
	return n, nil
}

// watchLines prints the notices as lines (or JSON) until the supervisor
// stops or ctx ends.
func watchLines(ctx context.Context, app *App, s *control.Stream) error {
	enc := json.NewEncoder(app.Stdout)
	stopped := false
	for {
		n, err := nextNotice(s)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, io.EOF) && stopped:
			fmt.Fprintln(app.Stderr, "swarm watch: the supervisor stopped")
			return nil
		case errors.Is(err, io.EOF):
			return errors.New("the supervisor went away without stopping (it may have crashed); 'swarm up' recovers every agent")
		case err != nil:
			return err
		}
		stopped = stopped || n.Kind == lifecycle.NoticeStopped
		if app.JSON {
			if err := enc.Encode(n); err != nil {
				return err
			}
			continue
		}
		if line := formatNotice(n); line != "" {
			if _, err := fmt.Fprintln(app.Stdout, line); err != nil {
				return err
			}
		}
	}
}
