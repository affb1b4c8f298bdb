package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// StartText is the user turn that opens every in-process session; the
// prompt itself goes in as the system instruction.
const StartText = "Begin your session. Your prompt above has your role, mail and tasks."

// DefaultMaxTurns applies when Session.MaxTurns is 0.
const DefaultMaxTurns = 100

var (
	// ErrSessionTimeout is in the cause of a session that ran past
	// Session.Timeout (Outcome Timeout), so a timeout can be told from a
	// cancellation.
	ErrSessionTimeout = errors.New("session timeout")
	// ErrMaxTurns is in the error of a session that used up its turns.
	ErrMaxTurns = errors.New("max turns reached")
)

// Loop is the tool-using agent loop shared by the in-process engines
// (gemini, script). It implements Engine over a Model:
//
//	&engine.Loop{EngineName: "gemini", Model: m}
//
// Each session starts with the prompt as the system instruction and
// StartText as the first user turn. The loop asks the model for a turn,
// runs its tool calls in order, appends their results as one user turn (and
// any Session.Interject texts as another), and repeats until the model
// answers without a tool call (Success), the context is cancelled
// (Cancelled, with its cause), MaxTurns model turns were used (Failed) or
// Session.Timeout passed (Timeout). The conversation is written to
// Session.Log as it happens.
type Loop struct {
	// EngineName is what Name reports (gemini, script, or an [engine.NAME]
	// table's name).
	EngineName string
	// Model produces the turns.
	Model Model
	// Logger gets diagnostics; slog.Default() when nil.
	Logger *slog.Logger
}

// Name is the engine's configured name.
func (l *Loop) Name() string { return l.EngineName }

func (l *Loop) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.Default()
}

// Run runs one session and blocks until it ends.
func (l *Loop) Run(ctx context.Context, s *Session) Result {
	clog := &convLog{w: s.Log}
	log := l.logger().With("agent", s.Agent, "session_seq", s.Seq, "engine", l.EngineName)
	res := l.run(ctx, s, clog, log)
	clog.end(res)
	log.Debug("session ended", "outcome", res.Outcome, "turns", res.Turns,
		"input_tokens", res.Usage.InputTokens, "output_tokens", res.Usage.OutputTokens, "error", res.Err, "cause", res.Cause)
	return res
}

func (l *Loop) run(ctx context.Context, s *Session, clog *convLog, log *slog.Logger) (res Result) {
	fail := func(err error) Result {
		res.Outcome, res.Err = Failed, err
		return res
	}
	if l.Model == nil {
		return fail(errors.New("engine loop: no model"))
	}
	tb, err := newToolbox(s)
	if err != nil {
		return fail(fmt.Errorf("start session: %w", err))
	}
	defer tb.close()
	maxTurns := s.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	parent := ctx
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.Timeout,
			fmt.Errorf("%w: %s passed: %w", ErrSessionTimeout, s.Timeout, context.DeadlineExceeded))
		defer cancel()
	}
	stopped := func() Result {
		if parent.Err() == nil && errors.Is(context.Cause(ctx), ErrSessionTimeout) {
			res.Outcome, res.Err = Timeout, context.Cause(ctx)
			return res
		}
		res.Outcome, res.Cause = Cancelled, context.Cause(parent)
		return res
	}
	activity := func(what string) {
		if s.OnActivity != nil {
			s.OnActivity(what)
		}
	}

	specs := tb.specs()
	clog.start(l.EngineName, s, tb.offered)
	turns := []Turn{{Role: RoleUser, Parts: []Part{{Text: StartText}}}}
	clog.user(StartText)
	for {
		if ctx.Err() != nil {
			return stopped()
		}
		if res.Turns >= maxTurns {
			return fail(fmt.Errorf("%w: %d model turns without a final answer (max_turns = %d)", ErrMaxTurns, res.Turns, maxTurns))
		}
		activity("model: thinking")
		resp, err := l.Model.Generate(ctx, Request{Model: s.Model, System: s.Prompt, Turns: turns, Tools: specs, Session: s})
		res.Usage = res.Usage.Add(resp.Usage)
		if s.OnUsage != nil && !resp.Usage.IsZero() {
			s.OnUsage(resp.Usage)
		}
		if err != nil {
			if ctx.Err() != nil {
				return stopped()
			}
			return fail(fmt.Errorf("model turn %d: %w", res.Turns+1, err))
		}
		res.Turns++
		turn := resp.Turn
		if turn.Role == "" {
			turn.Role = RoleModel
		}
		turns = append(turns, turn)
		clog.model(res.Turns, turn)

		var calls []ToolCall
		for _, p := range turn.Parts {
			if p.Call != nil {
				calls = append(calls, *p.Call)
			}
		}
		if len(calls) == 0 {
			res.Outcome = Success
			return res
		}
		results := make([]Part, 0, len(calls))
		for _, call := range calls {
			if ctx.Err() != nil {
				return stopped()
			}
			activity(summary(call))
			r := tb.run(ctx, call)
			if ctx.Err() != nil {
				clog.note(call.Name + " stopped: the session ended")
				return stopped()
			}
			log.Debug("tool call", "tool", call.Name, "tool_error", r.Error)
			clog.result(r)
			results = append(results, Part{Result: &r})
		}
		turns = append(turns, Turn{Role: RoleUser, Parts: results})
		if s.Interject != nil {
			if texts := s.Interject(ctx); len(texts) > 0 {
				parts := make([]Part, len(texts))
				for i, t := range texts {
					parts[i] = Part{Text: t}
				}
				turns = append(turns, Turn{Role: RoleUser, Parts: parts})
				clog.interject(texts)
			}
		}
	}
}

