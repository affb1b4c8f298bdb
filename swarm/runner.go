package swarm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// runner owns one agent: its state, its session and its timers. Only the
// runner goroutine changes the agent's state; others reach it through the
// wake and ctl channels. Its jobs are split across files: this one is the
// state loop and transitions; session.go runs and interrupts sessions;
// idle.go decides what happens between sessions.
type runner struct {
	sup   *Supervisor
	agent config.Agent
	eng   engine.Engine
	kind  string // the engine's kind: gemini, script or exec

	wake chan struct{} // new mail or work may be waiting
	// urgentHint says a wake may carry urgent mail, so a running session
	// checks the store; other wakes leave a running session alone.
	urgentHint atomic.Bool
	ctl        chan command
	escal      chan struct{} // an escalation about the agent changed
	done       chan struct{} // closed when run returns
	// cancel ends the runner's context (set when the supervisor starts
	// it): `swarm retire` stops one agent this way.
	cancel context.CancelCauseFunc
	// live is the agent's state as last committed, for other goroutines
	// (the control socket): state itself belongs to the runner goroutine.
	live atomic.Value // lifecycle.State
	// wantPause is the operator's last word, pause (true) or resume,
	// set when the request is made, before the runner takes it.
	wantPause atomic.Bool

	// The running session's number (0 when none runs) and when it last
	// showed activity (Unix nanoseconds), for the stalled check; stallSeq
	// is the session already reported as stalled.
	active       atomic.Int64
	lastActivity atomic.Int64
	stallSeq     atomic.Int64

	state    lifecycle.State
	seq      int64
	worktree string
	branch   string

	interrupt     *Interrupt        // why the last session was cut short
	sessionTasks  []string          // ready tasks the current session's prompt listed
	sessionMail   []message.Message // mail delivered into the current session
	sessionPrompt string            // the current session's prompt, as stored
	sessionCaps   mode.Vector       // the current session's capability vector, as stored
	stage         *stageRun         // the dev-qa stage the current session works in, if any
	lastTasks     []string          // ready tasks the last completed session listed
	pausePending  bool
	budgetWait    bool // work waits: the budget is spent in a window the operator aborted
	// reloaded is the agent's configuration as `swarm reload` last read
	// it, taken by the runner between sessions (applyReloaded).
	reloaded   atomic.Pointer[config.Agent]
	pending    []lifecycle.Notice // transitions made in the open transaction
	stopReason string             // why the agent stopped, when not by shutdown
	stopErr    error              // the error that stopped it, if one did
}

func newRunner(s *Supervisor, a config.Agent, eng engine.Engine) *runner {
	kind := config.EngineScript
	if e, err := s.cfg.EngineFor(a, s.opts.EngineOverride); err == nil {
		kind = e.Kind
	}
	r := &runner{
		sup:   s,
		agent: a,
		eng:   eng,
		kind:  kind,
		wake:  make(chan struct{}, 1),
		ctl:   make(chan command, 4),
		escal: make(chan struct{}, 1),
		done:  make(chan struct{}),
		state: lifecycle.Stopped,
	}
	r.live.Store(lifecycle.Stopped)
	return r
}

// liveState is the agent's state as last committed; safe from any
// goroutine.
func (r *runner) liveState() lifecycle.State { return r.live.Load().(lifecycle.State) }

// boundary reports whether urgent mail joins a running session at its
// next tool call instead of cancelling it.
func (r *runner) boundary() bool {
	return r.agent.Interrupt == config.InterruptBoundary && r.kind != config.EngineExec
}

