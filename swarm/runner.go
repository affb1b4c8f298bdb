package swarm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
)

// runner owns one agent: its state, its session and its timers. Only the
// runner goroutine changes the agent's state; others reach it through the
// wake and ctl channels.
type runner struct {
	sup   *Supervisor
	agent config.Agent
	eng   engine.Engine
	kind  string // the engine's kind: gemini, script or exec

	wake chan struct{} // something changed in the database
	ctl  chan string   // control.OpPause or control.OpResume
	done chan struct{} // closed when run returns

	state    State
	seq      int64
	worktree string
	branch   string

	interrupt    *Interrupt        // why the last session was cut short
	sessionTasks []string          // ready tasks the current session's prompt listed
	sessionMail  []message.Message // mail delivered into the current session
	lastTasks    []string          // ready tasks the last completed session listed
	pausePending bool
	lastErr      error
	pending      []Notice // transitions made in the open transaction
	stopReason   string   // why the agent stopped, when not by shutdown
}

func newRunner(s *Supervisor, a config.Agent, eng engine.Engine) *runner {
	kind := config.EngineScript
	if e, err := s.cfg.EngineFor(a, s.opts.EngineOverride); err == nil {
		kind = e.Kind
	}
	return &runner{
		sup:   s,
		agent: a,
		eng:   eng,
		kind:  kind,
		wake:  make(chan struct{}, 1),
		ctl:   make(chan string, 4),
		done:  make(chan struct{}),
		state: Stopped,
	}
}

func (r *runner) info() mailbox.AgentInfo {
	return mailbox.AgentInfo{Name: r.agent.Name, Mode: string(r.agent.Mode), Engine: r.eng.Name(), Branch: r.branch, Worktree: r.worktree}
}

