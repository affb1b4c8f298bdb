package swarm

import (
	"context"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/sandbox"
)

// killWait bounds the wait for an engine after its process groups were
// killed: an engine that ignores cancellation must not hang its runner.
const killWait = 5 * time.Second

// buildPrompt delivers the queued mail into the next session and builds
// its prompt from nothing.
func (r *runner) buildPrompt(ctx context.Context) error {
	// A reload's settings apply from here: the session about to start.
	r.applyReloaded()
	// No session starts while a holding escalation is open about the agent.
	drain(r.escal)
	if held, err := r.holdIfHeld(ctx); held || err != nil {
		return err
	}
	if moved, err := r.enforceBudget(ctx); moved || err != nil {
		return err
	}
	// A pause asked for during an interrupted or failed session takes
	// effect before the next session starts.
	r.applyControl()
	if r.pausePending {
		r.pausePending = false
		return r.move(ctx, lifecycle.Pause, lifecycle.Paused, "paused by operator")
	}
	// A dev-qa workflow runs one agent at a time, the stage's.
	if ok, why := r.sup.flow.acquire(ctx, r.agent.Name); !ok {
		return r.move(ctx, lifecycle.NoWork, lifecycle.Idle, "waiting for its turn: "+why)
	}
	r.stage = r.sup.flow.opening(ctx, r.agent.Name)
	// The prompt is built from the queued mail without consuming it; then
	// one transaction delivers exactly that mail into the session, stores
	// the session and moves on. A crash can never leave mail delivered to
	// a session that does not exist, and mail arriving meanwhile waits for
	// the next prompt.
	seq := r.seq + 1
	// Before the mail is read: a conflict with the base is mail too.
	integ := r.integration(ctx)
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	queued, err := r.sup.store.Queued(bctx, r.agent.Name)
	if err != nil {
		return err
	}
	decisions, err := r.decisions(ctx)
	if err != nil {
		return err
	}
	// The capability vector is derived once per session: the prompt
	// describes it, the store keeps it (the swarm commands check it) and
	// the engine enforces it.
	caps := r.agent.Spec().Vector()
	req := r.sup.promptRequest(r.agent, seq, r.worktree, queued, r.interrupt)
	req.Decisions = decisions
	req.Caps = caps
	req.CLI = cliTools(r.eng, caps)
	req.Integration = integ
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
	if err := r.inTx(ctx, func(tx mailbox.Tx) error {
		var err error
		if mail, err = tx.Deliver(r.agent.Name, seq, ids); err != nil {
			return err
		}
		if err := tx.StartSession(mailbox.SessionStart{Agent: r.agent.Name, Seq: seq, Engine: r.eng.Name(), Prompt: p.Text, Tasks: p.TaskIDs, Capabilities: caps}); err != nil {
			return err
		}
		shown := make([]int64, len(decisions))
		for i, d := range decisions {
			shown[i] = d.ID
		}
		if err := tx.MarkShown(shown, seq); err != nil {
			return err
		}
		r.seq = seq
		return r.moveTx(tx, lifecycle.PromptReady, lifecycle.Spawning, fmt.Sprintf("session %d: %d message(s)", seq, len(mail)))
	}); err != nil {
		return err
	}
	r.sup.acks.stored(mail)
	r.interrupt = nil
	r.sessionTasks = p.TaskIDs
	r.sessionMail = mail
	r.sessionPrompt = p.Text
	r.sessionCaps = caps
	if r.realWork(mail, p.TaskIDs) {
		bctx, cancel := bookkeeping(ctx)
		err := r.sup.store.SetNudges(bctx, r.agent.Name, 0)
		cancel()
		if err != nil {
			r.sup.log.Warn("reset nudges", "agent", r.agent.Name, "err", err)
		}
	}
	return nil
}

// caller is the identity of the runner's next session: its agent, number
// and the capability vector stored for it.
func (r *runner) caller() identity.Caller {
	caps := r.sessionCaps
	if caps == nil {
		caps = r.agent.Spec().Vector()
	}
	return identity.Session(r.agent.Name, r.seq, caps)
}

