// Package swarm is the supervisor: one runner goroutine per agent drives
// the agent through its lifecycle (package lifecycle), rebuilding the
// prompt at every BuildingPrompt, running sessions on the agent's engine,
// interrupting them for urgent mail and recovering after a crash.
//
// The supervisor is split by job, one file each:
//   - supervisor.go: options, construction and Run, which owns every
//     goroutine: the runners, the control socket and the services;
//   - services.go: named background services (heartbeats, pruning, the
//     change feed, the stop request, the escalation desk, the stalled
//     check, the ACK deadlines) that Run starts, cancels and waits for;
//   - escalations.go, notify.go, held.go, stalled.go: the operator's desk
//     (DESIGN §9.1): raising and deciding escalations, notifying, holding
//     and releasing agents, and the stalled-session trigger;
//   - protocol.go, acks.go: protocol messages (DESIGN §9.2) for the CLI
//     and the engines' tools, and the service that enforces their ACK
//     deadlines;
//   - recovery.go: level-based recovery of what a crash left, in the store
//     and in the worktrees;
//   - wakeup.go: mail posted in this process or announced by a poke wakes
//     exactly its recipients; the store's change feed is the fallback;
//   - control.go: the control socket's requests as typed commands;
//   - notices.go: the notice bus the live view and watchers read;
//   - runner.go, session.go, idle.go: one agent's lifecycle, its sessions
//     and interrupts, and what it does between sessions;
//   - guarding.go: the record of when sessions ran and their process
//     groups, to charge a guard finding to the right agents and to kill
//     every session on a forced stop;
//   - prompt.go: the one prompt wiring that `swarm up` and `swarm prompt`
//     share, so the preview is byte for byte what the agent gets;
//   - down.go: `swarm down`'s stop-then-merge use case.
//
// The database is the truth: recovery after a crash reads levels (agent
// states, running sessions, delivered mail) and never replays events.
package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/engine/script"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/sandbox"
)

// ErrShutdown is the cancellation cause of a graceful stop (SIGINT,
// SIGTERM, `swarm down`).
var ErrShutdown = errors.New("swarm is shutting down")

// UrgentError is the cancellation cause of a session interrupted by urgent
// mail.
type UrgentError struct{ Message message.Message }

func (e *UrgentError) Error() string {
	return fmt.Sprintf("urgent mail #%d from %s", e.Message.ID, e.Message.From)
}

// Options configure a Supervisor.
type Options struct {
	Config *config.Config
	Layout repo.Layout
	Store  mailbox.Store
	Agents []string // a subset of the configured agents; empty means all
	// EngineOverride is `swarm up --engine`: every agent runs on it.
	EngineOverride string
	Engines        Engines
	Worktrees      Worktrees
	Prompts        Prompts
	Tasks          Tasks // nil when bd is not installed
	Clock          Clock
	Rand           func() float64 // jitter in [0, 1)
	Logger         *slog.Logger
	// Notify receives every notice; it must not block for long.
	Notify func(lifecycle.Notice)
	// PollInterval bounds how long a write by another process may go
	// unnoticed when its poke was missed; 250 ms when zero.
	PollInterval time.Duration
	// Listen starts the control socket; nil means control.Listen.
	Listen func(repo.Layout) (*control.Server, error)
	// Services run beside the built-in ones, for as long as the swarm runs.
	Services []Service
	// Holder names this supervisor in the agents' leases (DESIGN §12);
	// the zero value means this host's name and this process's pid.
	Holder mailbox.Holder
	// RunCommand runs a swarm command as caller (control.OpRun): the
	// session whose door it came through, or the operator on the
	// operator's socket. Sessions send every swarm command to their door
	// and never open the database, so no credential enters them. Nil
	// refuses OpRun.
	RunCommand RunFunc
	// ListenDoor opens a session's door; nil means control.ListenDoor.
	ListenDoor func(l repo.Layout, session string) (*control.Server, error)
	// PingTimeout is told of a ping whose ACK deadline passed (its ACK is
	// marked overdue; no ack_timeout is raised): the team launch's hook.
	// Nil logs it.
	PingTimeout func(ctx context.Context, m message.Message)
}