// bg is the context for bookkeeping writes, which must happen even while
// the runner is being stopped.
func bg(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// move applies one transition: checked against the table, persisted by
// compare-and-set with its event, then announced.
func (r *runner) move(ctx context.Context, ev Event, to State, cause string) error {
	return r.inTx(ctx, func(tx *mailbox.Tx) error {
		return r.moveTx(ctx, tx, ev, to, cause)
	})
}

// inTx runs fn in one transaction that survives the runner's cancellation,
// and announces the transitions fn made once they are committed. Notices
// are never sent with the transaction open: a listener that reads the
// database would wait on the single connection.
func (r *runner) inTx(ctx context.Context, fn func(tx *mailbox.Tx) error) error {
	state, seq := r.state, r.seq
	r.pending = r.pending[:0]
	err := r.sup.store.InTx(bg(ctx), fn)
	if err != nil {
		r.state, r.seq = state, seq // the transaction rolled back
		r.pending = r.pending[:0]
		return err
	}
	for _, n := range r.pending {
		r.sup.emit(n)
	}
	r.pending = r.pending[:0]
	return nil
}

func (r *runner) moveTx(ctx context.Context, tx *mailbox.Tx, ev Event, to State, cause string) error {
	if err := Check(r.state, ev, to); err != nil {
		return err
	}
	if cause == "" {
		cause = string(ev)
	}
	e, err := tx.Transition(mailbox.Change{Agent: r.agent.Name, From: string(r.state), To: string(to), Cause: cause, Seq: r.seq})
	if err != nil {
		return err
	}
	from := r.state
	r.state = to
	r.pending = append(r.pending, Notice{At: e.At, Agent: r.agent.Name, Kind: "transition", From: from, To: to, Cause: cause, Seq: r.seq})
	return nil
}

// run drives the agent until it stops. It returns nil when the agent
// stopped normally (shutdown or error thresholds).
func (r *runner) run(ctx context.Context) (err error) {
	defer close(r.done)
	defer func() {
		if r.worktree != "" {
			if uerr := r.sup.opts.Worktrees.Unlock(bg(ctx), r.agent.Name); uerr != nil {
				r.sup.log.Warn("unlock worktree", "agent", r.agent.Name, "err", uerr)
			}
		}
		if err != nil && r.state != Stopped {
			r.stopReason = err.Error()
			if merr := r.inTx(ctx, func(tx *mailbox.Tx) error {
				if err := r.settleUnstarted(tx, "stopped: "+err.Error()); err != nil {
					return err
				}
				return r.moveTx(ctx, tx, FatalError, Stopped, err.Error())
			}); merr != nil {
				r.sup.log.Error("record fatal error", "agent", r.agent.Name, "err", merr)
			}
		}
	}()
	if r.state == Stopped {
		if err := r.inTx(ctx, func(tx *mailbox.Tx) error {
			// The error thresholds count within one run: a new swarm up
			// gives a stopped agent a fresh start.
			if err := tx.ResetErrors(r.agent.Name); err != nil {
				return err
			}
			return r.moveTx(ctx, tx, Start, Initializing, "start")
		}); err != nil {
			return err
		}
	}
	for {
		if ctx.Err() != nil && r.state != Stopped {
			return r.stop(ctx, "shutdown")
		}
		var err error
		switch r.state {
		case Stopped:
			return nil
		case Initializing:
			err = r.initialize(ctx)
		case BuildingPrompt:
			err = r.buildPrompt(ctx)
		case Spawning:
			err = r.spawn(ctx)
		case SessionComplete:
			err = r.afterSession(ctx)
		case Idle:
			err = r.idle(ctx)
		case CoolingDown:
			err = r.coolDown(ctx)
		case Paused:
			err = r.paused(ctx)
		default:
			err = fmt.Errorf("runner in unexpected state %s", r.state)
		}
		if err != nil {
			return err
		}
	}
}

func (r *runner) stop(ctx context.Context, cause string) error {
	if r.state == Stopped {
		return nil
	}
	return r.inTx(ctx, func(tx *mailbox.Tx) error {
		if err := r.settleUnstarted(tx, cause); err != nil {
			return err
		}
		return r.moveTx(ctx, tx, OperatorStop, Stopped, cause)
	})
}

// applyControl takes the pause and resume requests already queued, so a
// request made while the runner was busy elsewhere is not missed.
func (r *runner) applyControl() {
	for {
		select {
		case op := <-r.ctl:
			r.pausePending = op == control.OpPause
		default:
			return
		}
	}
}

// settleUnstarted ends a session whose prompt was built (its mail
// delivered) but which never started, when the agent stops in Spawning:
// its mail is queued again instead of staying delivered.
func (r *runner) settleUnstarted(tx *mailbox.Tx, why string) error {
	if r.state != Spawning {
		return nil
	}
	err := tx.EndSession(mailbox.SessionEnd{Agent: r.agent.Name, Seq: r.seq, State: mailbox.SessionInterrupted, Error: why})
	if errors.Is(err, mailbox.ErrNoSuchSession) {
		return nil
	}
	return err
}

func (r *runner) initialize(ctx context.Context) error {
	wt := r.sup.opts.Worktrees
	path, branch, err := wt.Ensure(ctx, r.agent.Name)
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	r.worktree, r.branch = path, branch
	if err := wt.Lock(ctx, r.agent.Name, fmt.Sprintf("swarm supervisor pid %d", os.Getpid())); err != nil {
		return fmt.Errorf("lock worktree: %w", err)
	}
	if err := r.sup.store.RegisterAgent(bg(ctx), r.info()); err != nil {
		return err
	}
	if last, err := r.sup.store.LastSession(bg(ctx), r.agent.Name, mailbox.SessionCompleted); err == nil {
		r.lastTasks = last.Tasks
	}
	return r.move(ctx, WorktreeReady, BuildingPrompt, "")
}

// sessionID names a session across the swarm; sessionMarker matches it.
func (r *runner) sessionID(seq int64) string { return r.agent.Name + "-" + strconv.FormatInt(seq, 10) }

// buildPrompt delivers the queued mail into the next session and builds its
// prompt from nothing.
func (r *runner) buildPrompt(ctx context.Context) error {
	// A pause asked for during an interrupted or failed session takes
	// effect before the next session starts.
	r.applyControl()
	if r.pausePending {
		r.pausePending = false
		return r.move(ctx, Pause, Paused, "paused by operator")
	}
	// The prompt is built from the queued mail without consuming it; then
	// one transaction delivers exactly that mail into the session, stores
	// the session and moves on. A crash can never leave mail delivered to
	// a session that does not exist, and mail arriving meanwhile waits for
	// the next prompt.
	seq := r.seq + 1
	queued, err := r.sup.store.Queued(bg(ctx), r.agent.Name)
	if err != nil {
		return err
	}
	req := PromptRequest{
		Agent:     r.agent,
		SessionID: r.sessionID(seq),
		Seq:       seq,
		Worktree:  r.worktree,
		Teammates: r.teammates(),
		Mail:      queued,
		Interrupt: r.interrupt,
		BeadsOK:   r.sup.opts.Tasks != nil,
	}
	p, err := r.sup.opts.Prompts.Build(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("build prompt: %w", err)
	}
	ids := make([]int64, len(queued))
	for i, m := range queued {
		ids[i] = m.ID
	}
	var mail []message.Message
	if err := r.inTx(ctx, func(tx *mailbox.Tx) error {
		var err error
		if mail, err = tx.DeliverInto(r.agent.Name, seq, ids); err != nil {
			return err
		}
		if _, err := tx.StartSession(r.agent.Name, seq, r.eng.Name(), p.Text, p.TaskIDs); err != nil {
			return err
		}
		r.seq = seq
		return r.moveTx(ctx, tx, PromptReady, Spawning, fmt.Sprintf("session %d: %d message(s)", seq, len(mail)))
	}); err != nil {
		return err
	}
	r.interrupt = nil
	r.sessionTasks = p.TaskIDs
	r.sessionMail = mail
	if r.realWork(mail, p.TaskIDs) {
		if err := r.sup.store.SetNudges(bg(ctx), r.agent.Name, 0); err != nil {
			r.sup.log.Warn("reset nudges", "agent", r.agent.Name, "err", err)
		}
	}
	return nil
}

func (r *runner) teammates() []string {
	var out []string
	for _, n := range r.sup.cfg.AgentNames() {
		if n != r.agent.Name {
			out = append(out, n)
		}
	}
	return out
}

// session is one running engine session.
type session struct {
	seq    int64
	cancel context.CancelCauseFunc
	done   chan engine.Result
	guard  Guard
	log    *os.File
	pgids  chan int
	groups []int
}

// spawn starts the session and follows it to its end.
func (r *runner) spawn(ctx context.Context) error {
	sess, err := r.startSession(ctx)
	if err != nil {
		r.sup.log.Warn("session did not start", "agent", r.agent.Name, "session_seq", r.seq, "err", err)
		return r.endFailed(ctx, StartFailed, mailbox.SessionFailed, err)
	}
	if err := r.move(ctx, SessionStarted, Running, ""); err != nil {
		sess.cancel(err)
		<-sess.done
		return err
	}
	// Urgent mail that came in while spawning interrupts at once.
	return r.follow(ctx, sess)
}

func (r *runner) startSession(ctx context.Context) (*session, error) {
	guard, err := r.sup.opts.Worktrees.Guard(ctx, r.agent.Name)
	if err != nil {
		return nil, fmt.Errorf("guard the base branch: %w", err)
	}
	dir := filepath.Join(r.sup.opts.Layout.Logs(), r.agent.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.log", r.seq)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	stored, err := r.sup.store.Session(bg(ctx), r.agent.Name, r.seq)
	if err != nil {
		logf.Close()
		return nil, err
	}
	var mail []engine.Mail
	for _, m := range r.sessionMail {
		mail = append(mail, engine.Mail{ID: m.ID, From: m.From, Body: m.Body, Urgent: m.IsUrgent()})
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &session{seq: r.seq, cancel: cancel, done: make(chan engine.Result, 1), guard: guard, log: logf, pgids: make(chan int, 64)}
	es := &engine.Session{
		Agent:     r.agent.Name,
		ID:        r.sessionID(r.seq),
		Seq:       r.seq,
		Root:      r.sup.opts.Layout.Root,
		DB:        absPath(r.sup.opts.Layout.DB),
		Agents:    r.sup.cfg.AgentNames(),
		Worktree:  r.worktree,
		Branch:    r.branch,
		Prompt:    stored.Prompt,
		Mode:      r.agent.Mode,
		Model:     r.agent.Model,
		MaxTurns:  r.agent.MaxTurns,
		Timeout:   r.agent.SessionTimeout,
		Grace:     r.agent.InterruptGrace,
		Mail:      mail,
		Messenger: messenger{sup: r.sup, agent: r.agent.Name},
		Log:       logf,
		OnProcess: func(pgid int) {
			if err := r.sup.store.AddSessionPgid(context.Background(), r.agent.Name, s.seq, pgid); err != nil {
				r.sup.log.Warn("record process group", "agent", r.agent.Name, "err", err)
			}
			select {
			case s.pgids <- pgid:
			default:
			}
		},
		OnActivity: func(summary string) {
			_ = r.sup.store.SetActivity(context.Background(), r.agent.Name, summary)
			r.sup.emit(Notice{Agent: r.agent.Name, Kind: "activity", Text: summary, Seq: s.seq})
		},
	}
	if r.sup.opts.Tasks != nil {
		es.Tasks = r.sup.opts.Tasks.Board(r.agent.Name, r.worktree)
	}
	if r.agent.Interrupt == config.InterruptBoundary && r.kind != config.EngineExec {
		es.Interject = func(ictx context.Context) []string { return r.interject(ictx, s.seq) }
	}
	es.Env = engine.SessionEnv(os.Environ(), es)
	fmt.Fprintf(logf, "# session %d of %s on %s, started %s\n", r.seq, r.agent.Name, r.eng.Name(), r.sup.clock.Now().Format(time.RFC3339))
	go func() { s.done <- r.eng.Run(sctx, es) }()
	return s, nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// follow waits for the running session to end, interrupting it for urgent
// mail, and settles it.
func (r *runner) follow(ctx context.Context, s *session) error {
	defer func() {
		s.log.Close()
		// The last tool call belongs to the session that ended.
		_ = r.sup.store.SetActivity(bg(ctx), r.agent.Name, "")
	}()
	if m, ok := r.urgentMail(ctx); ok && r.agent.Interrupt != config.InterruptBoundary {
		return r.interruptSession(ctx, s, m)
	}
	for {
		select {
		case res := <-s.done:
			return r.sessionEnded(ctx, s, res)
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
		case <-r.wake:
			if r.agent.Interrupt == config.InterruptBoundary && r.kind != config.EngineExec {
				continue // the engine takes urgent mail at its next tool boundary
			}
			if m, ok := r.urgentMail(ctx); ok {
				return r.interruptSession(ctx, s, m)
			}
		case op := <-r.ctl:
			if op == control.OpPause {
				r.pausePending = true
			} else {
				r.pausePending = false
			}
		case <-ctx.Done():
			return r.shutdownSession(ctx, s)
		}
	}
}

// urgentMail returns the oldest queued urgent mail for the agent.
func (r *runner) urgentMail(ctx context.Context) (message.Message, bool) {
	q, err := r.sup.store.Queued(bg(ctx), r.agent.Name)
	if err != nil {
		r.sup.log.Warn("read queued mail", "agent", r.agent.Name, "err", err)
		return message.Message{}, false
	}
	if len(q) > 0 && q[0].IsUrgent() {
		return q[0], true
	}
	return message.Message{}, false
}

func (r *runner) interruptSession(ctx context.Context, s *session, m message.Message) error {
	cause := &UrgentError{Message: m}
	s.cancel(cause)
	r.interrupt = &Interrupt{Seq: s.seq, Message: m, Reason: cause.Error()}
	if err := r.move(ctx, UrgentMail, Interrupting, cause.Error()); err != nil {
		<-s.done
		return err
	}
	grace := r.sup.clock.NewTimer(r.agent.InterruptGrace)
	defer grace.Stop()
	for {
		select {
		case res := <-s.done:
			return r.settleInterrupted(ctx, s, res, SessionExited, "session ended after interrupt")
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
		case <-grace.C:
			r.killGroups(s)
			res := <-s.done
			return r.settleInterrupted(ctx, s, res, GraceExceeded, fmt.Sprintf("still running after %s: process groups killed", r.agent.InterruptGrace))
		case <-ctx.Done():
			return r.shutdownSession(ctx, s)
		}
	}
}

func (r *runner) killGroups(s *session) {
	for {
		select {
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
			continue
		default:
		}
		break
	}
	for _, pg := range s.groups {
		if _, err := proc.KillSessionGroup(pg, sessionMarker(r.agent.Name, s.seq)); err != nil {
			r.sup.log.Warn("kill process group", "agent", r.agent.Name, "pgid", pg, "err", err)
		}
	}
}

func (r *runner) settleInterrupted(ctx context.Context, s *session, res engine.Result, ev Event, cause string) error {
	r.logResult(s, res)
	return r.inTx(ctx, func(tx *mailbox.Tx) error {
		if err := tx.EndSession(mailbox.SessionEnd{Agent: r.agent.Name, Seq: s.seq, State: mailbox.SessionInterrupted,
			TokensIn: res.Usage.InputTokens, TokensOut: res.Usage.OutputTokens, Error: r.interrupt.Reason}); err != nil {
			return err
		}
		return r.moveTx(ctx, tx, ev, BuildingPrompt, cause)
	})
}

// shutdownSession stops a session because the supervisor is stopping: the
// session's context is already cancelled with the shutdown cause.
func (r *runner) shutdownSession(ctx context.Context, s *session) error {
	grace := r.sup.clock.NewTimer(r.agent.InterruptGrace)
	defer grace.Stop()
	var res engine.Result
	select {
	case res = <-s.done:
	case <-grace.C:
		r.killGroups(s)
		res = <-s.done
	}
	r.logResult(s, res)
	return r.inTx(ctx, func(tx *mailbox.Tx) error {
		if err := tx.EndSession(mailbox.SessionEnd{Agent: r.agent.Name, Seq: s.seq, State: mailbox.SessionInterrupted,
			TokensIn: res.Usage.InputTokens, TokensOut: res.Usage.OutputTokens, Error: "stopped: " + causeText(ctx)}); err != nil {
			return err
		}
		return r.moveTx(ctx, tx, OperatorStop, Stopped, "shutdown")
	})
}

func causeText(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "stopped"
}

func (r *runner) logResult(s *session, res engine.Result) {
	msg := string(res.Outcome)
	switch {
	case res.Err != nil:
		msg += ": " + res.Err.Error()
	case res.Cause != nil:
		msg += ": " + res.Cause.Error()
	}
	fmt.Fprintf(s.log, "# session %d ended: %s (turns %d, tokens %d)\n", s.seq, msg, res.Turns, res.Usage.Total())
}

// sessionEnded settles a session that ended on its own.
func (r *runner) sessionEnded(ctx context.Context, s *session, res engine.Result) error {
	r.logResult(s, res)
	if ferr := s.guard.Check(bg(ctx)); ferr != nil {
		r.reportGuard(ctx, s.seq, ferr)
		res = engine.Result{Outcome: engine.Failed, Err: fmt.Errorf("base-branch guard: %w", ferr), Usage: res.Usage, Turns: res.Turns}
	}
	if res.Outcome == engine.Success {
		if r.sup.opts.Tasks != nil {
			r.lastTasks = r.sessionTasks
		}
		return r.inTx(ctx, func(tx *mailbox.Tx) error {
			if err := tx.EndSession(mailbox.SessionEnd{Agent: r.agent.Name, Seq: s.seq, State: mailbox.SessionCompleted,
				TokensIn: res.Usage.InputTokens, TokensOut: res.Usage.OutputTokens}); err != nil {
				return err
			}
			return r.moveTx(ctx, tx, SessionExitedOK, SessionComplete, fmt.Sprintf("session %d completed", s.seq))
		})
	}
	state := mailbox.SessionFailed
	if res.Outcome == engine.Timeout {
		state = mailbox.SessionTimeout
	}
	err := res.Err
	if err == nil {
		err = res.Cause
	}
	if err == nil {
		err = fmt.Errorf("session ended: %s", res.Outcome)
	}
	return r.endFailedUsage(ctx, SessionExitedError, state, err, res.Usage)
}

func (r *runner) endFailed(ctx context.Context, ev Event, state string, cause error) error {
	return r.endFailedUsage(ctx, ev, state, cause, engine.Usage{})
}

// endFailedUsage records a failed session and moves to CoolingDown, or to
// Stopped once the error thresholds are reached.
func (r *runner) endFailedUsage(ctx context.Context, ev Event, state string, cause error, u engine.Usage) error {
	r.lastErr = cause
	return r.inTx(ctx, func(tx *mailbox.Tx) error {
		if err := tx.EndSession(mailbox.SessionEnd{Agent: r.agent.Name, Seq: r.seq, State: state,
			TokensIn: u.InputTokens, TokensOut: u.OutputTokens, Error: cause.Error()}); err != nil {
			return err
		}
		a, err := tx.Agent(r.agent.Name)
		if err != nil {
			return err
		}
		lim := r.sup.cfg.Errors
		to := CoolingDown
		text := fmt.Sprintf("session %d %s: %v", r.seq, state, cause)
		if a.ConsecutiveErrors >= lim.MaxConsecutive || a.TotalErrors >= lim.MaxTotal {
			to = Stopped
			text = fmt.Sprintf("%s; stopping after %d consecutive / %d total errors", text, a.ConsecutiveErrors, a.TotalErrors)
			r.stopReason = text
		}
		return r.moveTx(ctx, tx, ev, to, truncate(text, 500))
	})
}

// reportGuard tells the operator what the base-branch guard found.
func (r *runner) reportGuard(ctx context.Context, seq int64, finding error) {
	body := fmt.Sprintf("Session %d of %s was failed by the base-branch guard: %v. The agent retries after a back-off and stops after repeated failures; put its worktree back on %s (git -C %q switch %s), undo any commit it made on the base branch, and restart swarm up if it stopped.",
		seq, r.agent.Name, finding, r.branch, r.worktree, r.branch)
	m, err := r.sup.store.Send(bg(ctx), message.Draft{From: r.agent.Name, To: message.Operator, Kind: message.KindStatus, Body: body})
	if err != nil {
		r.sup.log.Error("report guard finding", "agent", r.agent.Name, "err", err)
		return
	}
	r.sup.announceMail(bg(ctx))
	_ = m
}

// afterSession decides between another session and Idle.
func (r *runner) afterSession(ctx context.Context) error {
	if r.pausePending {
		r.pausePending = false
		return r.move(ctx, Pause, Paused, "paused by operator")
	}
	if why, ok := r.workWaiting(ctx); ok {
		return r.move(ctx, WorkWaiting, BuildingPrompt, why)
	}
	return r.move(ctx, NoWork, Idle, "")
}

// workWaiting reports whether the agent has work: queued mail of a waking
// kind, a ready task its mode may claim that its last completed session did
// not list, or work its engine knows of (a script with blocks left).
func (r *runner) workWaiting(ctx context.Context) (string, bool) {
	c, err := r.sup.store.Pending(bg(ctx), r.agent.Name)
	if err == nil && c.Waking > 0 {
		return fmt.Sprintf("%d message(s) waiting", c.Waking), true
	}
	if ws, ok := r.eng.(engine.WorkSource); ok && ws.HasWork(r.agent.Name, r.seq+1) {
		return "scripted work waiting", true
	}
	if id, ok := r.newTask(ctx); ok {
		return "ready task " + id, true
	}
	return "", false
}

func (r *runner) newTask(ctx context.Context) (string, bool) {
	if r.sup.opts.Tasks == nil || !r.agent.Mode.ClaimsTasks() {
		return "", false
	}
	ids, ok := r.sup.opts.Tasks.ReadyIDs(ctx)
	if !ok {
		return "", false
	}
	for _, id := range ids {
		if !slices.Contains(r.lastTasks, id) {
			return id, true
		}
	}
	return "", false
}

// idle waits for work without spending anything: mail, a new ready task
// (checked every task_poll), or a nudge when it has been idle long.
func (r *runner) idle(ctx context.Context) error {
	live := r.sup.cfg.Liveness
	if why, ok := r.workWaiting(ctx); ok {
		return r.move(ctx, Wake, BuildingPrompt, why)
	}
	poll := r.sup.clock.NewTimer(live.TaskPoll)
	defer poll.Stop()
	var nudgeC <-chan time.Time
	a, _ := r.sup.store.Agent(bg(ctx), r.agent.Name)
	nudges := a.Nudges
	if live.NudgeAfter > 0 && nudges < live.MaxNudges {
		d := live.NudgeAfter
		if nudges > 0 {
			d = live.NudgeEvery
		}
		t := r.sup.clock.NewTimer(d)
		defer t.Stop()
		nudgeC = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return r.stop(ctx, "shutdown")
		case <-r.wake:
			c, err := r.sup.store.Pending(bg(ctx), r.agent.Name)
			if err == nil && c.Waking > 0 {
				return r.move(ctx, Wake, BuildingPrompt, fmt.Sprintf("%d message(s) waiting", c.Waking))
			}
		case <-poll.C:
			if id, ok := r.newTask(ctx); ok {
				return r.move(ctx, Wake, BuildingPrompt, "ready task "+id)
			}
			poll.Reset(live.TaskPoll)
		case <-nudgeC:
			_ = r.sup.store.SetNudges(bg(ctx), r.agent.Name, nudges+1)
			body := fmt.Sprintf("You have been idle for a while (nudge %d of %d). Check your mail and the ready tasks; if there is nothing to do, say so to operator and end the session.", nudges+1, live.MaxNudges)
			if _, err := r.sup.store.Send(bg(ctx), message.Draft{From: message.Operator, To: r.agent.Name, Kind: message.KindNudge, Body: body}); err != nil {
				return err
			}
			r.sup.announceMail(bg(ctx))
			return r.move(ctx, Wake, BuildingPrompt, fmt.Sprintf("nudge %d", nudges+1))
		case op := <-r.ctl:
			if op == control.OpPause {
				return r.move(ctx, Pause, Paused, "paused by operator")
			}
		}
	}
}

// realWork reports whether a session has more than nudges to do: mail of
// another kind, or a ready task its last completed session did not list.
// Such a session starts the nudge count over, however the agent got to it.
func (r *runner) realWork(mail []message.Message, tasks []string) bool {
	for _, m := range mail {
		if m.Kind != message.KindNudge {
			return true
		}
	}
	for _, id := range tasks {
		if !slices.Contains(r.lastTasks, id) {
			return true
		}
	}
	return false
}

// Backoff is the wait after the nth consecutive error: doubling from min,
// capped at max, with ±20% jitter from rnd in [0, 1).
func Backoff(n int, lo, hi time.Duration, rnd float64) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return time.Duration(float64(d) * (0.8 + 0.4*rnd))
}

func (r *runner) coolDown(ctx context.Context) error {
	a, err := r.sup.store.Agent(bg(ctx), r.agent.Name)
	if err != nil {
		return err
	}
	r.applyControl()
	if r.pausePending {
		r.pausePending = false
		return r.move(ctx, Pause, Paused, "paused by operator")
	}
	lim := r.sup.cfg.Errors
	d := Backoff(a.ConsecutiveErrors, lim.BackoffMin, lim.BackoffMax, r.sup.opts.Rand())
	t := r.sup.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return r.stop(ctx, "shutdown")
		case <-t.C:
			return r.move(ctx, BackoffElapsed, BuildingPrompt, fmt.Sprintf("waited %s", d.Round(time.Millisecond)))
		case <-r.wake:
			if m, ok := r.urgentMail(ctx); ok {
				return r.move(ctx, UrgentMail, BuildingPrompt, (&UrgentError{Message: m}).Error())
			}
		case op := <-r.ctl:
			if op == control.OpPause {
				return r.move(ctx, Pause, Paused, "paused by operator")
			}
		}
	}
}

