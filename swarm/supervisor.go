package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
)

// ErrShutdown is the cancellation cause of a graceful stop (SIGINT, SIGTERM,
// `swarm down`).
var ErrShutdown = errors.New("swarm is shutting down")

// UrgentError is the cancellation cause of a session interrupted by urgent
// mail.
type UrgentError struct{ Message message.Message }

func (e *UrgentError) Error() string {
	return fmt.Sprintf("urgent mail #%d from %s", e.Message.ID, e.Message.From)
}

// Notice is one thing worth telling the operator: a transition or a message.
type Notice struct {
	At      time.Time
	Agent   string
	Kind    string // "transition", "message", "info"
	From    State
	To      State
	Cause   string
	Seq     int64
	Message *message.Message
	Text    string
}

// KindStopped is the kind of the last notice a supervisor sends before it
// exits normally. A watcher whose stream ends without it saw a crash.
const KindStopped = "stopped"

// Options configure a Supervisor.
type Options struct {
	Config *config.Config
	Layout repo.Layout
	Store  *mailbox.Store
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
	Notify func(Notice)
	// PollInterval is how often data_version is read as the fallback
	// wake-up; 250 ms when zero.
	PollInterval time.Duration
	// Listen starts the control socket; nil means control.Listen.
	Listen func(repo.Layout) (*control.Server, error)
}