// session is one running engine session.
type session struct {
	door   *door // closed when the session has ended
	seq    int64
	cancel context.CancelCauseFunc
	done   chan engine.Result
	guard  Guard
	tick   uint64          // when it opened in the supervisor's session book
	prior  map[string]bool // dedupe keys of the findings its guard's Prior had
	log    *os.File
	pgids  chan int
	groups []int
	trips  <-chan *BudgetError // nil without a budget
}

// spawn starts the session and follows it to its end.
func (r *runner) spawn(ctx context.Context) error {
	sess, err := r.startSession(ctx)
	if err != nil {
		r.sup.log.Warn("session did not start", "agent", r.agent.Name, "session_seq", r.seq, "err", err)
		return r.endFailed(ctx, lifecycle.StartFailed, mailbox.SessionFailed, err, engine.Usage{})
	}
	if err := r.move(ctx, lifecycle.SessionStarted, lifecycle.Running, ""); err != nil {
		sess.cancel(err)
		<-sess.done
		sess.door.close()
		sess.log.Close()
		r.sup.book.close(r.agent.Name, sess.seq)
		return err
	}
	return r.follow(ctx, sess)
}

func (r *runner) startSession(ctx context.Context) (_ *session, err error) {
	since := r.sup.book.lastEnd(r.agent.Name, r.seq)
	tick := r.sup.book.open(r.agent.Name, r.seq)
	defer func() {
		if err != nil {
			r.sup.book.close(r.agent.Name, r.seq)
		}
	}()
	guard, err := r.sup.opts.Worktrees.Guard(ctx, r.agent.Name)
	if err != nil {
		return nil, fmt.Errorf("guard the base branch: %w", err)
	}
	// What changed since the agent's previous session (a late background
	// commit, a move made while swarm was down) is reported now, charged
	// to whoever ran in that time; it does not fail this session.
	prior := guard.Prior()
	r.chargeFindings(ctx, prior, 0, since, tick)
	priorKeys := map[string]bool{}
	for _, f := range prior {
		priorKeys[f.Dedupe()] = true
	}
	path := r.sup.opts.Layout.SessionLog(r.agent.Name, r.seq)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	var mail []engine.Mail
	for _, m := range r.sessionMail {
		mail = append(mail, engine.Mail{ID: m.ID, From: m.From, Body: m.Body, Urgent: m.IsUrgent()})
	}
	budget, err := r.readAgentBudget(ctx)
	if err != nil {
		logf.Close()
		return nil, err
	}
	caller := r.caller()
	dr, err := r.openDoor(ctx, caller)
	if err != nil {
		logf.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &session{door: dr, seq: r.seq, cancel: cancel, done: make(chan engine.Result, 1), guard: guard, tick: tick, prior: priorKeys, log: logf, pgids: make(chan int, 64)}
	es := &engine.Session{
		Agent:     r.agent.Name,
		ID:        SessionID(r.agent.Name, r.seq),
		Seq:       r.seq,
		Root:      r.sup.opts.Layout.Root,
		DB:        absPath(r.sup.opts.Layout.DB),
		Door:      dr.path(),
		Agents:    r.sup.poster.Names(),
		Worktree:  r.worktree,
		Branch:    r.branch,
		Prompt:    r.sessionPrompt,
		Mode:      r.agent.Mode,
		Strategy:  r.agent.Strategy,
		Caps:      r.sessionCaps,
		Model:     r.agent.SessionModel(r.kind),
		MaxTurns:  r.agent.MaxTurns,
		Timeout:   r.agent.SessionTimeout,
		Grace:     r.agent.InterruptGrace,
		Mail:      mail,
		Messenger: messenger{poster: r.sup.poster, agent: r.agent.Name},
		Escalator: escalator{raise: r.sup.Raise, agent: r.agent.Name},
		Protocol:  protocolTool{p: r.sup.protocol, caller: caller},
		Reviews:   r.sup.reviewsOf(ctx, r.agent.Name),
		Log:       activityLog{w: logf, touch: r.touch},
		OnProcess: func(pgid int) {
			r.sup.book.addGroup(r.agent.Name, s.seq, pgid)
			if err := r.sup.store.AddSessionPgid(context.Background(), r.agent.Name, s.seq, pgid); err != nil {
				r.sup.log.Warn("record process group", "agent", r.agent.Name, "err", err)
			}
			select {
			case s.pgids <- pgid:
			default:
			}
		},
		OnActivity: func(summary string) {
			r.touch()
			if err := r.sup.store.SetActivity(context.Background(), r.agent.Name, summary); err != nil {
				r.sup.log.Warn("record activity", "agent", r.agent.Name, "err", err)
			}
			r.sup.bus.emit(lifecycle.Notice{Agent: r.agent.Name, Kind: lifecycle.NoticeActivity, Text: summary, Seq: s.seq})
		},
	}
	if unmetered(r.eng) {
		r.warnUnmetered(ctx, budget)
	}
	var m *meter
	if budget.agent != nil || budget.swarm != nil {
		m = newMeter(r.agent.Name, r.price(), budget, cancel)
		es.OnUsage, s.trips = m.add, m.trips
	}
	if r.sup.opts.Tasks != nil {
		es.Tasks = r.sup.opts.Tasks.Board(r.agent.Name, r.worktree)
	}
	if r.kind != config.EngineExec {
		boundary := r.agent.Interrupt == config.InterruptBoundary
		es.Interject = func(ictx context.Context) []string { return r.interject(ictx, s.seq, boundary) }
	}
	// No database credential enters a session: its commands go through
	// its door.
	es.Env = withoutCredentials(engine.SessionEnv(os.Environ(), es))
	es.EnvPass = r.sup.cfg.Env.Pass
	box, err := r.sup.sandboxFor(r, es)
	if err != nil {
		logf.Close()
		dr.close()
		cancel(err)
		return nil, err
	}
	es.Sandbox = box
	fmt.Fprintf(logf, "# session %d of %s on %s, started %s\n", r.seq, r.agent.Name, r.eng.Name(), r.sup.clock.Now().Format(time.RFC3339))
	go func() {
		res := runEngine(sctx, r.eng, es)
		// Every process ends with its session, before anyone sees the
		// end: those that left its process groups too.
		r.sup.endProcesses(r.agent.Name, s.seq)
		if err := box.Close(); err != nil {
			r.sup.log.Warn("remove the session's sandbox directory", "agent", r.agent.Name, "session_seq", s.seq, "err", err)
		}
		if m != nil {
			res.Usage = m.atLeast(res.Usage)
		}
		res.Usage = estimate(r.eng, es.Prompt, res.Usage)
		s.done <- res
	}()
	return s, nil
}

// sandboxFor builds the box of a session when a sandbox is in force (nil
// otherwise): the operator's checkout read-only, .swarm hidden but for the
// session's door, the worktree and the agent's branch writable.
func (s *Supervisor) sandboxFor(r *runner, es *engine.Session) (*sandbox.Box, error) {
	if !s.contain.Contained() {
		return nil, nil
	}
	hidden := []string{s.opts.Layout.State, operatorRuntimeDir()}
	// A database kept outside .swarm is hidden too, unless its directory
	// holds the checkout or the worktree.
	if dir := filepath.Dir(absPath(s.opts.Layout.DB)); !within(dir, s.opts.Layout.Root) && !within(dir, r.worktree) {
		hidden = append(hidden, dir)
	}
	box, err := sandbox.New(sandbox.Spec{
		Bwrap:    s.contain.Bwrap,
		Root:     s.opts.Layout.Root,
		Worktree: r.worktree,
		Branch:   r.branch,
		Door:     es.Door,
		Hidden:   hidden,
		Home:     envValue(es.Env, "HOME"),
		Path:     envValue(es.Env, "PATH"),
		Name:     es.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox of session %d: %w", r.seq, err)
	}
	return box, nil
}

// operatorRuntimeDir is where the operator's control socket goes when
// .swarm is too deep for a socket path (control's fallback): hidden from
// sessions like .swarm.
func operatorRuntimeDir() string {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = os.TempDir()
	}
	return filepath.Join(base, "swarm-"+strconv.Itoa(os.Getuid()))
}

// within reports whether dir is path or one of its ancestors.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// rootMarker is the environment entry every process of this swarm's
// sessions carries besides sessionMarker: session ids repeat across
// repositories.
func rootMarker(root string) string { return "SWARM_ROOT=" + root }

// endProcessesWait bounds the wait for a session's killed processes.
const endProcessesWait = 2 * time.Second

// endProcesses kills every process left of agent's session seq: those
// carrying its marker, wherever they went (setsid, a double fork), and
// reaps the orphans among them. In a sandbox the PID namespace already
// ended them; this is the net without one.
//
// Once none is left, the index.lock a git killed half way left in the
// agent's worktree is removed: a sandbox ends its processes with SIGKILL
// (git removes its lock on SIGTERM or SIGINT, never on SIGKILL), and with
// the lock there every later commit of the agent fails.
func (s *Supervisor) endProcesses(agent string, seq int64) {
	killed, gone := proc.EndMarked(endProcessesWait, sessionMarker(agent, seq), rootMarker(s.opts.Layout.Root))
	if len(killed) > 0 {
		s.log.Info("killed processes the session left behind", "agent", agent, "session_seq", seq, "pids", killed)
	}
	if !gone {
		s.log.Warn("processes the session left behind still exist after the kill; leaving the worktree's git lock alone", "agent", agent, "session_seq", seq, "pids", killed)
		return
	}
	if removed, err := s.opts.Worktrees.RemoveStaleLock(agent); err != nil {
		s.log.Warn("remove stale git lock", "agent", agent, "session_seq", seq, "err", err)
	} else if removed {
		s.log.Info("removed the index.lock a killed git of the session left", "agent", agent, "session_seq", seq)
	}
}

// runEngine runs one session. A panic in the engine fails this session,
// with the panic and its stack in the session's log, and leaves the
// supervisor and every other agent running.
func runEngine(ctx context.Context, eng engine.Engine, es *engine.Session) (res engine.Result) {
	defer func() {
		if p := recover(); p != nil {
			err := panicError("engine "+eng.Name(), p)
			if es.Log != nil {
				fmt.Fprintf(es.Log, "# %v\n", err)
			}
			res = engine.Result{Outcome: engine.Failed, Err: err}
		}
	}()
	return eng.Run(ctx, es)
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
		s.door.close()
		s.log.Close()
		r.sup.book.close(r.agent.Name, s.seq)
		// The last tool call belongs to the session that ended.
		bctx, cancel := bookkeeping(ctx)
		defer cancel()
		if err := r.sup.store.SetActivity(bctx, r.agent.Name, ""); err != nil {
			r.sup.log.Warn("clear activity", "agent", r.agent.Name, "err", err)
		}
	}()
	r.touch()
	r.active.Store(s.seq)
	defer r.active.Store(0)
	boundary := r.agent.Interrupt == config.InterruptBoundary && r.kind != config.EngineExec
	var stageC <-chan time.Time
	if st := r.stage; st != nil {
		t := r.sup.clock.NewTimer(max(st.Deadline.Sub(r.sup.clock.Now()), 0))
		defer t.Stop()
		stageC = t.C
	}
	// Urgent mail that came in while spawning interrupts at once.
	if !boundary {
		r.urgentHint.Store(false)
		if m, ok := r.urgentMail(ctx); ok {
			return r.interruptSession(ctx, s, m)
		}
	}
	for {
		select {
		case res := <-s.done:
			select {
			case trip := <-s.trips:
				return r.budgetEnded(ctx, s, trip, res)
			default:
			}
			return r.sessionEnded(ctx, s, res)
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
		case trip := <-s.trips:
			if done, err := r.budgetSession(ctx, s, trip); done || err != nil {
				return err
			}
		case <-r.escal:
			e, held, err := r.openHold(ctx)
			if err != nil {
				r.sup.log.Warn("read holds", "agent", r.agent.Name, "err", err)
				continue
			}
			if held {
				return r.holdSession(ctx, s, e)
			}
		case <-r.wake:
			// The engine takes urgent mail at its next tool boundary; and
			// only urgent mail interrupts, so other wakes need no query.
			if boundary || !r.urgentHint.Swap(false) {
				continue
			}
			if m, ok := r.urgentMail(ctx); ok {
				return r.interruptSession(ctx, s, m)
			}
		case c := <-r.ctl:
			r.pausePending = c == cmdPause
		case <-stageC:
			return r.stageTimedOut(ctx, s, *r.stage)
		case <-ctx.Done():
			return r.shutdownSession(ctx, s)
		}
	}
}

