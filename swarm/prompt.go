package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/worktree"
)

// This file is the one prompt wiring: the supervisor's runners and `swarm
// prompt` build a session's prompt through the same request and the same
// builder, so the preview is byte for byte what the agent gets.

// promptRequest is what session seq of agent a is built from.
func (s *Supervisor) promptRequest(a config.Agent, seq int64, dir string, mail []message.Message, in *Interrupt) PromptRequest {
	// The poster's names: the configured agents and those spawned since.
	return newPromptRequest(s.poster.Names(), a, seq, dir, mail, in, s.opts.Tasks != nil)
}

// maxTeammates is how many teammates a prompt names; the rest are counted.
// Every prompt naming every agent would make a big swarm's startup
// quadratic, and the model gains nothing from a list of thousands.
const maxTeammates = 50

// newPromptRequest builds the request from names, every agent of the swarm
// in config order, which it does not change.
func newPromptRequest(names []string, a config.Agent, seq int64, dir string, mail []message.Message, in *Interrupt, beadsOK bool) PromptRequest {
	mates, more := teammates(names, a.Name, maxTeammates)
	return PromptRequest{
		Agent:         a,
		SessionID:     SessionID(a.Name, seq),
		Seq:           seq,
		Worktree:      dir,
		Teammates:     mates,
		MoreTeammates: more,
		Mail:          mail,
		Interrupt:     in,
		BeadsOK:       beadsOK,
	}
}

// teammates returns up to limit of names other than self, in order, and how
// many others there are beyond them. It reads only as far as it needs.
func teammates(names []string, self string, limit int) ([]string, int) {
	var out []string
	for i, n := range names {
		if n == self {
			continue
		}
		if len(out) == limit {
			more := len(names) - i
			if slices.Contains(names[i:], self) {
				more--
			}
			return out, more
		}
		out = append(out, n)
	}
	return out, 0
}

// InterruptFor is the Interrupt Context of the session after seq, which
// urgent mail m cut short.
func InterruptFor(m message.Message, seq int64) *Interrupt {
	return &Interrupt{Seq: seq, Message: m, Reason: (&UrgentError{Message: m}).Error()}
}

// PipePrompts builds prompts with promptpipe.
type PipePrompts struct {
	Builder *promptpipe.Builder
	Config  *config.Config
	Layout  repo.Layout
	Store   mailbox.Store // the recorded base branch
}

// NewPipePrompts is the prompt builder of a swarm: tasks is the shared bd
// adapter, nil without bd.
func NewPipePrompts(cfg *config.Config, l repo.Layout, st mailbox.Store, tasks *BeadsTasks, now func() time.Time, logger *slog.Logger) PipePrompts {
	b := &promptpipe.Builder{Config: cfg.Prompt, Logger: logger, Now: now}
	if tasks != nil {
		b.Tasks = tasks
	}
	return PipePrompts{Builder: b, Config: cfg, Layout: l, Store: st}
}

// Build builds one session's prompt.
func (p PipePrompts) Build(ctx context.Context, req PromptRequest) (Prompt, error) {
	out, err := p.render(ctx, req)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Text: out.Text, TaskIDs: out.TaskIDs}, nil
}

func (p PipePrompts) render(ctx context.Context, req PromptRequest) (promptpipe.Prompt, error) {
	base, _, err := p.Store.Meta(ctx, worktree.MetaBaseBranch)
	if err != nil {
		return promptpipe.Prompt{}, err
	}
	pc := promptpipe.PromptContext{
		Branch:     worktree.Branch(req.Agent.Name),
		BaseBranch: base,
		Agent:      req.Agent.Name,
		Role:       req.Agent.Role,
		Mode:       req.Agent.Mode,
		Strategy:   req.Agent.Strategy,
		TreeRoot:   req.Agent.TreeRoot,
		Caps:       req.Caps,
		CLI:        req.CLI,
		SessionID:  req.SessionID,
		SessionSeq: req.Seq,
		DBPath:     absPath(p.Layout.DB),
		Worktree:   req.Worktree,
		Root:       p.Layout.Root,
		Teammates:  req.Teammates,
		// More teammates than the prompt names.
		MoreTeammates: req.MoreTeammates,
		Messages:      req.Mail,
		Beads:         req.BeadsOK,
		Integration:   req.Integration,
	}
	if in := req.Interrupt; in != nil {
		m := in.Message
		when := m.CreatedAt
		if in.At != nil {
			when = *in.At
		}
		pc.Interrupt = &promptpipe.InterruptContext{MessageID: m.ID, From: m.From, Body: m.Body, When: when, Reason: in.Reason}
	}
	if pc.Reservations, err = p.reservations(ctx); err != nil {
		return promptpipe.Prompt{}, err
	}
	if p.Config != nil && len(p.Config.Workflows) > 0 {
		if pc.Workflow, err = WorkflowContextFor(ctx, p.Store, p.Config, req.Agent.Name); err != nil {
			return promptpipe.Prompt{}, fmt.Errorf("read the agent's workflow items: %w", err)
		}
	}
	for _, d := range req.Decisions {
		od := promptpipe.OperatorDecision{Escalation: d.ID, Kind: string(d.Kind), Summary: d.Summary, Note: d.Note}
		if d.Decision != nil {
			od.Decision = string(*d.Decision)
		}
		if d.ResolvedAt != nil {
			od.When = *d.ResolvedAt
		}
		pc.Decisions = append(pc.Decisions, od)
	}
	return p.Builder.Build(ctx, pc)
}

