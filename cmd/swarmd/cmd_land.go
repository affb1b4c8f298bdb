package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/verbs"
)

// LandOptions are the inputs of `swarm land`.
type LandOptions struct {
	App    *App
	Agent  string
	Item   string
	All    bool
	Wait   bool
	Cancel int64
	Note   string
	Poll   time.Duration
	// PruneRemote deletes the remote swarm/<agent> branches that landed
	// (waits, as Wait does).
	PruneRemote bool
}

// newLandCmd builds `swarm land`; a non-nil runF runs instead of the
// command, with the parsed options (the flag tests' seam).
func newLandCmd(app *App, runF func(*LandOptions) error) *cobra.Command {
	opts := &LandOptions{App: app, Poll: 200 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "land [<agent>|--item ID|--all]",
		Short: "Queue an agent's branch to land on the base branch (the merge queue)",
		Long: `Queue an agent's branch, at its tip, in the merge queue (DESIGN §14). The
running supervisor tests it on top of the base branch in its own scratch
worktree (.swarm/merging/), runs [merge] ci there when set, and lands it by
moving the base branch with a compare-and-set: first in, first out, [merge]
batch at a time, a failing batch bisected. Your checkout of the base
branch is brought forward when it is clean; with uncommitted changes it is
left alone and 'swarm status' says how far behind it is.

A conflict or a failing CI sends the candidate back: it leaves the queue,
and its agent gets mail from swarm with the files (or the CI output) and
how to resolve; 'swarm land' again queues it anew. A branch with nothing
the base lacks queues nothing (exit 0).

The operator lands any agent's branch; inside a session an agent lands
only its own ('swarm land', no argument), when its mode grants can_land.
--item queues a workflow item's commit (an approved dev-review item, or a
dev-qa item at QA_PASSED), --all every agent's branch with new commits:
the operator's. --cancel ID takes a candidate out of the queue (operator).

--wait blocks until the candidates leave the queue and exits 1 when one
did not land. With [worktree] push (several hosts), --all first fetches
the agents' branches pushed from other hosts, and --prune-remote (which
waits) then deletes on the remote each landed agent's swarm/<agent>
branch whose every commit the remote's base holds, and says which; a
branch with newer commits, or pushed again meanwhile, is kept. Without a running supervisor the candidates wait for the
next 'swarm up'. --json prints {"outcomes": [{"agent", "candidate",
"already_queued", "nothing_to_land"}]} (after --wait, the candidates as
they ended).`,
		Example: `  swarm land backend
  swarm land --all --wait
  swarm land --all --prune-remote
  swarm land --item T-3
  swarm land --cancel 12`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Agent = args[0]
			}
			n := 0
			for _, set := range []bool{opts.Agent != "", opts.Item != "", opts.All, opts.Cancel != 0} {
				if set {
					n++
				}
			}
			if n > 1 {
				return usagef("give one of <agent>, --item, --all or --cancel")
			}
			if opts.PruneRemote {
				if opts.Cancel != 0 {
					return usagef("--prune-remote deletes the branches that land; it does not go with --cancel")
				}
				opts.Wait = true
			}
			if runF != nil {
				return runF(opts)
			}
			return runLand(cmd.Context(), opts)
		},
		ValidArgsFunction: app.completeAgents(false),
	}
	f := cmd.Flags()
	f.StringVar(&opts.Item, "item", "", "queue this workflow item's commit")
	f.BoolVar(&opts.All, "all", false, "queue every agent's branch that has new commits")
	f.BoolVar(&opts.Wait, "wait", false, "wait until the candidates leave the queue; exit 1 when one did not land")
	f.Int64Var(&opts.Cancel, "cancel", 0, "take merge candidate `ID` out of the queue")
	f.StringVar(&opts.Note, "note", "", "why, with --cancel")
	f.BoolVar(&opts.PruneRemote, "prune-remote", false, "after landing, delete the landed agents' swarm/<agent> branches on the [worktree] push remote (implies --wait)")
	return cmd
}