// Supervisor runs one runner per agent.
type Supervisor struct {
	opts   Options
	cfg    *config.Config
	store  mailbox.Store
	poster *mailbox.Poster
	clock  Clock
	log    *slog.Logger
	// The runners: the configured ones from New, and the spawned ones
	// `swarm spawn` adds while Run runs; mu guards them and fleet.
	mu      sync.RWMutex
	runners map[string]*runner
	order   []string
	fleet   fleet
	names   []string // every configured agent, in config order; read-only

	bus      noticeBus
	mail     mailTracker
	desk     *desk         // escalations: notices, holds and notifications
	protocol *Protocol     // protocol messages and ACKs, for the engines' tools
	acks     *ackDeadlines // the ack-deadlines service
	flow     *flow         // the workflows service and dev-qa's session gate
	merges   *mergeQueue   // the merge queue's service
	book     sessionBook   // when sessions ran, and their process groups
	overlaps overlapBook   // the trial merges' findings (current.go)
	leases   *leaseKeeper  // this supervisor's agents' leases
	budget   budgetBook    // the budget meter's reads and writes
	team     *launch       // the team launch; nil without [team]
	probed   bool          // Preflight passed
	// contain is the sandbox in force, decided by Preflight (none
	// without it).
	contain sandbox.Decision
	// idleHook, set by tests before Run, is told when a runner found no
	// work and waits in Idle (nil in production).
	idleHook  func(agent string)
	stopOnce  sync.Once
	requested chan struct{} // closed when `swarm down` asks to stop
	// live is what `swarm reload` replaced (budgets, liveness); nil until
	// a reload. reloadMu orders reloads; lastCfg is the file they last read.
	live     atomic.Pointer[liveConfig]
	reloadMu sync.Mutex
	lastCfg  *config.Config
}

