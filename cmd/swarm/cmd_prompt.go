package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/worktree"
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

func init() { commands = append(commands, newPromptCmd) }

func newPromptCmd(app *App) *cobra.Command {
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
"tokens_estimate"}: number is the fixed section number 1-14, title has no
"## ".`,
		Example: `  swarm prompt backend
  swarm prompt backend --json
  swarm prompt backend --interrupted-by 12   # preview the Interrupt Context block`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: app.completeAgents(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Agent = args[0]
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
	agent, err := agentIn(cfg, opts.Agent)
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
			return app.printJSON(promptJSON{Text: sess.Prompt, Sections: secs, TokensEstimate: promptpipe.EstimateTokens(sess.Prompt)})
		}
		_, err = fmt.Fprint(app.Stdout, sess.Prompt)
		return err
	}

	// Queued only reads: previewing consumes nothing.
	mail, err := st.Queued(ctx, agent.Name)
	if err != nil {
		return err
	}
	seq := opts.SessionSeq
	if seq == 0 {
		if seq, err = nextSession(ctx, st, agent.Name); err != nil {
			return err
		}
	}
	var interrupt *promptpipe.InterruptContext
	if opts.InterruptedBy != 0 {
		m, err := st.Get(ctx, opts.InterruptedBy)
		if errors.Is(err, mailbox.ErrNoSuchMessage) {
			return fmt.Errorf("no message #%d: 'swarm inbox %s' lists %s's messages with their ids", opts.InterruptedBy, agent.Name, agent.Name)
		}
		if err != nil {
			return err
		}
		if m.To != agent.Name {
			return fmt.Errorf("message #%d was sent to %s, not to %s: pick one from 'swarm inbox %s'", m.ID, m.To, agent.Name, agent.Name)
		}
		// An urgent message interrupts as soon as it is written.
		interrupt = &promptpipe.InterruptContext{MessageID: m.ID, From: m.From, Body: m.Body, When: m.CreatedAt, Reason: "urgent message"}
	}

	dir := l.Root
	if wt := filepath.Join(cfg.Worktree.Dir, agent.Name); promptDirExists(wt) {
		dir = wt
	}
	tasks := &beads.Client{Dir: dir, Actor: agent.Name, Timeout: cfg.Prompt.BDTimeout}
	b := &promptpipe.Builder{Tasks: tasks, Config: cfg.Prompt, Now: opts.Now, Logger: slog.Default()}
	base, _, err := st.Meta(ctx, worktree.MetaBaseBranch)
	if err != nil {
		return err
	}
	pc := swarm.PromptContextFor(cfg, l, agent, seq, dir, base, mail)
	pc.Beads = tasks.Installed()
	pc.Interrupt = interrupt
	p, err := b.Build(ctx, pc)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(promptJSON{Text: p.Text, Sections: p.Sections, TokensEstimate: p.TokensEstimate})
	}
	_, err = fmt.Fprint(app.Stdout, p.Text)
	return err
}

// nextSession is the number the agent's next session gets: one more than
// its last, across restarts (sessions only grow).
func nextSession(ctx context.Context, st *mailbox.Store, agent string) (int64, error) {
	var last int64
	err := st.DB().QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM sessions WHERE agent = ?`, agent).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("read %s's last session: %w", agent, err)
	}
	return last + 1, nil
}

func promptDirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
