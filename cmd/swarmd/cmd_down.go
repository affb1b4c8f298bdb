package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
	"github.com/swarmhq/swarm/worktree"
)

// DownOptions are the inputs of `swarm down`.
type DownOptions struct {
	App     *App
	Keep    bool
	Merge   bool
	Squash  bool
	Discard bool
	Yes     bool
	// DeleteIgnored deletes the files git ignores in the worktrees it
	// removes (--delete-ignored).
	DeleteIgnored bool
}

func newDownCmd(app *App, runF func(*DownOptions) error) *cobra.Command {
	opts := &DownOptions{App: app}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the swarm, and keep, merge, squash or discard the agents' work",
		Long: `Stop a running supervisor (waiting up to the longest interrupt_grace + 5s),
then deal with each agent's worktree and branch, in swarm.toml order:

  --keep     (default) auto-commit uncommitted work on swarm/<agent>, and keep
             the worktrees and branches for the next 'swarm up'
  --merge    auto-commit, then merge each swarm/<agent> into the base branch
             with one merge commit naming the agent; remove the worktree and
             delete the branch
  --squash   like --merge, but one ordinary commit per agent
  --discard  list each branch's unmerged commits, ask for confirmation
             (--yes skips the question), then remove the worktrees and
             delete the branches, uncommitted work included

--merge and --squash work in your checkout, which must be on the base branch
(the branch that was checked out when the worktrees were created) with no
uncommitted changes to tracked files. A conflict is aborted cleanly: that
agent's branch and worktree are kept, the others carry on, and swarm down
exits 1 naming the agent and the files.

A worktree holding files git ignores (build output, node_modules, .env) is
not removed: swarm down lists them, keeps it, and exits 1; --delete-ignored
deletes them with the worktree.

Interrupted (Ctrl-C, kill -9, a crash), swarm down can be run again: it
first kills the processes of sessions a crashed supervisor left running,
then finishes or rolls back what the interrupted run left half done, and
says what it did ("recovered: ...").

It refuses to run inside an agent session ($SWARM_SESSION_ID set): stopping
the swarm is the operator's.`,
		Example: `  swarm down
  swarm down --merge
  swarm down --squash --json
  swarm down --discard --yes
  swarm down --merge --delete-ignored`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := opts.mode()
			if err != nil {
				return &usageError{err: err, help: cmd.CommandPath()}
			}
			if runF != nil {
				return runF(opts)
			}
			return runDown(cmd.Context(), opts, mode)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Keep, "keep", false, "keep worktrees and branches for the next 'swarm up' (the default)")
	f.BoolVar(&opts.Merge, "merge", false, "merge every agent's branch into the base branch, one merge commit per agent")
	f.BoolVar(&opts.Squash, "squash", false, "squash every agent's branch into one commit on the base branch")
	f.BoolVar(&opts.Discard, "discard", false, "delete the agents' worktrees and branches, unmerged work included")
	f.BoolVarP(&opts.Yes, "yes", "y", false, "with --discard: do not ask for confirmation")
	f.BoolVar(&opts.DeleteIgnored, "delete-ignored", false, "with --merge, --squash or --discard: delete the files git ignores in the worktrees too, instead of keeping those worktrees")
	return cmd
}

func (o *DownOptions) mode() (swarm.DownMode, error) {
	var set []swarm.DownMode
	for _, m := range []struct {
		on   bool
		name swarm.DownMode
	}{{o.Keep, swarm.DownKeep}, {o.Merge, swarm.DownMerge}, {o.Squash, swarm.DownSquash}, {o.Discard, swarm.DownDiscard}} {
		if m.on {
			set = append(set, m.name)
		}
	}
	switch len(set) {
	case 0:
		return swarm.DownKeep, nil
	case 1:
		return set[0], nil
	default:
		names := make([]string, len(set))
		for i, m := range set {
			names[i] = string(m)
		}
		return "", fmt.Errorf("--%s are mutually exclusive: pick one of --keep, --merge, --squash or --discard", strings.Join(names, " and --"))
	}
}