// New checks the options and prepares the runners; nothing runs yet.
func New(opts Options) (*Supervisor, error) {
	if opts.Config == nil || opts.Store == nil || opts.Engines == nil || opts.Worktrees == nil || opts.Prompts == nil {
		return nil, errors.New("swarm.New: Config, Store, Engines, Worktrees and Prompts are required")
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.Holder == (mailbox.Holder{}) {
		opts.Holder = ThisHolder()
	}
	if opts.Listen == nil {
		opts.Listen = control.Listen
	}
	if opts.ListenDoor == nil {
		opts.ListenDoor = control.ListenDoor
	}
	s := &Supervisor{
		opts:      opts,
		cfg:       opts.Config,
		store:     opts.Store,
		clock:     opts.Clock,
		log:       opts.Logger,
		runners:   map[string]*runner{},
		requested: make(chan struct{}),
	}
	s.bus.init(opts.Clock, opts.Notify)
	s.names = opts.Config.AgentNames()
	s.poster = mailbox.NewPoster(opts.Store, s.names, mailbox.WakerFunc(s.Wake))
	s.protocol = &Protocol{Store: opts.Store, Poster: s.poster, Commits: commitChecker(opts), Now: opts.Clock.Now, Raise: s.Raise}
	s.leases = &leaseKeeper{d: s.leaseDeps()}
	s.budget = s.budgetBook()
	s.desk = newDesk(s.deskDeps())
	s.flow = newFlow(s.flowDeps())
	s.merges = newMergeQueue(s)
	if opts.Config.Team != nil {
		s.team = newLaunch(s.launchDeps(), opts.Config.Team)
		// A ping past its deadline raises no ack_timeout: the launch
		// handles it.
		hook := opts.PingTimeout
		s.opts.PingTimeout = func(ctx context.Context, m message.Message) {
			if hook != nil {
				hook(ctx, m)
			}
			s.team.poke()
		}
	}
	s.acks = newAckDeadlines(s.ackDeps()) // after the launch's hook on PingTimeout
	// Every agent, or the ones asked for; spawned agents (WithSpawned)
	// run either way, and retired ones not at all.
	var names []string
	for _, a := range opts.Config.Agents {
		switch {
		case a.Spawned != nil && a.Spawned.Retired:
		case len(opts.Agents) == 0 || slices.Contains(opts.Agents, a.Name) || a.Spawned != nil:
			names = append(names, a.Name)
		}
	}
	for _, n := range opts.Agents {
		if !slices.Contains(names, n) {
			names = append(names, n) // unknown: refused below
		}
	}
	var problems []string
	for _, name := range names {
		a, ok := opts.Config.Agent(name)
		if !ok {
			return nil, fmt.Errorf("unknown agent %q: swarm.toml has %s", name, strings.Join(s.names, ", "))
		}
		eng, err := opts.Engines(a)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		s.runners[name] = newRunner(s, a, eng)
		s.order = append(s.order, name)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("cannot start: %s", strings.Join(problems, "; "))
	}
	return s, nil
}

// Poster is the supervisor's mail service: mail posted through it wakes
// its recipients at once. The live view in `swarm up` posts through it.
func (s *Supervisor) Poster() *mailbox.Poster { return s.poster }

// Protocol is the supervisor's protocol service: protocol messages and
// ACKs, posted through Poster.
func (s *Supervisor) Protocol() *Protocol { return s.protocol }

// whileAway is WhileAway with the supervisor's store, clock and log.
func (s *Supervisor) whileAway(ctx context.Context, what string, fn func() error) error {
	return WhileAway(ctx, s.store, s.clock, s.log, what, fn)
}

// WhileAway runs a start-up step, and runs it again while it fails
// because the database is away for a moment (a PostgreSQL restart:
// st.Unavailable), for up to storeOutage: a supervisor (or `swarm up`
// before it) starting during a restart waits for the database as its
// runners do, instead of exiting. The steps it wraps must be safe to
// repeat (reads, writes of a value, and recovery, which only finishes what
// it finds). A nil clock is the real one.
func WhileAway(ctx context.Context, st mailbox.Store, clock Clock, log *slog.Logger, what string, fn func() error) error {
	if clock == nil {
		clock = realClock{}
	}
	err := fn()
	for wait := time.Duration(0); err != nil && st.Unavailable(err) && wait < storeOutage; {
		pause := min(max(2*wait/10, 100*time.Millisecond), 2*time.Second)
		log.Warn("database unavailable; retrying", "step", what, "retry_in", pause, "err", err)
		t := clock.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait += pause
		err = fn()
	}
	return err
}

// Sandbox is the containment of the sessions, as Preflight decided it.
func (s *Supervisor) Sandbox() sandbox.Decision { return s.contain }

// Preflight checks what every engine needs and what the worktrees need,
// before anything is created. The error names everything missing.
func (s *Supervisor) Preflight(ctx context.Context) error {
	if err := s.whileAway(ctx, "preflight", func() error { return s.opts.Worktrees.Preflight(ctx) }); err != nil {
		return err
	}
	var problems []string
	if need := s.cfg.NeedBeads(); len(need) > 0 && s.opts.Tasks == nil {
		problems = append(problems, fmt.Sprintf("strategy needs bd (beads), which is not installed: %s; install bd (https://github.com/steveyegge/beads) or use strategy = \"simple\"", strings.Join(need, ", ")))
	}
	seen := map[string]bool{}
	offline := false // an engine other than script failed: suggest script
	for _, r := range s.allRunners() {
		name := r.agent.Name
		pf, ok := r.eng.(engine.Preflight)
		if !ok || seen[r.eng.Name()] {
			continue
		}
		seen[r.eng.Name()] = true
		if err := pf.Preflight(ctx); err != nil {
			problems = append(problems, fmt.Sprintf("engine %s (agent %s): %s", r.eng.Name(), name, engine.Reason(err, r.eng.Name())))
			_, scripted := r.eng.(*script.Engine)
			offline = offline || !scripted
		}
	}
	// The sandbox before any session: mode = "bwrap" without a usable
	// bwrap stops here; auto falls back to none, and Sandbox says why.
	d, err := sandbox.Decide(ctx, s.cfg.Sandbox.Mode, os.Getenv)
	if err != nil {
		problems = append(problems, err.Error())
	}
	s.contain = d
	if !d.Contained() && err == nil {
		s.log.Warn("sessions run without a sandbox", "mode", string(d.Mode), "why", d.Why, "fix", sandbox.Fix)
	}
	if offline {
		problems = append(problems, "to try swarm offline meanwhile, with scripted agents: swarm up --engine script")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	s.probed = true
	return nil
}

// Run recovers what a crash left, starts every runner, the control socket
// and the services, and blocks until ctx is cancelled, a stop is
// requested, a service fails, or every agent stopped; then it stops
// everything it started, waits for it, and returns. The caller holds the
// lock.
func (s *Supervisor) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(ErrShutdown)
	// Orphans of the sessions' processes (setsid'd, double-forked) come
	// to us rather than to init: they stay findable, and reapable.
	if err := proc.BecomeSubreaper(); err != nil {
		s.log.Warn("could not become a child subreaper", "err", err)
	} else {
		proc.ReapWhile(ctx)
	}
	// The leases first: another host's supervisor may run some of these
	// agents, and recovering them here would wreck its sessions.
	if err := s.Claim(ctx); err != nil {
		return err
	}
	defer s.Release()
	if err := s.whileAway(ctx, "recovery", func() error { return s.recover(ctx) }); err != nil {
		return err
	}
	if err := s.whileAway(ctx, "read the newest mail", func() error { return s.mail.start(ctx, s.store) }); err != nil {
		return err
	}
	if err := s.whileAway(ctx, "read the escalations", func() error { return s.desk.start(ctx) }); err != nil {
		return err
	}
	// The team launch up to MEMBERS_READY, before any session starts.
	if s.team != nil {
		if err := s.team.prepare(ctx); err != nil {
			return err
		}
	}
	srv, err := s.opts.Listen(s.opts.Layout)
	if err != nil {
		return err
	}
	// The doors a crashed supervisor left: their sessions ended with it.
	if err := control.RemoveDoors(s.opts.Layout); err != nil {
		s.log.Warn("remove stale session doors", "err", err)
	}
	// The control socket outlives the supervisor's context: while the
	// agents stop, it still answers (swarm down waits on it) and watchers
	// see them stop. It ends last.
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(srvCtx, s.handle)
		if err != nil {
			cancel(fmt.Errorf("control socket: %w", err)) // no socket: no way to reach us; stop
		}
		served <- err
	}()

	// Runners stop when the supervisor's context ends, with a cause that
	// says why, so sessions see it.
	runCtx, stopRunners := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRunners(ErrShutdown)
	unhook := context.AfterFunc(ctx, func() { stopRunners(shutdownCause(ctx)) })
	defer unhook()
	s.mu.Lock()
	s.fleet.ctx = runCtx
	s.mu.Unlock()
	for _, r := range s.allRunners() {
		s.start(r)
	}
	svcDone := s.startServices(ctx, cancel)
	s.fleet.wait()

	// Every runner ended before anyone asked to stop: every agent stopped
	// on its own (errors, or a fatal problem). That is a failure to report.
	var allStopped error
	if ctx.Err() == nil {
		var reasons []string
		var errs []error
		for _, r := range s.allRunners() {
			name := r.agent.Name
			why := r.stopReason
			if why == "" {
				why = s.lastCause(name)
			}
			reasons = append(reasons, fmt.Sprintf("%s: %s", name, why))
			if r.stopErr != nil {
				errs = append(errs, r.stopErr)
			}
		}
		allStopped = &stoppedError{msg: fmt.Sprintf("every agent stopped: %s; see 'swarm events' and 'swarm logs <agent>'", strings.Join(reasons, "; ")), errs: errs}
	}
	// A shared bd call outlives the runners that started it; end it too.
	if c, ok := s.opts.Tasks.(interface{ Close() }); ok {
		c.Close()
	}
	// The last notice, while the control socket still serves the watchers:
	// they tell a stop from a supervisor that vanished.
	s.bus.emit(lifecycle.Notice{Kind: lifecycle.NoticeStopped, Text: "the supervisor stopped"})
	s.bus.closeWatchers()
	cancel(ErrShutdown)
	svcErr := <-svcDone
	s.bus.waitWatchers(2*time.Second, s.log)
	stopServer()
	return errors.Join(allStopped, svcErr, <-served)
}