// stageTimedOut cancels a session whose dev-qa stage ran past its
// timeout: the stage is kept, a stage_timeout escalation is raised, and the
// session ends as timed out (the agent cools down, then works its stage
// again).
func (r *runner) stageTimedOut(ctx context.Context, s *session, st stageRun) error {
	cause := &StageTimeoutError{Stage: st}
	s.cancel(cause)
	res, _, stopped := r.awaitCancelled(ctx, s)
	if stopped {
		return r.shutdownSession(ctx, s)
	}
	r.logResult(s, res)
	r.checkCut(ctx, s)
	r.sup.raise(ctx, escalation.Draft{Kind: escalation.KindStageTimeout, Agent: r.agent.Name, Ref: escalation.ItemRef(st.Item),
		Summary: truncate(fmt.Sprintf("item %s: %s's %s stage ran past its timeout of %s; session %d was cancelled and the item stays in %s",
			st.Item, r.agent.Name, st.State, st.Timeout, s.seq, st.State), 500),
		Details:   details(map[string]any{"item": st.Item, "workflow": st.Workflow, "stage": st.State, "timeout": st.Timeout.String(), "session_seq": s.seq}),
		DedupeKey: escalation.StageTimeoutKey(st.Item, string(st.State))})
	return r.endFailed(ctx, lifecycle.SessionExitedError, mailbox.SessionTimeout, cause, res.Usage)
}