// Supervisor runs one runner per agent.
type Supervisor struct {
	opts    Options
	cfg     *config.Config
	store   *mailbox.Store
	clock   Clock
	log     *slog.Logger
	runners map[string]*runner
	order   []string

	watching  sync.WaitGroup // watch connections still sending
	notifyMu  sync.Mutex     // guards watchers and the order of notices
	mailMu    sync.Mutex     // guards lastMail
	lastMail  int64
	watchers  map[chan Notice]struct{}
	stopOnce  sync.Once
	requested chan struct{} // closed when `swarm down` asks to stop
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
	if opts.Listen == nil {
		opts.Listen = control.Listen
	}
	s := &Supervisor{
		opts:      opts,
		cfg:       opts.Config,
		store:     opts.Store,
		clock:     opts.Clock,
		log:       opts.Logger,
		runners:   map[string]*runner{},
		watchers:  map[chan Notice]struct{}{},
		requested: make(chan struct{}),
	}
	names := opts.Agents
	if len(names) == 0 {
		names = opts.Config.AgentNames()
	}
	var problems []string
	for _, name := range names {
		a, ok := opts.Config.Agent(name)
		if !ok {
			return nil, fmt.Errorf("unknown agent %q: swarm.toml has %s", name, strings.Join(opts.Config.AgentNames(), ", "))
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

// Preflight checks what every engine needs and what the worktrees need,
// before anything is created. The error names everything missing.
func (s *Supervisor) Preflight(ctx context.Context) error {
	if err := s.opts.Worktrees.Preflight(ctx); err != nil {
		return err
	}
	var problems []string
	seen := map[string]bool{}
	for _, name := range s.order {
		r := s.runners[name]
		pf, ok := r.eng.(engine.Preflight)
		if !ok || seen[r.eng.Name()] {
			continue
		}
		seen[r.eng.Name()] = true
		if err := pf.Preflight(ctx); err != nil {
			problems = append(problems, fmt.Sprintf("engine %s (agent %s): %v", r.eng.Name(), name, err))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// Run recovers what a crash left, starts every runner and the control
// socket, and blocks until ctx is cancelled or a stop is requested; then it
// stops every agent gracefully and returns. The caller holds the lock.
func (s *Supervisor) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(ErrShutdown)
	if err := s.recover(ctx); err != nil {
		return err
	}
	s.mailMu.Lock()
	s.lastMail = s.newestMailID(ctx)
	s.mailMu.Unlock()

	srv, err := s.opts.Listen(s.opts.Layout)
	if err != nil {
		return err
	}
	// The control socket outlives the supervisor's context: while the agents
	// stop, it still answers (swarm down waits on it) and watchers see them
	// stop. It ends last.
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(srvCtx, s.handle)
		if err != nil {
			cancel(err) // no socket: no way to reach us; stop
		}
		served <- err
	}()
	g, gctx := errgroup.WithContext(ctx)
	runCtx, stopRunners := context.WithCancelCause(context.WithoutCancel(gctx))
	var runners sync.WaitGroup
	for _, name := range s.order {
		r := s.runners[name]
		runners.Go(func() {
			if err := r.run(runCtx); err != nil {
				s.log.Error("runner stopped", "agent", name, "err", err)
			}
		})
	}
	g.Go(func() error { return s.poll(gctx) })
	g.Go(func() error { return every(gctx, s.cfg.Liveness.Heartbeat, s.heartbeat) })
	g.Go(func() error { return every(gctx, time.Hour, s.prune) })
	g.Go(func() error {
		select {
		case <-gctx.Done():
		case <-s.requested:
			cancel(ErrShutdown)
		}
		return nil
	})
	// Runners stop when the supervisor's context ends: with its cause, so
	// sessions see why.
	go func() {
		<-gctx.Done()
		cause := context.Cause(ctx)
		if cause == nil || errors.Is(cause, context.Canceled) {
			cause = ErrShutdown
		}
		stopRunners(cause)
	}()
	runners.Wait()
	// Every runner ended before anyone asked to stop: every agent stopped
	// on its own (errors, or a fatal problem). That is a failure to report.
	var allStopped error
	if ctx.Err() == nil {
		var reasons []string
		for _, name := range s.order {
			reasons = append(reasons, fmt.Sprintf("%s: %s", name, s.runners[name].stopReason))
		}
		allStopped = fmt.Errorf("every agent stopped: %s; see 'swarm events' and 'swarm logs <agent>'", strings.Join(reasons, "; "))
	}
	// A shared bd call outlives the runners that started it; end it too.
	if c, ok := s.opts.Tasks.(interface{ Close() }); ok {
		c.Close()
	}
	// The last notice, while the control socket still serves the watchers:
	// they tell a stop from a supervisor that vanished. Closing their
	// channels lets each watch connection drain and end before the socket
	// shuts down.
	s.emit(Notice{Kind: KindStopped, Text: "the supervisor stopped"})
	s.closeWatchers()
	cancel(ErrShutdown)
	err = g.Wait()
	s.waitWatchers(2 * time.Second)
	stopServer()
	return errors.Join(allStopped, err, <-served)
}

// RequestStop asks Run to stop gracefully, as `swarm down` does.
func (s *Supervisor) RequestStop() { s.stopOnce.Do(func() { close(s.requested) }) }

func (s *Supervisor) newestMailID(ctx context.Context) int64 {
	var id int64
	_ = s.store.DB().QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&id)
	return id
}

// recover moves every agent found in a non-terminal state back to
// Initializing, records its running sessions as crashed, requeues its
// delivered mail and kills the process groups the crash left behind.
func (s *Supervisor) recover(ctx context.Context) error {
	for _, name := range s.order {
		r := s.runners[name]
		a, err := s.store.Agent(ctx, name)
		if errors.Is(err, mailbox.ErrNoSuchAgent) {
			if err := s.store.RegisterAgent(ctx, r.info()); err != nil {
				return err
			}
			a, err = s.store.Agent(ctx, name)
		}
		if err != nil {
			return err
		}
		if err := s.store.RegisterAgent(ctx, r.info()); err != nil {
			return err
		}
		r.state, r.seq = State(a.State), a.SessionSeq
		// Session numbers only grow: never below a session already stored.
		if last, err := s.store.LastSession(ctx, name, ""); err == nil && last.Seq > r.seq {
			r.seq = last.Seq
		}
		// Level-based: whatever the agent's state, no session of it runs
		// now, so sessions left running are crashed and delivered mail is
		// queued again. Only a non-terminal state is also moved.
		var rec mailbox.Recovered
		err = r.inTx(ctx, func(tx *mailbox.Tx) error {
			var err error
			if rec, err = tx.RecoverAgent(name); err != nil {
				return err
			}
			if r.state.Terminal() {
				return nil
			}
			if err := tx.ResetErrors(name); err != nil {
				return err
			}
			return r.moveTx(ctx, tx, Recover, Initializing, "recovered")
		})
		if err != nil {
			return fmt.Errorf("recover %s: %w", name, err)
		}
		for _, sess := range rec.Sessions {
			for _, pg := range sess.Pgids {
				if _, err := proc.KillSessionGroup(pg, sessionMarker(name, sess.Seq)); err != nil {
					s.log.Warn("kill leftover process group", "agent", name, "session_seq", sess.Seq, "pgid", pg, "err", err)
				}
			}
		}
		if len(rec.Sessions) > 0 {
			// The killed sessions may have been inside a git commit.
			if removed, err := s.opts.Worktrees.RemoveStaleLock(name); err != nil {
				s.log.Warn("remove stale git lock", "agent", name, "err", err)
			} else if removed {
				s.log.Info("removed a stale index.lock left by a crashed session", "agent", name)
			}
		}
		if len(rec.Sessions) == 0 && rec.Requeued == 0 {
			continue
		}
		s.emit(Notice{Agent: name, Kind: "info", Text: fmt.Sprintf("recovered after a crash: %d session(s) marked crashed, %d message(s) queued again", len(rec.Sessions), rec.Requeued)})
	}
	return nil
}

// sessionMarker is the environment entry every process of a session
// carries; it tells a session's process group from one that reused its id.
func sessionMarker(agent string, seq int64) string {
	return "SWARM_SESSION_ID=" + agent + "-" + strconv.FormatInt(seq, 10)
}

// poke wakes every runner: something in the database may have changed.
func (s *Supervisor) poke(ctx context.Context) {
	// Runners first: an urgent interrupt should not wait for the notices.
	for _, r := range s.runners {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	s.announceMail(ctx)
}

// announceMail emits a notice for each message stored since the last look.
func (s *Supervisor) announceMail(ctx context.Context) {
	s.mailMu.Lock()
	defer s.mailMu.Unlock()
	rows, err := s.store.DB().QueryContext(ctx, `SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT 200`, s.lastMail)
	if err != nil {
		return
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		m, err := s.store.Get(ctx, id)
		if err != nil {
			continue
		}
		s.lastMail = id
		s.emit(Notice{At: m.CreatedAt, Agent: m.To, Kind: "message", Message: &m})
	}
}

// poll reads data_version as the fallback wake-up for writes made by other
// processes whose poke was missed. It never holds a read transaction open.
func (s *Supervisor) poll(ctx context.Context) error {
	last, err := s.store.DataVersion(ctx)
	if err != nil {
		return fmt.Errorf("read data_version: %w", err)
	}
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			v, err := s.store.DataVersion(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.log.Warn("read data_version", "err", err)
				continue
			}
			if v != last {
				last = v
				s.poke(ctx)
			}
		}
	}
}

// prune deletes done mail past the retention window and checkpoints the
// WAL, so a long-running swarm's database does not grow without bound.
func (s *Supervisor) prune(ctx context.Context) {
	if n, err := s.store.Prune(ctx, s.cfg.Mailbox.Retention); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("prune mail", "err", err)
		}
	} else if n > 0 {
		s.log.Info("pruned done mail", "messages", n)
	}
}