// stdinIsTerminal reports whether the confirmation question can be asked.
// A variable so tests can stand in for a terminal.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func runDown(ctx context.Context, opts *DownOptions, mode swarm.DownMode) error {
	app := opts.App
	who, err := app.callerOf(ctx, nil, nil)
	if err != nil {
		return err
	}
	l, cfg, err := app.loadRunning(ctx)
	if err != nil {
		return err
	}
	if mode == swarm.DownDiscard && !opts.Yes && !stdinIsTerminal(app.Stdin) {
		return errors.New("swarm down --discard deletes the agents' branches and asks first, but stdin is not a terminal; pass --yes to discard without asking")
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	// What recovery did is in the report; the worktree package's log line
	// of each would say it twice.
	prevLog := slog.Default()
	slog.SetDefault(slog.New(dropMessage{prevLog.Handler(), worktree.RecoveredLogMessage}))
	defer slog.SetDefault(prevLog)
	req := swarm.DownRequest{Config: cfg, Layout: l, Store: st, Mode: mode, DeleteIgnored: opts.DeleteIgnored}
	if mode == swarm.DownDiscard && !opts.Yes {
		req.Confirm = func(ctx context.Context, plan []swarm.DiscardPlan) (bool, error) { return confirmDiscard(app, plan) }
	}
	res, err := verbs.Down(ctx, who, req)
	if errors.Is(err, swarm.ErrNotConfirmed) {
		return &codeError{code: exitError, err: errors.New("nothing discarded; the swarm was left as it was")}
	}
	if err != nil {
		return err
	}
	if app.JSON {
		if err := app.printJSON(res); err != nil {
			return err
		}
	} else {
		printDown(app.Stdout, l.Root, res)
	}
	if failed := res.Failed(); len(failed) > 0 {
		return &codeError{code: exitError, err: downFailure(mode, res.BaseBranch, failed)}
	}
	return nil
}

