package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/team"
)

// This file is the team launch (DESIGN §9.5), run by the supervisor
// instead of a team lead that must remember it:
//
//   - prepare, before any runner starts: INIT → TEAM_PROBED (the
//     preflight passed) → TEAM_READY (lock and database held) →
//     MEMBERS_READY (every member's worktree exists, all or nothing) and
//     a CORE_BOOTSTRAP_PING from swarm queued for each core agent, so its
//     first prompt carries it;
//   - the launch service, level-based: it reads the launch row and the
//     pings' ACK states, records each core ACK (<NAME>_CORE_READY_ACK),
//     moves to CORE_READY → RUNNING when every core agent acknowledged,
//     relaunches the silent ones past ready_timeout (an urgent ping ends
//     their session and starts a fresh one) and falls back with a
//     protocol_breach escalation after max_relaunch; the escalation's
//     decision, read from its row, resumes (RUNNING) or stops the swarm;
//   - the members wait in the lifecycle state Waiting until the launch is
//     RUNNING (runner.waitCore).
//
// Everything it needs after a crash is in the store: the row, its pings
// and the messages' ACK states; a restart continues where it was. A new
// swarm up after a clean stop of a launch that was done (RUNNING, or a
// FALLBACK the operator decided) launches again from INIT.

// launch is the supervisor's team launch; nil without [team].
type launch struct {
	d    launchDeps
	cfg  *config.Team
	kick chan struct{}

	mu       sync.Mutex
	released chan struct{} // closed once the members may start
	cause    string        // why they may, for their CoreReady event
}

// launchDeps is what the team launch needs of the supervisor.
type launchDeps struct {
	Store    mailbox.Store
	Protocol *Protocol
	Raise    func(context.Context, escalation.Draft) (escalation.Escalation, bool, error)
	Emit     func(lifecycle.Notice)
	Clock    Clock
	Log      *slog.Logger
	Members  []string // the team's non-core agents (teamMembers)
	// Agents are the agents this supervisor runs, Local whether it runs
	// one, and Stopped whether every one of them is Stopped.
	Agents  func() []string
	Local   func(agent string) bool
	Stopped func() bool
	// Preflight checks the engines and worktrees unless they were; Ensure
	// makes an agent's worktree.
	Preflight func(context.Context) error
	Ensure    func(ctx context.Context, agent string) error
	Stop      func() // ask the swarm to stop, as swarm down does
}

func newLaunch(d launchDeps, cfg *config.Team) *launch {
	return &launch{d: d, cfg: cfg, kick: make(chan struct{}, 1), released: make(chan struct{})}
}