// every calls fn at once and then every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) error {
	fn(ctx)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			fn(ctx)
		}
	}
}

func (s *Supervisor) heartbeat(ctx context.Context) {
	if err := s.store.Heartbeat(ctx, s.order); err != nil && ctx.Err() == nil {
		s.log.Warn("heartbeat", "err", err)
	}
}

// handle answers control socket requests.
func (s *Supervisor) handle(ctx context.Context, req control.Request, send func(any) error) control.Response {
	switch req.Op {
	case control.OpPoke:
		s.poke(ctx)
		return control.Response{OK: true}
	case control.OpPing:
		s.notifyMu.Lock()
		watchers := len(s.watchers)
		s.notifyMu.Unlock()
		d, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "agents": s.order, "watchers": watchers})
		return control.Response{OK: true, Data: d}
	case control.OpStop:
		s.RequestStop()
		return control.Response{OK: true}
	case control.OpPause, control.OpResume:
		r, ok := s.runners[req.Agent]
		if !ok {
			return control.Response{Error: fmt.Sprintf("unknown agent %q (running: %s)", req.Agent, strings.Join(s.order, ", "))}
		}
		stopped := control.Response{Error: fmt.Sprintf("agent %s is stopped; a new 'swarm up' starts it again", req.Agent)}
		select {
		case <-r.done: // checked first: the buffered ctl would take the request
			return stopped
		default:
		}
		select {
		case r.ctl <- req.Op:
			return control.Response{OK: true}
		case <-r.done:
			return stopped
		case <-ctx.Done():
			return control.Response{Error: "shutting down"}
		}
	case control.OpWatch:
		return s.watch(ctx, send)
	}
	return control.Response{Error: fmt.Sprintf("unknown operation %q", req.Op)}
}

