package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
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
}

// What `swarm down` does with the agents' work.
const (
	downKeep    = "keep"
	downMerge   = "merge"
	downSquash  = "squash"
	downDiscard = "discard"
)

func init() { commands = append(commands, newDownCmd) }

func newDownCmd(app *App) *cobra.Command {
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
exits 1 naming the agent and the files.`,
		Example: `  swarm down
  swarm down --merge
  swarm down --squash --json
  swarm down --discard --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := opts.mode()
			if err != nil {
				return &usageError{err: err, help: cmd.CommandPath()}
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
	return cmd
}

func (o *DownOptions) mode() (string, error) {
	var set []string
	for _, m := range []struct {
		on   bool
		name string
	}{{o.Keep, downKeep}, {o.Merge, downMerge}, {o.Squash, downSquash}, {o.Discard, downDiscard}} {
		if m.on {
			set = append(set, m.name)
		}
	}
	switch len(set) {
	case 0:
		return downKeep, nil
	case 1:
		return set[0], nil
	default:
		return "", fmt.Errorf("--%s are mutually exclusive: pick one of --keep, --merge, --squash or --discard", strings.Join(set, " and --"))
	}
}

// downAgent is one agent's line of the report.
type downAgent struct {
	Agent  string `json:"agent"`
	Branch string `json:"branch"`
	// Worktree is the agent's worktree; empty when only its branch exists.
	Worktree string `json:"worktree"`
	// Status is kept, merged, squashed, discarded, conflict or error.
	Status string `json:"status"`
	// AutoCommit saved uncommitted work first; empty if there was none.
	AutoCommit string `json:"auto_commit"`
	// Commits were on the branch and not on the base branch, before.
	Commits []string `json:"commits"`
	// Commit is the merge or squash commit on the base branch.
	Commit        string   `json:"commit"`
	Removed       bool     `json:"removed"`
	ConflictFiles []string `json:"conflict_files"`
	Error         string   `json:"error"`
}

type downResult struct {
	Mode              string      `json:"mode"`
	BaseBranch        string      `json:"base_branch"`
	SupervisorStopped bool        `json:"supervisor_stopped"`
	Agents            []downAgent `json:"agents"`
}

// stdinIsTerminal reports whether the confirmation question can be asked.
// A variable so tests can stand in for a terminal.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func runDown(ctx context.Context, opts *DownOptions, mode string) error {
	app := opts.App
	l, cfg, err := app.loadConfig()
	if err != nil {
		return err
	}
	if mode == downDiscard && !opts.Yes && !stdinIsTerminal(app.Stdin) {
		return errors.New("swarm down --discard deletes the agents' branches and asks first, but stdin is not a terminal; pass --yes to discard without asking")
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := worktree.New(ctx, worktree.Options{Root: l.Root, Dir: cfg.Worktree.Dir, Orphans: l.Orphans(), Meta: st})
	if err != nil {
		return err
	}
	res := downResult{Mode: mode, Agents: []downAgent{}}

	agents, err := downAgents(ctx, m, cfg)
	if err != nil {
		return err
	}
	// Refuse before stopping anything (these checks only read): a refused
	// merge leaves a running swarm as it was.
	if len(agents) > 0 && (mode == downMerge || mode == downSquash) {
		if err := m.CheckBase(ctx); err != nil {
			return fmt.Errorf("cannot %s: %w, then run 'swarm down --%s' again", mode, err, mode)
		}
	}
	if res.SupervisorStopped, err = app.stopSupervisor(ctx, l, downWait(cfg)); err != nil {
		return err
	}
	if res.SupervisorStopped {
		// It may have made worktrees while it ran.
		if agents, err = downAgents(ctx, m, cfg); err != nil {
			return err
		}
	}
	if len(agents) > 0 {
		// Recorded when the worktrees were made; only informative for keep.
		base, err := m.BaseBranch(ctx)
		if err != nil && mode != downKeep {
			return err
		}
		res.BaseBranch = base
	}
	if mode == downDiscard && len(agents) > 0 && !opts.Yes {
		ok, err := confirmDiscard(ctx, app, m, agents)
		if err != nil {
			return err
		}
		if !ok {
			return &codeError{code: exitError, err: errors.New("nothing discarded")}
		}
	}

	var failed []string
	for _, info := range agents {
		a := downOne(ctx, m, mode, info)
		if a.Status == "conflict" {
			failed = append(failed, fmt.Sprintf("%s (conflict in %s)", a.Agent, strings.Join(a.ConflictFiles, ", ")))
		} else if a.Status == "error" {
			failed = append(failed, fmt.Sprintf("%s (%s)", a.Agent, a.Error))
		}
		res.Agents = append(res.Agents, a)
	}

	if app.JSON {
		if err := app.printJSON(res); err != nil {
			return err
		}
	} else {
		printDown(app.Stdout, l.Root, res)
	}
	if len(failed) > 0 {
		return &codeError{code: exitError, err: downFailure(mode, res.BaseBranch, failed)}
	}
	return nil
}

// downAgents returns, in config order, the agents with something to deal
// with: a worktree or a branch.
func downAgents(ctx context.Context, m *worktree.Manager, cfg *config.Config) ([]worktree.Info, error) {
	var agents []worktree.Info
	for _, name := range cfg.AgentNames() {
		info, err := m.Inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		if info.Registered || info.HasBranch {
			agents = append(agents, info)
		}
	}
	return agents, nil
}

// downWait is how long to wait for the supervisor: the longest
// interrupt_grace of any agent, plus 5 s to wind down.
func downWait(cfg *config.Config) time.Duration {
	grace := cfg.Defaults.InterruptGrace
	for _, a := range cfg.Agents {
		grace = max(grace, a.InterruptGrace)
	}
	return grace + 5*time.Second
}

func downOne(ctx context.Context, m *worktree.Manager, mode string, info worktree.Info) downAgent {
	a := downAgent{Agent: info.Agent, Branch: info.Branch, Worktree: info.Path, Commits: []string{}, ConflictFiles: []string{}}
	var (
		r   worktree.Result
		err error
	)
	switch mode {
	case downKeep:
		r, err = m.Keep(ctx, info.Agent)
		a.Status = "kept"
	case downMerge:
		r, err = m.Merge(ctx, info.Agent)
		a.Status = "merged"
	case downSquash:
		r, err = m.Squash(ctx, info.Agent)
		a.Status = "squashed"
	case downDiscard:
		r, err = m.Discard(ctx, info.Agent)
		a.Status = "discarded"
	}
	a.AutoCommit, a.Commit, a.Removed = r.AutoCommit, r.Commit, r.Removed
	if mode == downKeep && !info.Valid() {
		a.Worktree = "" // only the branch is left to keep
	}
	if r.Commits != nil {
		a.Commits = r.Commits
	}
	var ce *worktree.ConflictError
	switch {
	case errors.As(err, &ce):
		a.Status = "conflict"
		a.ConflictFiles = ce.Files
		a.Error = err.Error()
	case err != nil:
		a.Status = "error"
		a.Error = err.Error()
	}
	return a
}

// confirmDiscard lists what would be lost and asks on the terminal.
func confirmDiscard(ctx context.Context, app *App, m *worktree.Manager, agents []worktree.Info) (bool, error) {
	w := app.Stderr
	fmt.Fprintln(w, "swarm down --discard will delete these worktrees and branches:")
	for _, info := range agents {
		commits, err := m.UnmergedCommits(ctx, info.Agent)
		if err != nil {
			return false, err
		}
		what := downPlural(len(commits), "unmerged commit")
		if info.Valid() {
			if dirty, err := m.Dirty(ctx, info.Agent); err != nil {
				return false, err
			} else if dirty {
				what += ", and uncommitted changes"
			}
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", info.Agent, info.Branch, what)
		for _, c := range commits {
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

func printDown(w io.Writer, root string, res downResult) {
	if res.SupervisorStopped {
		fmt.Fprintln(w, "Stopped the supervisor.")
	}
	if len(res.Agents) == 0 {
		fmt.Fprintln(w, "No agent worktrees or branches; nothing else to do.")
		return
	}
	for _, a := range res.Agents {
		saved := ""
		if a.AutoCommit != "" {
			saved = fmt.Sprintf("; saved uncommitted work as %s", downShort(a.AutoCommit))
		}
		switch a.Status {
		case "kept":
			if a.Worktree == "" {
				fmt.Fprintf(w, "%s: kept %s, which has no worktree (%s not on %s)\n", a.Agent, a.Branch, downPlural(len(a.Commits), "commit"), downOrBase(res.BaseBranch))
				continue
			}
			fmt.Fprintf(w, "%s: kept %s on %s (%s not on %s)%s\n", a.Agent, rel(root, a.Worktree), a.Branch, downPlural(len(a.Commits), "commit"), downOrBase(res.BaseBranch), saved)
		case "merged", "squashed":
			if a.Commit == "" {
				fmt.Fprintf(w, "%s: nothing to %s%s; removed its worktree and branch\n", a.Agent, downVerb[a.Status], saved)
			} else {
				fmt.Fprintf(w, "%s: %s %s into %s as %s (%s)%s; removed its worktree and branch\n", a.Agent, a.Status, a.Branch, res.BaseBranch, downShort(a.Commit), downPlural(len(a.Commits), "commit"), saved)
			}
		case "discarded":
			fmt.Fprintf(w, "%s: discarded %s and its worktree (%s dropped)\n", a.Agent, a.Branch, downPlural(len(a.Commits), "unmerged commit"))
			for _, c := range a.Commits {
				fmt.Fprintf(w, "    %s\n", c)
			}
		case "conflict":
			fmt.Fprintf(w, "%s: CONFLICT merging %s into %s in %s; merge aborted, kept %s and %s%s\n", a.Agent, a.Branch, res.BaseBranch, strings.Join(a.ConflictFiles, ", "), a.Branch, rel(root, a.Worktree), saved)
		default:
			fmt.Fprintf(w, "%s: FAILED: %s\n", a.Agent, a.Error)
		}
	}
}

var downVerb = map[string]string{"merged": downMerge, "squashed": downSquash}

func downFailure(mode, base string, failed []string) error {
	switch mode {
	case downMerge, downSquash:
		return fmt.Errorf("not %s: %s. Their branches and worktrees were kept: merge them into %s yourself (git merge swarm/<agent>), or fix the cause and run 'swarm down --%s' again",
			map[string]string{downMerge: "merged", downSquash: "squashed"}[mode], strings.Join(failed, "; "), base, mode)
	case downKeep:
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
