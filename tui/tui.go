// Package tui is swarm's live view: a full-screen terminal UI (bubbletea v2
// and lipgloss v2) that shows the agents, their states, the latest mail and
// the selected agent's session log as they change, and lets the operator
// message, interrupt, pause and resume agents, and ack or decide the
// escalations waiting for them (each asking y/n first).
//
// The view reads and acts only through a Source, so one model serves both
// `swarm up` (in process, fed by the supervisor's notices) and `swarm watch`
// (fed by the control socket's notice stream).
//
// Refresh is driven by notices, never by polling at a frame rate. A notice
// is applied to the model at once (state, activity, new mail) and triggers
// one coalesced re-read of the snapshot for the derived numbers (pending
// mail, tokens, sessions). The only timers are the one that fires when an
// age label on screen ("12s", "3m") would change, and a 1 s re-read of the
// session log while the selected agent is Running, because an exec agent's
// log grows without notices. With nothing changing, nothing redraws.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/message"
)

// Agent is one row of the agents table.
type Agent struct {
	Name       string
	State      lifecycle.State
	Seq        int64     // the current (or last) session number; 0 before the first
	StateSince time.Time // zero when unknown
	Pending    int       // mail not done yet: queued and delivered
	Urgent     int       // queued urgent mail
	Activity   string    // the last tool call, "bash: go test ./..."
	Tokens     int64
	// Report is the agent's last report (swarm report), "progress T-1:
	// half done"; empty when it made none. An agent not running shows it
	// in the LAST column.
	Report string
	// Budget is the agent's spending against its token budget, "1,600/1,000
	// in 24h"; empty without a budget. It leads the LAST column.
	Budget string
	// Cost is the dollars of its sessions over the budget window ("$0.12",
	// "$0.12 + 2 unpriced"); empty when unknown. Mode is its mode and
	// strategy with the capabilities it has ("execute/plan: can_message,
	// …"). The web desk shows both; the terminal has no room.
	Cost, Mode string
}

// Snapshot is the state read from the store.
type Snapshot struct {
	Agents []Agent           // in configuration order
	Mail   []message.Message // the latest messages, oldest first
	Tokens int64             // every agent's tokens
	// Budget is the swarm's spending against [budget] swarm_tokens, as
	// Agent.Budget; empty without one.
	Budget string
	// Team is the team launch's state on one line ("team analysis:
	// MEMBERS_READY (waiting for beta)"); empty without [team].
	Team     string
	Sessions int64 // sessions run, across agents and restarts
	// Escalations are the unresolved ones, most severe first, then newest.
	Escalations []escalation.Escalation
	// Workflows are one line per dev-qa workflow's state and per live work
	// item (DESIGN §9.3); the view makes them safe to print.
	Workflows []string
	// Merges are one line per live candidate of the merge queue (DESIGN
	// §14), first in first out, and one saying how far the operator's
	// checkout is behind the base branch; the view makes them safe.
	Merges []string
}

// Section is one section of a stored prompt.
type Section struct {
	Number int // the section's fixed number in the prompt (DESIGN §5); 0 if none
	Title  string
	Body   string
}

// Source is everything the view reads and does. Its methods are called from
// the view's own goroutines, one Next at a time.
type Source interface {
	// Next blocks until the next change. It returns io.EOF when the
	// stream ends because the supervisor stopped.
	Next(ctx context.Context) (lifecycle.Notice, error)
	Snapshot(ctx context.Context) (Snapshot, error)
	// Tail returns up to lines last lines of the agent's session log; none
	// when the log does not exist yet.
	Tail(ctx context.Context, agent string, seq int64, lines int) ([]string, error)
	// Prompt returns the stored prompt of the agent's session seq.
	Prompt(ctx context.Context, agent string, seq int64) ([]Section, error)
	// Send sends mail from operator to an agent and wakes the supervisor.
	Send(ctx context.Context, to, body string, urgent bool) (message.Message, error)
	// SetPaused asks the supervisor to pause (after the running session)
	// or resume the agent.
	SetPaused(ctx context.Context, agent string, paused bool) error
	// Decide acks or resolves an escalation as the operator (action is
	// ack, resume, abort, approve or reject), and tells the supervisor.
	Decide(ctx context.Context, id int64, action escalation.Event) (escalation.Escalation, error)
}

// Options configure the view.
type Options struct {
	// Title heads the screen: "swarm up · /src/app · pid 4242".
	Title string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Stop, when set, is what q does once the operator answers y to "stop
	// the swarm?" (Ctrl-C does it without asking): stop the swarm
	// gracefully (swarm up). The view then stays until the source's stream
	// ends, so the operator sees the agents stop; a second q leaves at
	// once. When nil, q just leaves the view and the swarm keeps running
	// (swarm watch).
	Stop func()
	// Input and Output are the terminal; nil means the process's.
	Input  io.Reader
	Output io.Writer
}

// ErrSourceEnded is returned by Run when the view closed because the
// source's stream ended (the supervisor stopped) rather than because the
// operator left.
var ErrSourceEnded = errors.New("the supervisor stopped")

// Run shows the view until the operator leaves, the source's stream ends
// (ErrSourceEnded) or ctx ends. It restores the terminal and waits for every
// goroutine it started before returning.
func Run(ctx context.Context, src Source, opts Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := New(ctx, src, opts)
	popts := []tea.ProgramOption{
		// The caller owns the signals: swarm up turns SIGINT and SIGTERM
		// into a graceful stop, which ends the stream and so the view.
		tea.WithoutSignalHandler(),
		// The renderer wakes every frame but writes only when the view
		// changed. 20 frames a second keeps a change on screen within 50
		// ms, half the budget, at a third of the default 60 wake-ups
		// (measured idle: 0.6% CPU at 20, 1.0% at 60).
		tea.WithFPS(20),
	}
	if opts.Input != nil {
		popts = append(popts, tea.WithInput(opts.Input))
	}
	if opts.Output != nil {
		popts = append(popts, tea.WithOutput(opts.Output))
	}
	p := tea.NewProgram(m, popts...)

	var wg sync.WaitGroup
	wg.Go(func() { pump(ctx, src, p) })
	wg.Go(func() {
		<-ctx.Done()
		p.Quit() // a no-op once the program has ended
	})
	final, err := p.Run()
	cancel()
	wg.Wait()
	m.jobs.closeAndWait()
	if err != nil {
		return fmt.Errorf("live view: %w (run with --no-tui for plain output)", err)
	}
	if fm, ok := final.(*Model); ok && fm.ended != nil {
		if errors.Is(fm.ended, io.EOF) {
			return ErrSourceEnded
		}
		return fmt.Errorf("%w: %w", ErrSourceEnded, fm.ended)
	}
	return nil
}

// pump feeds the source's events to the program until the stream or ctx
// ends.
func pump(ctx context.Context, src Source, p *tea.Program) {
	for {
		ev, err := src.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.Send(endMsg{err: err})
			}
			return
		}
		p.Send(eventMsg{ev: ev})
	}
}

// jobs tracks the view's I/O commands, which bubbletea runs on goroutines
// of its own, so that Run can wait for them after the program ends. A job
// that starts after closeAndWait does nothing.
type jobs struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (j *jobs) start() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return false
	}
	j.wg.Add(1)
	return true
}

func (j *jobs) closeAndWait() {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.wg.Wait()
}

// cmd wraps fn as a tracked command.
func (j *jobs) cmd(ctx context.Context, fn func(context.Context) tea.Msg) tea.Cmd {
	return func() tea.Msg {
		if !j.start() {
			return nil
		}
		defer j.wg.Done()
		return fn(ctx)
	}
}
