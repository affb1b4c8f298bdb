package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/termsafe"
	"github.com/swarmhq/swarm/verbs"
)

// MergesOptions are the inputs of `swarm merges`.
type MergesOptions struct {
	App *App
	All bool
	Now func() time.Time
}

func newMergesCmd(app *App, runF func(*MergesOptions) error) *cobra.Command {
	opts := &MergesOptions{App: app, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "merges",
		Short: "Show the merge queue: candidates waiting to land, and recent landings",
		Long: `Show the merge queue (DESIGN §14): the candidates 'swarm land', an
approved workflow item or a dev-qa item past QA put in it, first in first
out, with their state (queued, testing, landed, conflict, failed,
cancelled), the CI runs they took part in, and why one left the queue.
Without --all, the live candidates and the 20 newest others.

'swarm queue' stays the beads task queue of execute/queue agents; this is
the merge queue.

--json prints {"candidates": [...], "checkout": {"base", "behind"}}, each
candidate {"id", "agent", "commit", "source", "item", "requested_by",
"state", "reason", "files", "ci_tail", "batch", "ci_runs", "claim",
"claimed_at", "landed_commit", "created_at", "updated_at"}.`,
		Example: `  swarm merges
  swarm merges --all --json | jq '.candidates[] | select(.state == "failed")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runMerges(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "every candidate ever queued, not only the recent ones")
	return cmd
}

// checkoutJSON and mergesJSON are the status verb's rows (verbs.CheckoutView,
// verbs.MergesView).
type (
	checkoutJSON = verbs.CheckoutView
	mergesJSON   = verbs.MergesView
)

func runMerges(ctx context.Context, opts *MergesOptions) error {
	app := opts.App
	l, cfg, st, _, err := app.openCaller(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	out, err := readMerges(ctx, l, cfg, st, opts.All)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(out)
	}
	if len(out.Candidates) == 0 {
		fmt.Fprintln(app.Stdout, "the merge queue is empty: 'swarm land <agent>' queues an agent's branch")
	} else {
		now := opts.Now()
		tw := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tAGENT\tCOMMIT\tSOURCE\tSTATE\tCI RUNS\tAGE\tNOTE")
		for _, c := range out.Candidates {
			src := string(c.Source)
			if c.Item != "" {
				src += " " + c.Item
			}
			note := c.Reason
			if c.State == merge.Landed {
				note = "as " + merge.Short(c.LandedAs)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.ID, c.Agent, merge.Short(c.Commit), src, c.State, c.CIRuns,
				humanAge(now.Sub(c.CreatedAt)), termsafe.String(truncateText(strings.ReplaceAll(note, "\n", " "), 100)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if line := behindLine(out.Checkout); line != "" {
		fmt.Fprintln(app.Stdout, line)
	}
	return nil
}

// readMerges reads the queue: every candidate with all, else the live
// ones and the 20 newest others.
func readMerges(ctx context.Context, l repo.Layout, cfg *config.Config, st mailbox.Store, all bool) (mergesJSON, error) {
	out := mergesJSON{Candidates: []merge.Candidate{}}
	var err error
	if all {
		out.Candidates, err = st.Candidates(ctx, mailbox.CandidateFilter{})
	} else {
		live, lerr := st.Candidates(ctx, mailbox.CandidateFilter{States: []merge.State{merge.Queued, merge.Testing}})
		recent, rerr := st.Candidates(ctx, mailbox.CandidateFilter{States: []merge.State{merge.Landed, merge.Conflict, merge.Failed, merge.Cancelled}, Newest: 20})
		err = firstErr(lerr, rerr)
		out.Candidates = append(recent, live...)
	}
	if err != nil {
		return out, err
	}
	if out.Candidates == nil {
		out.Candidates = []merge.Candidate{}
	}
	out.Checkout = checkoutOf(ctx, l, cfg, st)
	return out, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// checkoutOf is how far the operator's checkout is behind the base (a
// landing left a dirty checkout alone); zero when unknown.
func checkoutOf(ctx context.Context, l repo.Layout, cfg *config.Config, st mailbox.Store) checkoutJSON {
	git, err := workflowGit(ctx, l, cfg.Worktree.Dir, st)
	if err != nil {
		return checkoutJSON{}
	}
	base, n, err := git.M.CheckoutBehind(ctx)
	if err != nil {
		return checkoutJSON{}
	}
	out := checkoutJSON{Base: base, Behind: n}
	if remote := cfg.Worktree.Push; remote != "" {
		// As last fetched (the merge queue fetches it): status stays
		// offline.
		if _, rn, err := git.M.RemoteBehind(ctx); err == nil {
			out.Remote, out.RemoteBehind = remote, rn
		}
	}
	return out
}

// behindLine tells the operator their checkout is behind and how to
// catch up; "" when it is not.
func behindLine(c checkoutJSON) string {
	var lines []string
	if c.Behind > 0 {
		lines = append(lines, fmt.Sprintf("checkout behind %s by %d: git switch %s (your uncommitted changes come along)", c.Base, c.Behind, c.Base))
	}
	if c.RemoteBehind > 0 {
		lines = append(lines, fmt.Sprintf("%s behind %s's by %d (landed from another host): the merge queue fetches it before its next landing; 'git pull --ff-only %s %s' brings it now",
			c.Base, c.Remote, c.RemoteBehind, c.Remote, c.Base))
	}
	return strings.Join(lines, "\n")
}

// mergeLines are the live view's lines of the merge queue: one per live
// candidate, first in first out, then the checkout's behind line.
func mergeLines(m mergesJSON) []string {
	var out []string
	for _, c := range m.Candidates {
		if c.State != merge.Queued && c.State != merge.Testing {
			continue
		}
		what := "swarm land by " + c.By
		if c.Item != "" {
			what = "item " + c.Item
		}
		out = append(out, fmt.Sprintf("#%d %s %.8s %s (%s)", c.ID, c.Agent, c.Commit, c.State, what))
	}
	if line := behindLine(m.Checkout); line != "" {
		out = append(out, line)
	}
	return out
}

// mergeQueueLine is status's line about the queue; "" when it is empty.
func mergeQueueLine(cs []merge.Candidate) string {
	var queued, testing int
	for _, c := range cs {
		switch c.State {
		case merge.Queued:
			queued++
		case merge.Testing:
			testing++
		}
	}
	if queued+testing == 0 {
		return ""
	}
	var parts []string
	if testing > 0 {
		parts = append(parts, fmt.Sprintf("%d testing", testing))
	}
	if queued > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", queued))
	}
	return "merge queue: " + strings.Join(parts, ", ") + " ('swarm merges' lists them)"
}