// Watch returns a channel of notices until ctx ends. It is how the live
// view follows the supervisor without polling the database.
func (s *Supervisor) Watch(ctx context.Context) <-chan Notice {
	ch := make(chan Notice, 256)
	s.notifyMu.Lock()
	s.watchers[ch] = struct{}{}
	s.notifyMu.Unlock()
	context.AfterFunc(ctx, func() {
		s.notifyMu.Lock()
		if _, ok := s.watchers[ch]; ok {
			delete(s.watchers, ch)
			close(ch)
		}
		s.notifyMu.Unlock()
	})
	return ch
}

func (s *Supervisor) watch(ctx context.Context, send func(any) error) control.Response {
	s.watching.Add(1)
	defer s.watching.Done()
	ch := s.Watch(ctx)
	s.log.Debug("watcher attached")
	if err := send(control.Response{OK: true}); err != nil {
		return control.Response{OK: true}
	}
	sent := 0
	for n := range ch {
		if err := send(n); err != nil {
			s.log.Debug("watcher gone", "notices", sent, "err", err)
			return control.Response{OK: true}
		}
		sent++
	}
	s.log.Debug("watcher detached", "notices", sent, "ctx_err", ctx.Err())
	return control.Response{OK: true}
}

// waitWatchers gives the watch connections up to d to send what their
// closed channels still hold: stopping the socket first would cut the last
// notices, "stopped" among them. A watcher that reads too slowly is cut.
func (s *Supervisor) waitWatchers(d time.Duration) {
	done := make(chan struct{})
	go func() { s.watching.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("a watcher did not take the last notices in time")
	}
}

func (s *Supervisor) closeWatchers() {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	for ch := range s.watchers {
		close(ch)
		delete(s.watchers, ch)
	}
}

func (s *Supervisor) emit(n Notice) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	s.emitLocked(n)
}

func (s *Supervisor) emitLocked(n Notice) {
	if n.At.IsZero() {
		n.At = s.clock.Now()
	}
	if s.opts.Notify != nil {
		s.opts.Notify(n)
	}
	for ch := range s.watchers {
		select {
		case ch <- n:
		default: // a slow watcher misses notices rather than stalling agents
		}
	}
}

// AgentNames returns the agents this supervisor runs, in config order.
func (s *Supervisor) AgentNames() []string { return slices.Clone(s.order) }