// drain empties a signal channel.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// urgentMail returns the oldest queued urgent mail for the agent.
func (r *runner) urgentMail(ctx context.Context) (message.Message, bool) {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	q, err := r.sup.store.Queued(bctx, r.agent.Name)
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
	r.interrupt = InterruptFor(m, s.seq)
	cause := &UrgentError{Message: m}
	s.cancel(cause)
	if err := r.move(ctx, lifecycle.UrgentMail, lifecycle.Interrupting, cause.Error()); err != nil {
		r.waitEngine(s)
		return err
	}
	res, grace, stopped := r.awaitCancelled(ctx, s)
	switch {
	case stopped:
		return r.shutdownSession(ctx, s)
	case grace:
		return r.settleInterrupted(ctx, s, res, lifecycle.GraceExceeded, lifecycle.BuildingPrompt, fmt.Sprintf("still running after %s: process groups killed", r.agent.InterruptGrace))
	}
	return r.settleInterrupted(ctx, s, res, lifecycle.SessionExited, lifecycle.BuildingPrompt, "session ended after interrupt")
}

// waitEngine waits for a cancelled session's engine, at most killWait:
// an engine that ignores cancellation is logged and left behind rather
// than hanging the agent.
func (r *runner) waitEngine(s *session) engine.Result {
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case res := <-s.done:
		return res
	case <-t.C:
		r.sup.log.Error("engine did not return after its session was cancelled and its processes killed", "agent", r.agent.Name, "session_seq", s.seq, "waited", killWait)
		return engine.Result{Outcome: engine.Cancelled, Err: fmt.Errorf("the engine did not return within %s of being cancelled", killWait)}
	}
}