// confirmDiscard lists what would be lost and asks on the terminal.
func confirmDiscard(app *App, plan []swarm.DiscardPlan) (bool, error) {
	w := app.Stderr
	fmt.Fprintln(w, "swarm down --discard will delete these worktrees and branches:")
	for _, p := range plan {
		fmt.Fprintf(w, "  %s (%s): %s\n", p.Agent, p.Branch, droppedWork(len(p.Commits), len(p.Uncommitted)))
		for _, c := range p.Commits {
			fmt.Fprintf(w, "      %s\n", c)
		}
		for _, c := range p.Uncommitted {
			fmt.Fprintf(w, "      %s\n", c)
		}
	}
	fmt.Fprint(w, "Discard them? [y/N] ")
	line, err := bufio.NewReader(app.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

func printDown(w io.Writer, root string, res swarm.DownResult) {
	if res.SupervisorStopped {
		fmt.Fprintln(w, "Stopped the supervisor.")
	}
	for _, k := range res.Killed {
		fmt.Fprintf(w, "Killed the processes a crashed supervisor left running: %s\n", k)
	}
	for _, r := range res.Recovered {
		fmt.Fprintf(w, "recovered: %s\n", r)
	}
	if res.RecoverError != "" {
		fmt.Fprintf(w, "could not finish what an interrupted run left: %s\n", res.RecoverError)
	}
	for _, f := range res.Fetched {
		fmt.Fprintf(w, "fetched: %s\n", f)
	}
	if len(res.HeldElsewhere) > 0 {
		fmt.Fprintf(w, "Left alone, run by another supervisor: %s ('swarm down' in that clone stops it)\n", strings.Join(res.HeldElsewhere, ", "))
	}
	if len(res.Agents) == 0 {
		fmt.Fprintln(w, "No agent worktrees or branches; nothing else to do.")
		return
	}
	for _, a := range res.Agents {
		for _, r := range a.Recovered {
			if !slices.Contains(res.Recovered, r) {
				fmt.Fprintf(w, "recovered: %s\n", r)
			}
		}
		printDownAgent(w, root, res.BaseBranch, a)
	}
	if len(res.Items) > 0 {
		fmt.Fprintf(w, "work items merged with their dev's branch: %s\n", strings.Join(res.Items, ", "))
	}
}

// printDownAgent says what became of one agent's worktree and branch;
// swarm retire says it the same way.
func printDownAgent(w io.Writer, root, base string, a swarm.DownAgent) {
	saved := ""
	if a.AutoCommit != "" {
		saved = fmt.Sprintf("; saved uncommitted work as %s", downShort(a.AutoCommit))
	}
	if a.Removed && len(a.Ignored) > 0 {
		saved += fmt.Sprintf("; deleted %s git ignores there (%s)", downPlural(len(a.Ignored), "file"), strings.Join(a.Ignored, ", "))
	}
	switch a.Status {
	case "kept":
		if a.Worktree == "" {
			fmt.Fprintf(w, "%s: kept %s, which has no worktree (%s not on %s)\n", a.Agent, a.Branch, downPlural(len(a.Commits), "commit"), downOrBase(base))
			return
		}
		fmt.Fprintf(w, "%s: kept %s on %s (%s not on %s)%s\n", a.Agent, rel(root, a.Worktree), a.Branch, downPlural(len(a.Commits), "commit"), downOrBase(base), saved)
	case "merged", "squashed":
		if a.Commit == "" && a.AlreadyLanded {
			fmt.Fprintf(w, "%s: nothing to %s: %s's commits are on %s already (landed from another host), not merged twice%s; removed its worktree and branch\n", a.Agent, downVerb[a.Status], a.Branch, downOrBase(base), saved)
		} else if a.Commit == "" {
			fmt.Fprintf(w, "%s: nothing to %s%s; removed its worktree and branch\n", a.Agent, downVerb[a.Status], saved)
		} else {
			fmt.Fprintf(w, "%s: %s %s into %s as %s (%s)%s; removed its worktree and branch\n", a.Agent, a.Status, a.Branch, base, downShort(a.Commit), downPlural(len(a.Commits), "commit"), saved)
		}
	case "discarded":
		fmt.Fprintf(w, "%s: discarded %s and its worktree (%s dropped)%s\n", a.Agent, a.Branch, droppedWork(len(a.Commits), len(a.Uncommitted)), saved)
		for _, c := range a.Commits {
			fmt.Fprintf(w, "    %s\n", c)
		}
		for _, c := range a.Uncommitted {
			fmt.Fprintf(w, "    %s\n", c)
		}
	case "ignored_files":
		fmt.Fprintf(w, "%s: kept %s and %s: it holds %s git ignores (%s), which removing it would delete; move what you need, then run again with --delete-ignored%s\n",
			a.Agent, a.Branch, rel(root, a.Worktree), downPlural(len(a.Ignored), "file"), strings.Join(a.Ignored, ", "), saved)
	case "conflict":
		fmt.Fprintf(w, "%s: CONFLICT merging %s into %s in %s; merge aborted, kept %s and %s%s\n", a.Agent, a.Branch, base, strings.Join(a.ConflictFiles, ", "), a.Branch, rel(root, a.Worktree), saved)
	default:
		fmt.Fprintf(w, "%s: FAILED: %s\n", a.Agent, a.Error)
	}
}

var downVerb = map[string]string{"merged": "merge", "squashed": "squash"}

// droppedWork says what a discard drops: unmerged commits and uncommitted
// changes, never "0 commits" when edits go.
func droppedWork(commits, uncommitted int) string {
	switch {
	case commits == 0 && uncommitted == 0:
		return "nothing unmerged"
	case uncommitted == 0:
		return downPlural(commits, "unmerged commit")
	case commits == 0:
		return downPlural(uncommitted, "uncommitted change")
	}
	return downPlural(commits, "unmerged commit") + " and " + downPlural(uncommitted, "uncommitted change")
}

func downFailure(mode swarm.DownMode, base string, failed []string) error {
	switch mode {
	case swarm.DownMerge, swarm.DownSquash:
		return fmt.Errorf("not %s: %s. Their branches and worktrees were kept: merge them into %s yourself (git merge swarm/<agent>), or fix the cause and run 'swarm down --%s' again",
			map[swarm.DownMode]string{swarm.DownMerge: "merged", swarm.DownSquash: "squashed"}[mode], strings.Join(failed, "; "), base, mode)
	case swarm.DownKeep:
		return fmt.Errorf("not saved: %s", strings.Join(failed, "; "))
	default:
		return fmt.Errorf("not discarded: %s", strings.Join(failed, "; "))
	}
}

func downOrBase(base string) string {
	if base == "" {
		return "the base branch"
	}
	return base
}

func downShort(h string) string {
	if len(h) > 7 {
		return h[:7]
	}
	return h
}

func downPlural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// dropMessage is a log handler that leaves out the records with one message.
type dropMessage struct {
	slog.Handler
	msg string
}

func (d dropMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == d.msg {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}
