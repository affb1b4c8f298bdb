package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/verbs"
)

// PromptOptions are the inputs of `swarm prompt`.
type PromptOptions struct {
	App           *App
	Agent         string
	SessionSeq    int64 // 0: the agent's next session
	InterruptedBy int64 // 0: no interrupt block
	Stored        int64 // print the stored prompt of this session
	Now           func() time.Time
}

func newPromptCmd(app *App, runF func(*PromptOptions) error) *cobra.Command {
	opts := &PromptOptions{App: app, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "prompt <agent>",
		Short: "Print the prompt an agent would get if a session started now",
		Long: `Print the prompt the agent would get if its next session started now,
built from the real sources: its role and mode from swarm.toml, its queued
mail, the ready beads tasks (bd ready) and the state of its worktree (or of
the repo root, before the agent has a worktree). Nothing is consumed: the
mail stays queued.

A source that is missing, slow or failing (bd not installed, bd hanging past
[prompt] bd_timeout, not a git repository) only drops its section, with a
warning on stderr.

With --json the output is {"text", "sections": [{"number", "title", "body"}],
"tokens_estimate", "mode", "profile", "strategy", "capabilities"}: number
is the fixed section number 1-14, title has no "## "; mode is execute or
coordinate, profile code, review, delegate or null, and capabilities the
vector {"can_...": bool} (the stored session's with --session).`,
		Example: `  swarm prompt backend
  swarm prompt backend --json
  swarm prompt backend --interrupted-by 12   # preview the Interrupt Context block`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.completeAgents(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Agent = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runPrompt(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.SessionSeq, "session-seq", 0, "render for session `N` (default: the agent's next session)")
	f.Int64Var(&opts.InterruptedBy, "interrupted-by", 0, "show the Interrupt Context block as if message `ID` had interrupted the last session")
	f.Int64Var(&opts.Stored, "session", 0, "print the prompt stored for session `N` (what the agent got)")
	cmd.MarkFlagsMutuallyExclusive("session", "session-seq")
	cmd.MarkFlagsMutuallyExclusive("session", "interrupted-by")
	return cmd
}

// promptJSON is the --json contract.
type promptJSON struct {
	Text           string               `json:"text"`
	Sections       []promptpipe.Section `json:"sections"`
	TokensEstimate int                  `json:"tokens_estimate"`
	modeJSON
}

func runPrompt(ctx context.Context, opts *PromptOptions) error {
	app := opts.App
	if opts.SessionSeq < 0 {
		return usagef("--session-seq must be 1 or more, got %d", opts.SessionSeq)
	}
	if opts.InterruptedBy < 0 {
		return usagef("--interrupted-by must be a message id, got %d", opts.InterruptedBy)
	}
	l, cfg, err := app.loadConfig()
	if err != nil {
		return err
	}
	agent, err := app.knownAgent(ctx, l, cfg, opts.Agent)
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer st.Close()

	if opts.Stored != 0 {
		sess, err := st.Session(ctx, agent.Name, opts.Stored)
		if errors.Is(err, mailbox.ErrNoSuchSession) {
			return fmt.Errorf("%s has no session %d; 'swarm events --agent %s' shows its sessions", agent.Name, opts.Stored, agent.Name)
		}
		if err != nil {
			return err
		}
		if app.JSON {
			secs := promptpipe.SplitSections(sess.Prompt)
			return app.printJSON(promptJSON{Text: sess.Prompt, Sections: secs, TokensEstimate: promptpipe.EstimateTokens(sess.Prompt), modeJSON: modeOf(agent, sess.Capabilities)})
		}
		_, err = fmt.Fprint(app.Stdout, sess.Prompt)
		return err
	}

	// The same wiring as the supervisor's: nothing is consumed.
	who, err := app.callerOf(ctx, st, cfg)
	if err != nil {
		return err
	}
	p, err := verbs.Preview(ctx, who, verbs.PreviewRequest{Config: cfg, Layout: l, Store: st, Agent: agent,
		Seq: opts.SessionSeq, InterruptedBy: opts.InterruptedBy, Now: opts.Now, Logger: slog.Default()})
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(promptJSON{Text: p.Text, Sections: p.Sections, TokensEstimate: p.TokensEstimate, modeJSON: modeOf(agent, nil)})
	}
	_, err = fmt.Fprint(app.Stdout, p.Text)
	return err
}