func (r *runner) paused(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return r.stop(ctx, "shutdown")
		case op := <-r.ctl:
			if op != control.OpResume {
				continue
			}
			if why, ok := r.workWaiting(ctx); ok {
				return r.move(ctx, Resume, BuildingPrompt, "resumed: "+why)
			}
			return r.move(ctx, Resume, Idle, "resumed")
		case <-r.wake:
		}
	}
}

// interject hands queued urgent mail to an in-process session at a tool
// boundary (interrupt = "boundary"): the mail is delivered into the running
// session and recorded as an UrgentInjected self-transition.
func (r *runner) interject(ctx context.Context, seq int64) []string {
	q, err := r.sup.store.Queued(bg(ctx), r.agent.Name)
	if err != nil {
		return nil
	}
	var ids []int64
	for _, m := range q {
		if m.IsUrgent() {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// This runs on the engine's goroutine: it must not touch the runner's
	// fields, so it uses the store directly and announces after commit.
	var texts []string
	var notices []Notice
	err = r.sup.store.InTx(bg(ctx), func(tx *mailbox.Tx) error {
		ms, err := tx.DeliverInto(r.agent.Name, seq, ids)
		if err != nil {
			return err
		}
		for _, m := range ms {
			texts = append(texts, fmt.Sprintf("[URGENT] From %s: %s", m.From, m.Body))
			cause := fmt.Sprintf("urgent mail #%d from %s injected", m.ID, m.From)
			// A self-transition: recorded, but the runner's state is unchanged.
			e, err := tx.Transition(mailbox.Change{Agent: r.agent.Name, From: string(Running), To: string(Running), Cause: cause, Seq: seq})
			if err != nil {
				return err
			}
			notices = append(notices, Notice{At: e.At, Agent: r.agent.Name, Kind: "transition", From: Running, To: Running, Cause: cause, Seq: seq})
		}
		return nil
	})
	if err != nil {
		r.sup.log.Warn("inject urgent mail", "agent", r.agent.Name, "err", err)
		return nil
	}
	for _, n := range notices {
		r.sup.emit(n)
	}
	return texts
}

// messenger is the engine's way to send mail as the agent. Mail written in
// this process does not change data_version for the supervisor's own
// connection, so it pokes the runners itself.
type messenger struct {
	sup   *Supervisor
	agent string
}

func (m messenger) Send(ctx context.Context, to, body string, urgent bool, replyTo int64) (int64, error) {
	d := message.Draft{From: m.agent, To: to, Body: body, ReplyTo: replyTo}
	if urgent {
		d.Urgency = message.Urgent
	}
	msg, err := m.sup.store.Send(ctx, d)
	if err != nil {
		return 0, err
	}
	m.sup.poke(ctx)
	return msg.ID, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