func (r *runner) killGroups(s *session) {
	for drained := false; !drained; {
		select {
		case pg := <-s.pgids:
			s.groups = append(s.groups, pg)
		default:
			drained = true
		}
	}
	var killed []int
	for _, pg := range s.groups {
		sent, err := proc.KillSessionGroup(pg, sessionMarker(r.agent.Name, s.seq))
		if err != nil {
			r.sup.log.Warn("kill process group", "agent", r.agent.Name, "pgid", pg, "err", err)
		}
		if sent {
			killed = append(killed, pg)
		}
	}
	r.sup.afterKill(r.agent.Name, killed)
}

// afterKill cleans up after the process groups of agent's session were
// killed with SIGKILL: once they are gone, the index.lock a git commit
// killed half way left in the agent's worktree is removed (with it there,
// every later commit fails). Nothing else of the agent runs there.
func (s *Supervisor) afterKill(agent string, killed []int) {
	if len(killed) == 0 {
		return
	}
	// Real time: this waits for the operating system, not for the swarm.
	if !proc.AwaitGroupsGone(killed, 10*time.Millisecond, 2*time.Second, time.Sleep) {
		s.log.Warn("killed session processes still exist after 2s; leaving the worktree's git lock alone", "agent", agent, "pgids", killed)
		return
	}
	if removed, err := s.opts.Worktrees.RemoveStaleLock(agent); err != nil {
		s.log.Warn("remove stale git lock", "agent", agent, "err", err)
	} else if removed {
		s.log.Info("removed the index.lock a killed session left", "agent", agent)
	}
}