// stoppedError is Run's error when every agent stopped on its own: one
// line naming each agent's reason, wrapping the errors that stopped them
// (so a damaged database is still recognised as such).
type stoppedError struct {
	msg  string
	errs []error
}

func (e *stoppedError) Error() string   { return e.msg }
func (e *stoppedError) Unwrap() []error { return e.errs }

// lastCause is the cause of the agent's newest event, for a runner that
// ended without saying why.
func (s *Supervisor) lastCause(agent string) string {
	evs, err := s.store.Events(context.Background(), mailbox.EventFilter{Agent: agent, Limit: 1})
	if err == nil && len(evs) > 0 && evs[0].Cause != "" {
		return fmt.Sprintf("%s (%s)", evs[0].To, evs[0].Cause)
	}
	return "stopped without a recorded reason"
}

// shutdownCause is why ctx ended, as sessions should see it: a bare
// cancellation reads as a graceful shutdown.
func shutdownCause(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return ErrShutdown
	}
	return cause
}

// RequestStop asks Run to stop gracefully, as `swarm down` does.
func (s *Supervisor) RequestStop() { s.stopOnce.Do(func() { close(s.requested) }) }

// AgentNames returns the agents this supervisor runs, in config order.
func (s *Supervisor) AgentNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.order)
}