// Conversation log limits: the log is for a human tailing it, so long
// tool output is cut; the model still gets the whole (capped) output.
const (
	logOutputLines = 20
	logOutputBytes = 2 << 10
)

// convLog writes the conversation to the session log. It has no clock, so
// the same session gives the same log (the script engine's determinism
// tests compare logs). Write errors are ignored after the first: the log is
// a view, and a broken one must not end the session.
type convLog struct {
	w      io.Writer
	broken bool
}

func (c *convLog) printf(format string, a ...any) {
	if c.w == nil || c.broken {
		return
	}
	if _, err := fmt.Fprintf(c.w, format, a...); err != nil {
		c.broken = true
	}
}

func (c *convLog) start(engine string, s *Session, tools []string) {
	c.printf("=== session %d of %s · engine %s · mode %s", s.Seq, s.Agent, engine, s.Mode)
	if s.Model != "" {
		c.printf(" · model %s", s.Model)
	}
	c.printf("\ntools: %s\n", orNone(strings.Join(tools, ", ")))
	if len(s.Mail) > 0 {
		var from []string
		for _, m := range s.Mail {
			from = append(from, fmt.Sprintf("#%d from %s", m.ID, m.From))
		}
		c.printf("mail: %s\n", strings.Join(from, ", "))
	}
}

func (c *convLog) user(text string) { c.printf("\n[user]\n%s\n", indent(text)) }

func (c *convLog) model(n int, t Turn) {
	c.printf("\n[model %d]\n", n)
	for _, p := range t.Parts {
		switch {
		case p.Call != nil:
			args, _ := LogJSON(p.Call.Args)
			c.printf("  → %s %s\n", p.Call.Name, args)
		case p.IsThought && p.Text != "":
			c.printf("  (thinking) %s\n", strings.TrimPrefix(indent(p.Text), "  "))
		case p.Text != "":
			c.printf("%s\n", indent(p.Text))
		}
	}
}

func (c *convLog) result(r ToolResult) {
	if r.Error != "" {
		c.printf("  ← %s error: %s\n", r.Name, r.Error)
		if r.Output == "" {
			return
		}
	} else {
		c.printf("  ← %s\n", r.Name)
	}
	c.printf("%s\n", indent(indent(clip(r.Output))))
}

func (c *convLog) interject(texts []string) {
	c.printf("\n[interjected at the tool boundary]\n")
	for _, t := range texts {
		c.printf("%s\n", indent(t))
	}
}

func (c *convLog) note(text string) { c.printf("  ! %s\n", text) }

func (c *convLog) end(res Result) {
	c.printf("\n=== end: %s · %d turns · tokens %d in, %d out", res.Outcome, res.Turns, res.Usage.InputTokens, res.Usage.OutputTokens)
	switch {
	case res.Err != nil:
		c.printf(" · %v", res.Err)
	case res.Cause != nil:
		c.printf(" · cause: %v", res.Cause)
	}
	c.printf("\n")
}

// clip keeps the first lines of a tool's output for the log.
func clip(s string) string {
	s = strings.TrimRight(s, "\n")
	total := len(s)
	lines := strings.SplitN(s, "\n", logOutputLines+1)
	if len(lines) > logOutputLines {
		lines = lines[:logOutputLines]
	}
	out := truncUTF8(strings.Join(lines, "\n"), logOutputBytes)
	if len(out) < total {
		out += fmt.Sprintf("\n… (%d more bytes)", total-len(out))
	}
	return out
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