func runLand(ctx context.Context, opts *LandOptions) error {
	app := opts.App
	l, cfg, st, who, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if opts.Cancel != 0 {
		c, err := verbs.CancelLanding(ctx, who, st, opts.Cancel, opts.Note)
		if err != nil {
			return err
		}
		pokeSupervisor(l)
		if app.JSON {
			return app.printJSON(c)
		}
		fmt.Fprintf(app.Stdout, "merge candidate %d (%s at %s) cancelled\n", c.ID, c.Agent, merge.Short(c.Commit))
		return nil
	}
	if opts.Agent != "" {
		if _, err := app.knownAgent(ctx, l, cfg, opts.Agent); err != nil {
			return err
		}
	}
	remote := cfg.Worktree.Push
	if opts.PruneRemote && remote == "" {
		return usagef("--prune-remote deletes branches on the [worktree] push remote, and swarm.toml sets none")
	}
	git, err := workflowGit(ctx, l, cfg.Worktree.Dir, st)
	if err != nil {
		return err
	}
	if opts.All && remote != "" && !who.IsSession() {
		// Work pushed from other hosts lands too, from this one.
		fetched, err := git.M.Fetch(ctx, remote, cfg.AgentNames())
		if err != nil {
			return fmt.Errorf("%w; check the remote %q ('git fetch %s')", err, remote, remote)
		}
		for _, f := range fetched {
			if !app.JSON && (f.What == "created" || f.What == "fast-forwarded") {
				fmt.Fprintf(app.Stdout, "fetched: %s\n", f)
			}
		}
	}
	res, err := verbs.Land(ctx, who, st, cfg, git, verbs.LandRequest{Agent: opts.Agent, Item: opts.Item, All: opts.All})
	var ue *verbs.UsageError
	if errors.As(err, &ue) {
		return usagef("%s", ue.Msg)
	}
	if err != nil {
		return err
	}
	pokeSupervisor(l)
	_, running := ping(ctx, l)
	if !app.JSON {
		if len(res.Outcomes) == 0 {
			fmt.Fprintln(app.Stdout, "nothing to land: no agent's branch has commits the base branch lacks")
		}
		for _, o := range res.Outcomes {
			switch {
			case o.Nothing:
				fmt.Fprintf(app.Stdout, "nothing to land: %s's branch has no commit the base branch lacks; nothing queued\n", o.Agent)
			case o.Already:
				fmt.Fprintf(app.Stdout, "%s's commit %s is in the merge queue already as #%d (%s)\n", o.Agent, merge.Short(o.Candidate.Commit), o.Candidate.ID, o.Candidate.State)
			default:
				fmt.Fprintf(app.Stdout, "queued %s's commit %s as merge candidate #%d\n", o.Agent, merge.Short(o.Candidate.Commit), o.Candidate.ID)
			}
		}
		if !running && hasCandidate(res) {
			fmt.Fprintln(app.Stdout, "the supervisor is not running: the queue lands it once 'swarm up' starts")
		}
	}
	if !opts.Wait || !hasCandidate(res) {
		if app.JSON {
			return app.printJSON(res)
		}
		return nil
	}
	var failed []string
	for i, o := range res.Outcomes {
		if o.Candidate == nil {
			continue
		}
		c, err := verbs.WaitLanded(ctx, who, st, o.Candidate.ID, opts.Poll)
		if err != nil {
			return err
		}
		res.Outcomes[i].Candidate = &c
		if !app.JSON {
			fmt.Fprintln(app.Stdout, termsafe.String(candidateEnd(c)))
		}
		if c.State != merge.Landed {
			failed = append(failed, fmt.Sprintf("#%d %s", c.ID, c.State))
		}
	}
	if opts.PruneRemote {
		// Only the branches that landed, and only when the remote's base
		// holds every commit of them.
		res.Pruned = []string{}
		for _, o := range res.Outcomes {
			if o.Candidate == nil || o.Candidate.State != merge.Landed {
				continue
			}
			p, err := git.M.PruneRemote(ctx, remote, o.Agent)
			if err != nil {
				return fmt.Errorf("prune %s's branch on %s: %w", o.Agent, remote, err)
			}
			line := fmt.Sprintf("%s: %s on %s", o.Agent, p, remote)
			res.Pruned = append(res.Pruned, line)
			if !app.JSON {
				fmt.Fprintln(app.Stdout, "pruned: "+line)
			}
		}
	}
	if app.JSON {
		if err := app.printJSON(res); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("not landed: %s; 'swarm merges' says why, and the agent got mail saying how to resolve", strings.Join(failed, ", "))
	}
	return nil
}

func hasCandidate(r verbs.LandResult) bool {
	for _, o := range r.Outcomes {
		if o.Candidate != nil {
			return true
		}
	}
	return false
}

// candidateEnd says how a candidate left the queue.
func candidateEnd(c merge.Candidate) string {
	switch c.State {
	case merge.Landed:
		return fmt.Sprintf("landed #%d: %s's commit %s is on the base branch as %s", c.ID, c.Agent, merge.Short(c.Commit), merge.Short(c.LandedAs))
	case merge.Conflict:
		return fmt.Sprintf("conflict #%d: %s's commit %s does not merge (%s); %s got mail saying how to resolve", c.ID, c.Agent, merge.Short(c.Commit), strings.Join(c.Files, ", "), c.Agent)
	case merge.Failed:
		return fmt.Sprintf("failed #%d: %s's commit %s: %s; %s got the output", c.ID, c.Agent, merge.Short(c.Commit), c.Reason, c.Agent)
	}
	return fmt.Sprintf("#%d %s: %s", c.ID, c.State, c.Reason)
}
