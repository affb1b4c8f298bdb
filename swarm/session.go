package swarm

import (
	"context"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"os"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

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