// PreviewRequest asks for the prompt an agent's session would get now.
type PreviewRequest struct {
	Config *config.Config
	Layout repo.Layout
	Store  mailbox.Store
	Agent  config.Agent
	// Seq is the session to render; 0 means the agent's next one.
	Seq int64
	// InterruptedBy renders the Interrupt Context as if this message had
	// cut the previous session short; 0 means none.
	InterruptedBy int64
	Now           func() time.Time
	Logger        *slog.Logger
}

// Preview renders the prompt the agent's session would get if it started
// now, built exactly as the supervisor builds it. Nothing is consumed: the
// mail stays queued.
func Preview(ctx context.Context, req PreviewRequest) (promptpipe.Prompt, error) {
	st, a := req.Store, req.Agent
	mail, err := st.Queued(ctx, a.Name)
	if err != nil {
		return promptpipe.Prompt{}, err
	}
	seq := req.Seq
	if seq == 0 {
		if seq, err = NextSession(ctx, st, a.Name); err != nil {
			return promptpipe.Prompt{}, err
		}
	}
	var in *Interrupt
	if req.InterruptedBy != 0 {
		m, err := st.Message(ctx, req.InterruptedBy)
		if errors.Is(err, mailbox.ErrNoSuchMessage) {
			return promptpipe.Prompt{}, fmt.Errorf("no message #%d: 'swarm inbox %s' lists %s's messages with their ids", req.InterruptedBy, a.Name, a.Name)
		}
		if err != nil {
			return promptpipe.Prompt{}, err
		}
		if m.To != a.Name {
			return promptpipe.Prompt{}, fmt.Errorf("message #%d was sent to %s, not to %s: pick one from 'swarm inbox %s'", m.ID, m.To, a.Name, a.Name)
		}
		in = InterruptFor(m, seq-1)
	}
	// The agent's worktree once it has one; the repo root before.
	dir := req.Layout.Root
	if wt := filepath.Join(req.Config.Worktree.Dir, a.Name); isDir(wt) {
		dir = wt
	}
	// The decisions the next prompt would carry, not marked as shown.
	decisions, err := st.Escalations(ctx, mailbox.EscalationFilter{Agent: a.Name, Unshown: true})
	if err != nil {
		return promptpipe.Prompt{}, err
	}
	tasks := NewBeadsTasks(req.Layout.Root, req.Config.Prompt.BDTimeout)
	if tasks != nil {
		defer tasks.Close()
	}
	p := NewPipePrompts(req.Config, req.Layout, st, tasks, req.Now, req.Logger)
	pr := newPromptRequest(req.Config.AgentNames(), a, seq, dir, mail, in, tasks != nil)
	pr.Decisions = decisions
	// The trial merges as they stand; a preview merges and mails nothing.
	if _, ok, err := st.Meta(ctx, worktree.MetaBaseBranch); err == nil && ok {
		pr.Integration = previewIntegration(ctx, st, req.Layout.Root, a.Name, req.Config.AgentNames())
	}
	// An exec agent's prompt names its CLI's tools, as the runner's does.
	if e, err := req.Config.EngineFor(a, ""); err == nil && e.Kind == config.EngineExec {
		if x, err := execengine.New(execengine.FromConfig(e)); err == nil {
			pr.CLI = cliTools(x, a.Spec().Vector())
		}
	}
	return p.render(ctx, pr)
}

// cliTools is what eng gives a session with caps, when it runs an external
// CLI; nil otherwise.
func cliTools(eng engine.Engine, caps mode.Vector) *mode.CLITools {
	c, ok := eng.(engine.CLI)
	if !ok {
		return nil
	}
	t := c.CLITools(caps)
	return &t
}

// NextSession is the number the agent's next session gets: one more than
// its last, across restarts (sessions only grow).
func NextSession(ctx context.Context, st mailbox.Store, agent string) (int64, error) {
	last, err := st.LastSession(ctx, agent, "")
	if errors.Is(err, mailbox.ErrNoSuchSession) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s's last session: %w", agent, err)
	}
	return last.Seq + 1, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// reservations are the file reservations live now, for Environment.
func (p PipePrompts) reservations(ctx context.Context) ([]promptpipe.Reservation, error) {
	now := time.Now()
	if p.Builder != nil && p.Builder.Now != nil {
		now = p.Builder.Now()
	}
	rs, err := p.Store.Reservations(ctx, now, false)
	if err != nil {
		return nil, fmt.Errorf("read the file reservations: %w", err)
	}
	var out []promptpipe.Reservation
	for _, r := range rs {
		pr := promptpipe.Reservation{Agent: r.Agent, Glob: r.Glob, Exclusive: r.Exclusive, Reason: r.Reason}
		if r.ExpiresAt != nil {
			pr.Until = *r.ExpiresAt
		}
		out = append(out, pr)
	}
	return out, nil
}