// lookup returns the agent's runner.
func (s *Supervisor) lookup(agent string) (*runner, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.runners[agent]
	return r, ok
}

// allRunners returns the runners in order: the configured agents, then
// the spawned ones.
func (s *Supervisor) allRunners() []*runner {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*runner, len(s.order))
	for i, n := range s.order {
		out[i] = s.runners[n]
	}
	return out
}

// fleet counts the runner goroutines Run owns. Run waits until the count
// drops to zero; after that (and once the swarm stops) no runner starts.
type fleet struct {
	ctx     context.Context // the runners' context, set by Run
	n       int
	closed  bool
	stopped chan struct{} // closed when the last runner ends
}

// start runs r in a goroutine Run owns, under the runners' context; false
// when the swarm is stopping (or not running).
func (s *Supervisor) start(r *runner) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.fleet
	if f.ctx == nil || f.closed || f.ctx.Err() != nil {
		return false
	}
	if f.stopped == nil {
		f.stopped = make(chan struct{})
	}
	f.n++
	ctx, cancel := context.WithCancelCause(f.ctx)
	r.cancel = cancel
	go func() {
		defer s.ended()
		defer cancel(nil)
		if err := r.run(ctx); err != nil {
			s.log.Error("runner stopped", "agent", r.agent.Name, "err", err)
		}
	}()
	return true
}

// ended counts a runner goroutine out.
func (s *Supervisor) ended() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fleet.n--
	if s.fleet.n == 0 {
		s.fleet.closed = true
		close(s.fleet.stopped)
	}
}

// wait blocks until every runner ended.
func (f *fleet) wait() {
	if f.stopped != nil {
		<-f.stopped
	}
}

// Watch returns a channel of notices until ctx ends. It is how the live
// view follows the supervisor without polling the database.
func (s *Supervisor) Watch(ctx context.Context) <-chan lifecycle.Notice { return s.bus.watch(ctx) }

// panicError turns a recovered panic into an error carrying the stack.
func panicError(what string, p any) error {
	return fmt.Errorf("%s panicked: %v\n%s", what, p, debug.Stack())
}