// poke makes the service look again.
func (l *launch) poke() {
	if l == nil {
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// waiting reports whether agent must wait for the core before its first
// session: a configured non-core member while the launch is not RUNNING.
func (l *launch) waiting(agent string) bool {
	if l == nil || !slices.Contains(l.members(), agent) {
		return false
	}
	select {
	case <-l.released:
		return false
	default:
		return true
	}
}

// release lets the members start, once.
func (l *launch) release(cause string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.released:
	default:
		l.cause = cause
		close(l.released)
	}
}

func (l *launch) releaseCause() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// members are the team's non-core agents, in config order: seed 003's
// selected domains.
func (l *launch) members() []string {
	return l.d.Members
}

// move applies one launch transition and announces it.
func (l *launch) move(ctx context.Context, from team.State, ev team.Event, to team.State, cause string, more func(tx mailbox.Tx) error) error {
	var e fsm.Event
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	err := l.d.Store.InTx(bctx, func(tx mailbox.Tx) error {
		var err error
		if e, err = fsm.Apply(tx, team.Table, fsm.SubjectTeam, team.Subject(l.cfg.Name), from, ev, to, cause, 0); err != nil {
			return err
		}
		if more != nil {
			return more(tx)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("team %s: %s → %s: %w", l.cfg.Name, from, to, err)
	}
	text := fmt.Sprintf("team %s: %s", l.cfg.Name, to)
	if from == to {
		text = fmt.Sprintf("team %s: %s", l.cfg.Name, e.Cause)
	} else if e.Cause != string(ev) {
		text += " (" + e.Cause + ")"
	}
	l.d.Emit(lifecycle.Notice{At: e.At, Kind: lifecycle.NoticeInfo, Text: text})
	return nil
}

// row reads the launch row; ok is false before its first transition.
func (l *launch) row(ctx context.Context) (team.Launch, bool, error) {
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	row, err := l.d.Store.Team(bctx, l.cfg.Name)
	if errors.Is(err, mailbox.ErrNoSuchTeam) {
		return row, false, nil
	}
	return row, err == nil, err
}

// PartialLaunchError is swarm up's error when a member's worktree could
// not be made ready: no session started.
type PartialLaunchError struct {
	Team, Member string
	Err          error
}

func (e *PartialLaunchError) Error() string {
	return fmt.Sprintf("team %s: member %s could not be made ready, so no agent's session started (%s): %v; fix it and run 'swarm up' again",
		e.Team, e.Member, team.BreachPartialLaunch, e.Err)
}

func (e *PartialLaunchError) Unwrap() error { return e.Err }

// prepare runs the launch up to MEMBERS_READY, before any runner starts.
// It is idempotent: after a crash it continues from the stored state.
func (l *launch) prepare(ctx context.Context) error {
	for _, c := range l.cfg.Core {
		if !l.d.Local(c) {
			return fmt.Errorf("team %s: core agent %s is not among the agents this swarm runs; run it too (swarm up --agents)", l.cfg.Name, c)
		}
	}
	row, ok, err := l.row(ctx)
	if err != nil {
		return err
	}
	if !ok {
		if err := l.move(ctx, "", team.Create, team.Init, "", nil); err != nil {
			return err
		}
		row.State = team.Init
	} else if fresh, err := l.fresh(ctx, row); err != nil {
		return err
	} else if fresh {
		if err := l.move(ctx, row.State, team.Restart, team.Init, "restart: a new swarm up", func(tx mailbox.Tx) error {
			return tx.SaveTeam(team.Launch{Name: l.cfg.Name})
		}); err != nil {
			return err
		}
		row = team.Launch{Name: l.cfg.Name, State: team.Init}
	}
	if row.State == team.Init {
		if err := l.d.Preflight(ctx); err != nil {
			return err
		}
		if err := l.move(ctx, team.Init, team.Probe, team.Probed, "preflight passed", nil); err != nil {
			return err
		}
		row.State = team.Probed
	}
	if row.State == team.Probed {
		if err := l.move(ctx, team.Probed, team.Lock, team.Ready, "lock and database held", nil); err != nil {
			return err
		}
		row.State = team.Ready
	}
	if row.State == team.Ready {
		// All or nothing: every member's worktree before any session.
		for _, name := range l.d.Agents() {
			if err := l.d.Ensure(ctx, name); err != nil {
				if berr := l.breach(ctx, team.Ready, team.BreachPartialLaunch, []string{name}, nil); berr != nil {
					l.d.Log.Error("record the breach", "team", l.cfg.Name, "err", berr)
				}
				return &PartialLaunchError{Team: l.cfg.Name, Member: name, Err: err}
			}
		}
		if err := l.move(ctx, team.Ready, team.Members, team.MembersReady, "every member's worktree is ready", nil); err != nil {
			return err
		}
		row.State = team.MembersReady
	}
	if row.State == team.MembersReady {
		if err := l.pingMissing(ctx); err != nil {
			return err
		}
	}
	if row.State == team.Running {
		l.release("core ready")
	}
	return nil
}

// fresh reports whether this swarm up starts a new launch: the last one
// was done (RUNNING, or a FALLBACK whose escalation is decided) and the
// swarm stopped cleanly (every agent Stopped). After a crash, or while
// the launch was under way, it continues instead.
func (l *launch) fresh(ctx context.Context, row team.Launch) (bool, error) {
	switch row.State {
	case team.Running:
	case team.Fallback:
		if row.Escalation == 0 {
			return false, nil
		}
		bctx, cancel := bookkeeping(ctx)
		defer cancel()
		e, err := l.d.Store.Escalation(bctx, row.Escalation)
		if err != nil {
			return false, err
		}
		if e.State != escalation.Resolved {
			return false, nil
		}
	default:
		return false, nil
	}
	return l.d.Stopped(), nil
}

// pingMissing queues a ping for every core agent that has none yet.
func (l *launch) pingMissing(ctx context.Context) error {
	row, _, err := l.row(ctx)
	if err != nil {
		return err
	}
	var missing []string
	for _, c := range l.cfg.Core {
		if row.Pings[c].MsgID == "" {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	pings, err := l.ping(ctx, missing, false)
	if err != nil {
		return err
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	return l.d.Store.InTx(bctx, func(tx mailbox.Tx) error {
		row, err := tx.Team(l.cfg.Name)
		if err != nil {
			return err
		}
		maps.Copy(row.Pings, pings)
		return tx.SaveTeam(row)
	})
}

// ping sends each agent a CORE_BOOTSTRAP_PING from swarm that needs an ACK
// within ready_timeout; urgent ones end a running session.
func (l *launch) ping(ctx context.Context, agents []string, urgent bool) (map[string]team.Ping, error) {
	out := map[string]team.Ping{}
	payload, _ := json.Marshal(protocol.Ping{Code: team.PingCode})
	for _, a := range agents {
		bctx, cancel := bookkeeping(ctx)
		m, _, err := l.d.Protocol.Send(bctx, SendRequest{Caller: identity.Runtime(), Draft: protocol.Draft{Type: protocol.TypePing, From: message.Swarm, To: a,
			TaskID: team.TaskID(l.cfg.Name), Payload: payload, AckTimeout: l.cfg.ReadyTimeout, Urgent: urgent}})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("team %s: ping %s: %w", l.cfg.Name, a, err)
		}
		out[a] = team.Ping{MsgID: m.MsgID}
	}
	return out, nil
}

// breach records a breach code for agents, as an event on state (its
// cause the code) and in the row; more changes the row in the same
// transaction.
func (l *launch) breach(ctx context.Context, state team.State, code string, agents []string, more func(row *team.Launch)) error {
	now := l.d.Clock.Now()
	return l.move(ctx, state, team.Breach, state, code, func(tx mailbox.Tx) error {
		row, err := tx.Team(l.cfg.Name)
		if err != nil {
			return err
		}
		for _, a := range agents {
			row.Breaches = append(row.Breaches, team.BreachRecord{Code: code, At: now, Agent: a})
		}
		if more != nil {
			more(&row)
		}
		return tx.SaveTeam(row)
	})
}

// run is the launch service: look, then wait for a poke (an ACK, a ping
// past its deadline, an escalation changed) or the next deadline.
func (l *launch) run(ctx context.Context) error {
	timer := l.d.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, err := l.look(ctx)
		if err != nil && ctx.Err() == nil {
			l.d.Log.Warn("team launch", "team", l.cfg.Name, "err", err)
			next = ackRetry
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-l.kick:
		case <-timer.C:
		}
	}
}

// look moves the launch as far as the stored levels allow, and returns
// how long it may sleep: until the earliest ping deadline.
func (l *launch) look(ctx context.Context) (time.Duration, error) {
	const idle = time.Hour
	row, ok, err := l.row(ctx)
	if err != nil || !ok {
		return idle, err
	}
	switch row.State {
	case team.Running:
		l.release("core ready")
		return idle, nil
	case team.MembersReady, team.Fallback:
	default:
		return idle, nil
	}
	now := l.d.Clock.Now()
	var silent []string
	acked := 0
	next := idle
	for _, c := range l.cfg.Core {
		p := row.Pings[c]
		if p.Acked {
			acked++
			continue
		}
		if p.MsgID == "" {
			continue
		}
		bctx, cancel := bookkeeping(ctx)
		m, err := l.d.Store.ProtocolMessage(bctx, p.MsgID)
		cancel()
		if err != nil {
			return ackRetry, err
		}
		switch {
		case m.Ack != nil && m.Ack.State == message.AckAcked:
			if err := l.acked(ctx, row.State, c, m); err != nil {
				return ackRetry, err
			}
			acked++
		case m.Ack != nil && (m.Ack.State == message.AckOverdue || m.Ack.DueAt != nil && !m.Ack.DueAt.After(now)):
			silent = append(silent, c)
		case m.Ack != nil && m.Ack.DueAt != nil:
			next = min(next, m.Ack.DueAt.Sub(now))
		case m.Ack != nil && m.Ack.State.Open():
			// Never delivered: the agent started no session to read it (it
			// is held, failing, or stuck). Its ACK clock has not started,
			// but the launch's has: ready_timeout from the ping.
			if due := m.CreatedAt.Add(l.cfg.ReadyTimeout); due.After(now) {
				next = min(next, due.Sub(now))
			} else {
				silent = append(silent, c)
			}
		}
	}
	if acked == len(l.cfg.Core) {
		if err := l.move(ctx, row.State, team.CoreDone, team.CoreReady, "every core agent acknowledged", nil); err != nil {
			return ackRetry, err
		}
		if err := l.move(ctx, team.CoreReady, team.Run, team.Running, "the members start", nil); err != nil {
			return ackRetry, err
		}
		l.release("core ready")
		return idle, nil
	}
	if row.State == team.Fallback {
		return idle, l.decided(ctx, row)
	}
	if len(silent) > 0 {
		return 0, l.notReady(ctx, row, silent)
	}
	return max(next, 0), nil
}

// acked records one core agent's ACK.
func (l *launch) acked(ctx context.Context, state team.State, agent string, m message.Message) error {
	return l.move(ctx, state, team.CoreAck, state, team.AckCode(agent), func(tx mailbox.Tx) error {
		row, err := tx.Team(l.cfg.Name)
		if err != nil {
			return err
		}
		p := row.Pings[agent]
		p.Acked, p.At = true, m.Ack.AckedAt
		if m.SessionSeq != nil {
			p.Session = *m.SessionSeq
		}
		row.Pings[agent] = p
		return tx.SaveTeam(row)
	})
}

// notReady handles core agents that let ready_timeout pass: the breach,
// then a relaunch with a fresh ping, or the fallback.
func (l *launch) notReady(ctx context.Context, row team.Launch, silent []string) error {
	if row.Relaunches < l.cfg.MaxRelaunch {
		pings, err := l.ping(ctx, silent, true)
		if err != nil {
			return err
		}
		for _, a := range silent {
			// The old ping is answered by the new one.
			bctx, cancel := bookkeeping(ctx)
			err := l.d.Store.InTx(bctx, func(tx mailbox.Tx) error {
				_, err := tx.CancelAck(row.Pings[a].MsgID)
				if errors.Is(err, mailbox.ErrAckClosed) {
					return nil
				}
				return err
			})
			cancel()
			if err != nil {
				l.d.Log.Warn("cancel a missed ping", "agent", a, "err", err)
			}
		}
		return l.breach(ctx, team.MembersReady, team.BreachCoreNotReady, silent, func(r *team.Launch) {
			r.Relaunches++
			maps.Copy(r.Pings, pings)
		})
	}
	if err := l.breach(ctx, team.MembersReady, team.BreachCoreNotReady, silent, nil); err != nil {
		return err
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	e, _, err := l.d.Raise(bctx, l.fallbackDraft(row, silent))
	if err != nil {
		return err
	}
	return l.move(ctx, team.MembersReady, team.GiveUp, team.Fallback, fmt.Sprintf("core not ready after %d relaunch(es): escalation %d", row.Relaunches, e.ID),
		func(tx mailbox.Tx) error {
			row, err := tx.Team(l.cfg.Name)
			if err != nil {
				return err
			}
			row.Escalation = e.ID
			return tx.SaveTeam(row)
		})
}

func (l *launch) fallbackDraft(row team.Launch, silent []string) escalation.Draft {
	d := escalation.Draft{Kind: escalation.KindProtocolBreach, Severity: escalation.Critical, Ref: escalation.TeamRef(l.cfg.Name),
		Summary: fmt.Sprintf("team %s: core agent(s) %s did not acknowledge %s within %s, %d relaunch(es) included; the members wait. Resume starts them anyway, abort stops the swarm",
			l.cfg.Name, strings.Join(silent, ", "), team.PingCode, l.cfg.ReadyTimeout, row.Relaunches)}
	d.Details = details(map[string]any{"team": l.cfg.Name, "code": team.BreachCoreNotReady, "silent": silent,
		"relaunches": row.Relaunches, "ready_timeout_sec": l.cfg.ReadyTimeout.Seconds()})
	d.DedupeKey = escalation.DefaultDedupeKey(escalation.KindProtocolBreach, "", d.Ref, "")
	return d
}

// decided acts on the fallback escalation's decision, read from its row:
// resume starts the members, abort stops the swarm.
func (l *launch) decided(ctx context.Context, row team.Launch) error {
	if row.Escalation == 0 {
		return nil
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	e, err := l.d.Store.Escalation(bctx, row.Escalation)
	if err != nil || e.State != escalation.Resolved || e.Decision == nil {
		return err
	}
	cause := fmt.Sprintf("%s: escalation %d", *e.Decision, e.ID)
	if !e.Decision.Releases() {
		l.d.Log.Info("the team launch's fallback was aborted; stopping the swarm", "team", l.cfg.Name, "escalation", e.ID)
		l.d.Emit(lifecycle.Notice{At: l.d.Clock.Now(), Kind: lifecycle.NoticeInfo, Text: fmt.Sprintf("team %s: %s; the swarm stops", l.cfg.Name, cause)})
		l.d.Stop()
		return nil
	}
	if err := l.move(ctx, team.Fallback, team.Resume, team.Running, cause, nil); err != nil {
		return err
	}
	l.release(cause)
	return nil
}

// waitCore is the Waiting state: a member waits, starting no session,
// until the launch lets the members start.
func (r *runner) waitCore(ctx context.Context) error {
	l := r.sup.team
	for {
		select {
		case <-l.released:
			return r.move(ctx, lifecycle.CoreReady, lifecycle.BuildingPrompt, l.releaseCause())
		case <-ctx.Done():
			return nil
		case c := <-r.ctl:
			r.control(c)
		case <-r.wake:
			r.urgentHint.Store(false)
		case <-r.escal:
			if held, err := r.holdIfHeld(ctx); held || err != nil {
				return err
			}
		}
	}
}

// TeamRecord is the team launch's RUNNING record (`swarm team --json`),
// read from the store; ok is false without [team].
func TeamRecord(ctx context.Context, cfg *config.Config, st mailbox.Store) (team.Record, bool, error) {
	if cfg.Team == nil {
		return team.Record{}, false, nil
	}
	members := teamMembers(cfg)
	row, err := st.Team(ctx, cfg.Team.Name)
	switch {
	case errors.Is(err, mailbox.ErrNoSuchTeam):
		return team.RecordOf(cfg.Team.Name, cfg.Team.Core, members, nil), true, nil
	case err != nil:
		return team.Record{}, true, err
	}
	return team.RecordOf(cfg.Team.Name, cfg.Team.Core, members, &row), true, nil
}

// teamMembers are the configured agents outside the core; spawned agents
// are not members.
func teamMembers(cfg *config.Config) []string {
	var out []string
	for _, a := range cfg.Agents {
		if a.Spawned == nil && !cfg.Team.IsCore(a.Name) {
			out = append(out, a.Name)
		}
	}
	return out
}

// runLaunch is the team-launch service; without [team] it has nothing to
// do and returns.
func (s *Supervisor) runLaunch(ctx context.Context) error {
	if s.team == nil {
		return nil
	}
	return s.team.run(ctx)
}
