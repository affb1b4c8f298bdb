package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/termsafe"
)

// LogsOptions are the inputs of `swarm logs`.
type LogsOptions struct {
	App     *App
	Agent   string
	Session int64
	Follow  bool
	Raw     bool
	Poll    time.Duration
}

func newLogsCmd(app *App, runF func(*LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{App: app, Poll: 200 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "logs <agent>",
		Short: "Print an agent's session log",
		Long: `Print the log of an agent's session: the conversation with the model
(text, tool calls and results) or an exec agent's output. An exec agent's
JSON event stream (claude, codex, gemini-cli) is rendered readably: text,
tool calls with their arguments, the head of tool results, errors, and the
final result with its token usage. By default the
newest session; with -f, keep following it, and move on to each new session
as it starts. --json prints {"agent", "session", "path", "log"}.

Terminal controls in the log (an agent's output can hold escape sequences
that clear the screen, fake colours or write the clipboard) are shown
visibly, as ␛[2J and the like; --raw prints the log byte for byte, the
JSON events as they came.`,
		Example: `  swarm logs backend
  swarm logs backend --session 3
  swarm logs backend -f`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.completeAgents(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Agent = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runLogs(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.Session, "session", 0, "the session `N` to print (default: the newest)")
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep printing as the log grows, across sessions")
	f.BoolVar(&opts.Raw, "raw", false, "print the log exactly as stored, exec agents' JSON events and terminal controls included")
	return cmd
}

// sessionLogs returns the agent's session numbers that have logs, ascending.
func sessionLogs(dir string) []int64 {
	ents, _ := os.ReadDir(dir)
	var seqs []int64
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".log"); ok {
			if seq, err := strconv.ParseInt(n, 10, 64); err == nil {
				seqs = append(seqs, seq)
			}
		}
	}
	slices.Sort(seqs)
	return seqs
}

// logsList says which sessions have logs, for errors.
func logsList(dir string) string {
	seqs := sessionLogs(dir)
	if len(seqs) == 0 {
		return "it has none yet"
	}
	s := make([]string, len(seqs))
	for i, n := range seqs {
		s[i] = strconv.FormatInt(n, 10)
	}
	return "sessions with logs: " + strings.Join(s, ", ")
}

func runLogs(ctx context.Context, opts *LogsOptions) error {
	app := opts.App
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	if _, err := app.knownAgent(ctx, l, cfg, opts.Agent); err != nil {
		return err
	}
	dir := filepath.Join(l.Logs(), opts.Agent)
	seq := opts.Session
	if seq == 0 {
		seqs := sessionLogs(dir)
		if len(seqs) == 0 && !opts.Follow {
			return fmt.Errorf("%s has no session logs yet: it has not run a session ('swarm up' starts it)", opts.Agent)
		}
		if len(seqs) > 0 {
			seq = seqs[len(seqs)-1]
		}
	}
	path := func(seq int64) string { return l.SessionLog(opts.Agent, seq) }
	out := app.Stdout
	if !opts.Raw && !app.JSON {
		tw := termsafe.NewWriter(app.Stdout)
		defer tw.Flush()
		out = tw
	}
	if app.JSON && opts.Follow {
		return usagef("--json prints one session's log; it does not go with -f")
	}
	if opts.Session != 0 {
		if _, err := os.Stat(path(seq)); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s has no log for session %d (%s)", opts.Agent, seq, logsList(dir))
		}
	}
	if !opts.Follow {
		text, err := os.ReadFile(path(seq))
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s has no log for session %d (%s)", opts.Agent, seq, logsList(dir))
		}
		if err != nil {
			return err
		}
		if app.JSON {
			return app.printJSON(map[string]any{"agent": opts.Agent, "session": seq, "path": path(seq), "log": string(text)})
		}
		if !opts.Raw && execengine.IsExecLog(text) {
			text = execengine.Render(text)
		}
		_, err = out.Write(text)
		return err
	}
	if seq == 0 {
		fmt.Fprintf(app.Stderr, "swarm logs: waiting for %s's first session\n", opts.Agent)
	}
	// Follow: print what the current log has, then what it gains, and
	// switch to a newer session's log when one appears.
	var f *os.File
	var view *sessionView
	defer func() {
		if f != nil {
			f.Close()
		}
		if view != nil {
			_ = view.Flush()
		}
	}()
	for {
		if f == nil && seq > 0 {
			if f, err = os.Open(path(seq)); err != nil {
				f = nil
			} else {
				view = &sessionView{out: out, raw: opts.Raw}
			}
		}
		if f != nil {
			if _, err := io.Copy(view, f); err != nil {
				return err
			}
		}
		if seqs := sessionLogs(dir); len(seqs) > 0 && seqs[len(seqs)-1] > seq {
			if f != nil {
				if _, err := io.Copy(view, f); err != nil { // the rest of the old session
					return err
				}
				f.Close()
				f = nil
				if err := view.Flush(); err != nil {
					return err
				}
				view = nil
			}
			seq = seqs[len(seqs)-1]
			fmt.Fprintf(out, "==> session %d <==\n", seq)
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Poll):
		}
	}
}

// sessionView shows one session's log as it is read: an exec session's
// JSON events rendered (unless raw), anything else as stored. Its
// "=== session" line says which.
type sessionView struct {
	out  io.Writer
	raw  bool
	head []byte
	w    io.Writer // chosen once the first line is in
	r    *execengine.Renderer
}

func (v *sessionView) Write(p []byte) (int, error) {
	if v.w != nil {
		return v.w.Write(p)
	}
	v.head = append(v.head, p...)
	if !execengine.HasSessionLine(v.head) && len(v.head) < 4<<10 {
		return len(p), nil
	}
	v.choose()
	if _, err := v.w.Write(v.head); err != nil {
		return 0, err
	}
	v.head = nil
	return len(p), nil
}

func (v *sessionView) choose() {
	v.w = v.out
	if !v.raw && execengine.IsExecLog(v.head) {
		v.r = execengine.NewRenderer(v.out)
		v.w = v.r
	}
}

// Flush writes what is held back: the start of a log still without its
// "=== session" line, or the renderer's last line.
func (v *sessionView) Flush() error {
	if v.w == nil {
		if len(v.head) == 0 {
			return nil
		}
		v.choose()
		if _, err := v.w.Write(v.head); err != nil {
			return err
		}
		v.head = nil
	}
	if v.r != nil {
		return v.r.Flush()
	}
	return nil
}