// settleInterrupted ends an interrupted session (its mail queued again)
// and moves the agent by ev to to, in one transaction.
func (r *runner) settleInterrupted(ctx context.Context, s *session, res engine.Result, ev lifecycle.Event, to lifecycle.State, cause string) error {
	r.logResult(s, res)
	r.checkCut(ctx, s)
	return r.inTx(ctx, func(tx mailbox.Tx) error {
		if err := tx.EndSession(r.sessionEnd(s.seq, mailbox.SessionInterrupted, res.Usage, r.interrupt.Reason)); err != nil {
			return err
		}
		return r.moveTx(tx, ev, to, cause)
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
		res = r.waitEngine(s)
	}
	r.logResult(s, res)
	r.checkCut(ctx, s)
	return r.inTx(ctx, func(tx mailbox.Tx) error {
		if err := tx.EndSession(r.sessionEnd(s.seq, mailbox.SessionInterrupted, res.Usage, "stopped: "+causeText(ctx))); err != nil {
			return err
		}
		return r.moveTx(tx, lifecycle.OperatorStop, lifecycle.Stopped, stopCause(ctx))
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
	// An exec CLI that reports no turns (gemini) gets no "turns 0".
	turns := ""
	if res.Turns > 0 {
		turns = fmt.Sprintf("turns %d, ", res.Turns)
	}
	fmt.Fprintf(s.log, "# session %d ended: %s (%stokens %d)\n", s.seq, msg, turns, res.Usage.Total())
}

// sessionEnded settles a session that ended on its own.
func (r *runner) sessionEnded(ctx context.Context, s *session, res engine.Result) error {
	r.logResult(s, res)
	if ferr := r.checkGuard(ctx, s); ferr != nil {
		res = engine.Result{Outcome: engine.Failed, Err: fmt.Errorf("base-branch guard: %w", ferr), Usage: res.Usage, Turns: res.Turns}
	}
	r.checkReservations(ctx, s)
	r.publish(ctx, s)
	r.warnOverlaps(ctx)
	if res.Outcome == engine.Success {
		if r.sup.opts.Tasks != nil {
			r.lastTasks = r.sessionTasks
		}
		return r.inTx(ctx, func(tx mailbox.Tx) error {
			if err := tx.EndSession(r.sessionEnd(s.seq, mailbox.SessionCompleted, res.Usage, "")); err != nil {
				return err
			}
			return r.moveTx(tx, lifecycle.SessionExitedOK, lifecycle.SessionComplete, fmt.Sprintf("session %d completed", s.seq))
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
	return r.endFailed(ctx, lifecycle.SessionExitedError, state, err, res.Usage)
}

// endFailed records a failed session and moves to CoolingDown, or to
// Stopped once the error thresholds are reached.
func (r *runner) endFailed(ctx context.Context, ev lifecycle.Event, state mailbox.SessionState, cause error, u engine.Usage) error {
	var stopped *mailbox.Agent
	err := r.inTx(ctx, func(tx mailbox.Tx) error {
		if err := tx.EndSession(r.sessionEnd(r.seq, state, u, cause.Error())); err != nil {
			return err
		}
		a, err := tx.Agent(r.agent.Name)
		if err != nil {
			return err
		}
		lim := r.sup.cfg.Errors
		to := lifecycle.CoolingDown
		text := fmt.Sprintf("session %d %s: %v", r.seq, state, cause)
		if a.ConsecutiveErrors >= lim.MaxConsecutive || a.TotalErrors >= lim.MaxTotal {
			to = lifecycle.Stopped
			text = fmt.Sprintf("%s; stopping after %d consecutive / %d total errors", text, a.ConsecutiveErrors, a.TotalErrors)
			r.stopReason = text
			stopped = &a
		}
		return r.moveTx(tx, ev, to, truncate(text, 500))
	})
	if err == nil && stopped != nil {
		// Nobody restarts it but the operator: tell them.
		a := stopped
		r.sup.raise(ctx, escalation.Draft{Kind: escalation.KindErrors, Agent: r.agent.Name,
			Summary: fmt.Sprintf("%s stopped after %d consecutive / %d total failed sessions; the last: %s",
				r.agent.Name, a.ConsecutiveErrors, a.TotalErrors, truncate(cause.Error(), 300)),
			Details: details(map[string]any{"session_seq": r.seq, "consecutive_errors": a.ConsecutiveErrors,
				"total_errors": a.TotalErrors, "last_error": truncate(cause.Error(), 2000)}),
			DedupeKey: escalation.DefaultDedupeKey(escalation.KindErrors, r.agent.Name, "", "stopped at the error thresholds")})
	}
	return err
}

// checkCut checks the guard of a session that was interrupted or stopped:
// what it found is reported, and the session keeps its state.
func (r *runner) checkCut(ctx context.Context, s *session) {
	if err := r.checkGuard(ctx, s); err != nil {
		fmt.Fprintf(s.log, "# base-branch guard: %v\n", err)
	}
	r.checkReservations(ctx, s)
	r.publish(ctx, s)
	r.warnOverlaps(ctx)
}

// publish pushes the agent's branch to [worktree] push after a session,
// however it ended, so its commits can be merged from another host. A
// failed push is logged and retried after the next session: the work is
// safe on the local branch meanwhile.
func (r *runner) publish(ctx context.Context, s *session) {
	remote := r.sup.cfg.Worktree.Push
	if remote == "" {
		return
	}
	pctx, cancel := context.WithTimeout(bg(ctx), pushTimeout)
	defer cancel()
	if err := r.sup.opts.Worktrees.Push(pctx, remote, r.agent.Name); err != nil {
		fmt.Fprintf(s.log, "# push: %v\n", err)
		r.sup.log.Warn("push the agent's branch", "agent", r.agent.Name, "remote", remote, "session_seq", s.seq, "err", err)
	}
}

// withoutCredentials is a session environment without the database's URL
// or the PostgreSQL client's variables (PGPASSWORD, PGPASSFILE,
// PGSERVICE...): a session reaches the swarm through its door, never the
// database by itself.
func withoutCredentials(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "SWARM_DB_URL" || strings.HasPrefix(k, "PG") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// pushTimeout bounds one push to [worktree] push.
const pushTimeout = 2 * time.Minute

// reportFinding tells the operator what the base-branch guard found,
// charged to agent: a status message from the agent whose body is the
// finding's sentence (what happened and how to undo it), and an
// escalation of the finding's kind (branch_violation or repo_tamper) that
// holds the agent until the operator has looked: resume once the base
// branch is put right, abort to drop the work. f.Dedupe() names the event,
// so the same event charged again only counts. It is called once per
// event and agent. seq is the agent's session that the finding was made
// after, 0 when it is charged to an agent whose guard did not find it.
func (s *Supervisor) reportFinding(ctx context.Context, agent string, seq int64, f Finding) {
	body := fmt.Sprintf("The base-branch guard found (%s, charged to %s): %s", f.Escalation(), agent, f.String())
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	if _, err := s.poster.Post(bctx, message.Draft{From: agent, To: message.Operator, Kind: message.KindStatus, Body: body}); err != nil {
		s.log.Error("report guard finding", "agent", agent, "err", err)
	}
	kind := escalation.KindBranchViolation
	if f.Escalation() == string(escalation.KindRepoTamper) {
		kind = escalation.KindRepoTamper
	}
	summary, ref := f.String(), ""
	if seq > 0 {
		summary = fmt.Sprintf("session %d of %s broke the base-branch guard: %s", seq, agent, f.String())
		ref = "session:" + SessionID(agent, seq)
	}
	s.raise(ctx, escalation.Draft{Kind: kind, Agent: agent, Hold: true, Ref: ref,
		Summary:   truncate(summary, 500),
		Details:   details(map[string]any{"finding": f.String(), "charged_to": agent}),
		DedupeKey: escalation.DefaultDedupeKey(kind, agent, "", f.Dedupe())})
}

// interject hands queued mail to an in-process session at a tool
// boundary: urgent mail with interrupt = "boundary", and protocol mail
// that asks for an ACK in any mode, so its clock starts while the agent
// can still act. The mail is delivered into the running session and each
// message is recorded as an UrgentInjected self-transition.
func (r *runner) interject(ctx context.Context, seq int64, boundary bool) []string {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	q, err := r.sup.store.Queued(bctx, r.agent.Name)
	if err != nil {
		r.sup.log.Warn("read queued mail", "agent", r.agent.Name, "err", err)
		return nil
	}
	var ids []int64
	for _, m := range q {
		if (boundary && m.IsUrgent()) || m.NeedsAck() {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// This runs on the engine's goroutine: it must not touch the runner's
	// fields, so it uses the store directly and announces after commit.
	var texts []string
	var notices []lifecycle.Notice
	var delivered []message.Message
	wctx, wcancel := bookkeeping(ctx)
	defer wcancel()
	err = r.sup.store.InTx(wctx, func(tx mailbox.Tx) error {
		ms, err := tx.Deliver(r.agent.Name, seq, ids)
		if err != nil {
			return err
		}
		delivered = ms
		for _, m := range ms {
			text, what := interjection(m, r.sup.clock.Now())
			texts = append(texts, text)
			cause := fmt.Sprintf("%s #%d from %s injected", what, m.ID, m.From)
			// A self-transition: recorded, but the runner's state is unchanged.
			e, err := fsm.Apply(tx, lifecycle.Table, fsm.SubjectAgent, r.agent.Name, lifecycle.Running, lifecycle.UrgentInjected, lifecycle.Running, cause, seq)
			if err != nil {
				return err
			}
			notices = append(notices, lifecycle.Notice{At: e.At, Agent: r.agent.Name, Kind: lifecycle.NoticeTransition, From: lifecycle.Running, To: lifecycle.Running, Cause: cause, Seq: seq})
		}
		return nil
	})
	if err != nil {
		r.sup.log.Warn("inject mail", "agent", r.agent.Name, "err", err)
		return nil
	}
	r.sup.acks.stored(delivered)
	for _, n := range notices {
		r.sup.bus.emit(n)
	}
	return texts
}

// interjection is how mail joining a running session reads, and what it
// is called in the event's cause.
func interjection(m message.Message, now time.Time) (text, what string) {
	if m.Kind == message.KindProtocol {
		if env, err := mailbox.Envelope(m); err == nil {
			return fmt.Sprintf("[PROTOCOL] From %s (#%d):\n%s", m.From, m.ID, strings.TrimRight(protocol.RenderPrompt(env, ackState(m), now), "\n")), "protocol mail"
		}
	}
	return fmt.Sprintf("[URGENT] From %s: %s", m.From, m.Body), "urgent mail"
}

// ackState is what the prompt shows of a message's ACK record.
func ackState(m message.Message) protocol.AckState {
	var a protocol.AckState
	if m.Ack != nil {
		if m.Ack.DueAt != nil {
			a.Deadline = *m.Ack.DueAt
		}
		a.Acked = m.Ack.State == message.AckAcked
	}
	return a
}

// messenger is the engine's way to send mail as the agent, through the
// supervisor's poster: validated, stored, and the recipient woken.
type messenger struct {
	poster *mailbox.Poster
	agent  string
}

func (m messenger) Send(ctx context.Context, to, body string, urgent bool, replyTo int64) (int64, error) {
	d := message.Draft{From: m.agent, To: to, Body: body, ReplyTo: replyTo}
	if urgent {
		d.Urgency = message.Urgent
	}
	msg, err := m.poster.Post(ctx, d)
	if err != nil {
		return 0, err
	}
	return msg.ID, nil
}