// poke wakes the runner; urgent says the news may be urgent mail.
func (r *runner) poke(urgent bool) {
	if urgent {
		r.urgentHint.Store(true)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *runner) info() mailbox.AgentInfo {
	return mailbox.AgentInfo{Name: r.agent.Name, Mode: string(r.agent.Mode), Engine: r.eng.Name(), Branch: r.branch, Worktree: r.worktree}
}

// bg is the context of the reads and the git work that must finish even
// while the runner is being stopped (a write takes bounded, whose
// deadline keeps a stuck store from hanging the stop).
func bg(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// move applies one transition: checked against the table, persisted by
// compare-and-set with its event, then announced.
func (r *runner) move(ctx context.Context, ev lifecycle.Event, to lifecycle.State, cause string) error {
	return r.inTx(ctx, func(tx mailbox.Tx) error { return r.moveTx(tx, ev, to, cause) })
}

// inTx runs fn in one transaction that survives the runner's cancellation,
// and announces the transitions fn made once they are committed. Notices
// are never sent with the transaction open: a listener that reads the
// database would wait on the single connection.
func (r *runner) inTx(ctx context.Context, fn func(tx mailbox.Tx) error) error {
	state, seq := r.state, r.seq
	r.pending = r.pending[:0]
	err := bounded(ctx, func(c context.Context) error { return r.sup.store.InTx(c, fn) })
	// A database away for a moment (a PostgreSQL restart) must not stop
	// the agent: the transaction rolled back, so it is run again, from
	// the same state, until the database is back.
	for wait := time.Duration(0); err != nil && r.sup.store.Unavailable(err) && wait < storeOutage; {
		r.state, r.seq = state, seq
		r.pending = r.pending[:0]
		pause := min(max(2*wait/10, 50*time.Millisecond), 2*time.Second)
		r.sup.log.Warn("database unavailable; retrying", "agent", r.agent.Name, "retry_in", pause, "err", err)
		t := r.sup.clock.NewTimer(pause)
		<-t.C
		wait += pause
		err = bounded(ctx, func(c context.Context) error { return r.sup.store.InTx(c, fn) })
	}
	if err != nil {
		r.state, r.seq = state, seq // the transaction rolled back
		r.pending = r.pending[:0]
		return err
	}
	r.live.Store(r.state)
	if !inSession(r.state) {
		r.sup.flow.release(r.agent.Name)
	}
	for _, n := range r.pending {
		r.sup.bus.emit(n)
	}
	r.pending = r.pending[:0]
	return nil
}

func (r *runner) moveTx(tx mailbox.Tx, ev lifecycle.Event, to lifecycle.State, cause string) error {
	e, err := fsm.Apply(tx, lifecycle.Table, fsm.SubjectAgent, r.agent.Name, r.state, ev, to, cause, r.seq)
	if err != nil {
		return err
	}
	from := r.state
	r.state = to
	r.pending = append(r.pending, lifecycle.Notice{At: e.At, Agent: r.agent.Name, Kind: lifecycle.NoticeTransition, From: from, To: to, Cause: e.Cause, Seq: r.seq})
	return nil
}

// run drives the agent until it stops. It returns nil when the agent
// stopped normally (shutdown or error thresholds). A panic in the runner
// stops this agent with FatalError; the others carry on.
func (r *runner) run(ctx context.Context) (err error) {
	defer close(r.done)
	defer func() {
		if r.worktree != "" {
			if uerr := r.sup.opts.Worktrees.Unlock(bg(ctx), r.agent.Name); uerr != nil {
				r.sup.log.Warn("unlock worktree", "agent", r.agent.Name, "err", uerr)
			}
		}
		if err != nil {
			// Why the agent stopped, whatever state it was left in: a
			// runner that failed while still Stopped (its first
			// transition, say) has a reason too.
			r.stopReason, r.stopErr = err.Error(), err
		}
		if errors.Is(err, mailbox.ErrLeaseLost) {
			// Another supervisor runs the agent now: its rows are that
			// supervisor's, so this runner stops without a word to the
			// store (the store would refuse it anyway).
			r.sup.log.Info("lease lost; runner stops and leaves the agent to its new supervisor", "agent", r.agent.Name, "err", err)
			err = nil
			return
		}
		if err != nil && r.state != lifecycle.Stopped {
			if merr := r.inTx(ctx, func(tx mailbox.Tx) error {
				if err := r.settleUnstarted(tx, "stopped: "+err.Error()); err != nil {
					return err
				}
				return r.moveTx(tx, lifecycle.FatalError, lifecycle.Stopped, text.Truncate(err.Error(), 500))
			}); merr != nil {
				r.sup.log.Error("record fatal error", "agent", r.agent.Name, "err", merr)
			}
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			err = panicError("runner of "+r.agent.Name, p)
			r.sup.log.Error("runner panicked", "agent", r.agent.Name, "err", err)
		}
	}()
	if r.state == lifecycle.Stopped {
		if err := r.inTx(ctx, func(tx mailbox.Tx) error {
			// The error thresholds count within one run: a new swarm up
			// gives a stopped agent a fresh start.
			if err := tx.ResetErrors(r.agent.Name); err != nil {
				return err
			}
			return r.moveTx(tx, lifecycle.Start, lifecycle.Initializing, "start")
		}); err != nil {
			return err
		}
	}
	var outage time.Duration
	for {
		if ctx.Err() != nil && r.state != lifecycle.Stopped {
			return r.stop(ctx, stopCause(ctx))
		}
		var err error
		switch r.state {
		case lifecycle.Stopped:
			return nil
		case lifecycle.Initializing:
			err = r.initialize(ctx)
		case lifecycle.BuildingPrompt:
			err = r.buildPrompt(ctx)
		case lifecycle.Spawning:
			err = r.spawn(ctx)
		case lifecycle.SessionComplete:
			err = r.afterSession(ctx)
		case lifecycle.Idle:
			err = r.idle(ctx)
		case lifecycle.CoolingDown:
			err = r.coolDown(ctx)
		case lifecycle.Paused:
			err = r.paused(ctx)
		case lifecycle.Held:
			err = r.held(ctx)
		case lifecycle.Waiting:
			err = r.waitCore(ctx)
		default:
			err = fmt.Errorf("runner in unexpected state %s", r.state)
		}
		if err != nil && r.sup.store.Unavailable(err) && outage < storeOutage {
			// A read that found the database away: the step changed
			// nothing (its transactions retry on their own), so it runs
			// again once the database is back.
			r.sup.log.Warn("database unavailable; retrying", "agent", r.agent.Name, "state", string(r.state), "err", err)
			t := r.sup.clock.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			outage += time.Second
			continue
		}
		outage = 0
		if err != nil {
			return err
		}
	}
}

// inSession reports whether an agent in s holds its dev-qa session slot:
// from the prompt's build to the session's settling.
func inSession(s lifecycle.State) bool {
	switch s {
	case lifecycle.BuildingPrompt, lifecycle.Spawning, lifecycle.Running, lifecycle.Interrupting, lifecycle.SessionComplete:
		return true
	}
	return false
}

// storeOutage is how long an agent waits for its database to come back
// before it stops with the error.
const storeOutage = 5 * time.Minute

func (r *runner) stop(ctx context.Context, cause string) error {
	if r.state == lifecycle.Stopped {
		return nil
	}
	return r.inTx(ctx, func(tx mailbox.Tx) error {
		if err := r.settleUnstarted(tx, cause); err != nil {
			return err
		}
		return r.moveTx(tx, lifecycle.OperatorStop, lifecycle.Stopped, cause)
	})
}

// applyControl takes the pause and resume requests already queued, so a
// request made while the runner was busy elsewhere is not missed.
func (r *runner) applyControl() {
	for {
		select {
		case c := <-r.ctl:
			r.control(c)
		default:
			return
		}
	}
}

// control remembers a pause or resume request for when it can apply.
func (r *runner) control(c command) {
	switch c {
	case cmdPause:
		r.pausePending = true
	case cmdResume:
		r.pausePending = false
	}
}

// settleUnstarted ends a session whose prompt was built (its mail
// delivered) but which never started, when the agent stops in Spawning:
// its mail is queued again instead of staying delivered.
func (r *runner) settleUnstarted(tx mailbox.Tx, why string) error {
	if r.state != lifecycle.Spawning {
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
	// The early warnings live in memory: each runner's start finds its own.
	r.warnOverlaps(ctx)
	if err := wt.Lock(ctx, r.agent.Name, fmt.Sprintf("swarm supervisor pid %d", os.Getpid())); err != nil {
		return fmt.Errorf("lock worktree: %w", err)
	}
	if err := bounded(ctx, func(c context.Context) error { return r.sup.store.RegisterAgent(c, r.info()) }); err != nil {
		return err
	}
	switch last, err := r.sup.store.LastSession(bg(ctx), r.agent.Name, mailbox.SessionCompleted); {
	case err == nil:
		r.lastTasks = last.Tasks
	case !errors.Is(err, mailbox.ErrNoSuchSession):
		return err
	}
	// A hold survives restarts and crashes: it is the escalation's row.
	if held, err := r.holdIfHeld(ctx); held || err != nil {
		return err
	}
	// A team member starts no session before the core is ready.
	if r.sup.team.waiting(r.agent.Name) {
		return r.move(ctx, lifecycle.AwaitCore, lifecycle.Waiting, "waiting for the core of team "+r.sup.team.cfg.Name)
	}
	why, ok, err := r.startupWork(ctx)
	if err != nil {
		return err
	}
	if !ok {
		// A restart starts no session "just because": with a paid model,
		// every pointless session is money (DESIGN §3, NoWork).
		return r.move(ctx, lifecycle.NoWork, lifecycle.Idle, "no work waiting")
	}
	return r.move(ctx, lifecycle.WorktreeReady, lifecycle.BuildingPrompt, why)
}

// startupWork reports whether the agent runs a session as soon as it is
// ready: it has never run, its last session was cut short (interrupted,
// crashed, failed or timed out), or it has work waiting.
func (r *runner) startupWork(ctx context.Context) (string, bool, error) {
	last, err := r.sup.store.LastSession(bg(ctx), r.agent.Name, "")
	switch {
	case errors.Is(err, mailbox.ErrNoSuchSession):
		return "first session", true, nil
	case err != nil:
		return "", false, err
	case last.State != mailbox.SessionCompleted:
		return fmt.Sprintf("session %d ended %s", last.Seq, last.State), true, nil
	}
	return r.workWaiting(ctx)
}

// SessionID names an agent's session across the swarm: the
// SWARM_SESSION_ID of its processes, and what sessionMarker matches.
func SessionID(agent string, seq int64) string { return agent + "-" + strconv.FormatInt(seq, 10) }

// sessionMarker is the environment entry every process of a session
// carries; it tells a session's process group from one that reused its id.
func sessionMarker(agent string, seq int64) string {
	return "SWARM_SESSION_ID=" + SessionID(agent, seq)
}
