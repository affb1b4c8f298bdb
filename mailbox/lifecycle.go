package mailbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/message"
)

// ErrStateConflict means a compare-and-set transition found the agent in a
// different state than expected: someone else moved it.
var ErrStateConflict = errors.New("agent state changed underneath")

// ErrNoSuchAgent means the agent has no row yet.
var ErrNoSuchAgent = errors.New("no such agent")

// ErrNoSuchSession means the session does not exist.
var ErrNoSuchSession = errors.New("no such session")

// Agent is an agent's row.
type Agent struct {
	Name              string
	State             string
	SessionSeq        int64
	Mode              string
	Engine            string
	Branch            string
	Worktree          string
	ConsecutiveErrors int
	TotalErrors       int
	Tokens            int64
	Nudges            int
	StateSince        *time.Time
	HeartbeatAt       *time.Time
	Activity          string
}

// AgentInfo is the part of an agent's row that comes from configuration.
type AgentInfo struct {
	Name, Mode, Engine, Branch, Worktree string
}

// Event is one persisted transition.
type Event struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Agent      string    `json:"agent"`
	From       *string   `json:"from"`
	To         string    `json:"to"`
	Cause      string    `json:"cause"`
	SessionSeq int64     `json:"session_seq"`
}

// Change is one compare-and-set transition: the agent moves from From to To
// only if it is in From now.
type Change struct {
	Agent string
	From  string
	To    string
	Cause string
	Seq   int64 // the agent's session number after the change
}

// Session states.
const (
	SessionRunning     = "running"
	SessionCompleted   = "completed"
	SessionInterrupted = "interrupted"
	SessionFailed      = "failed"
	SessionTimeout     = "timeout"
	SessionCrashed     = "crashed"
)

// Session is a session's row.
type Session struct {
	ID        int64
	Agent     string
	Seq       int64
	State     string
	Engine    string
	StartedAt time.Time
	EndedAt   *time.Time
	Prompt    string
	Tasks     []string
	TokensIn  int64
	TokensOut int64
	Pgids     []int
	Error     string
}

const agentCols = `name, state, session_seq, mode, engine, branch, worktree, consecutive_errors, total_errors,
	tokens, nudges, state_since, heartbeat_at, activity`

func scanAgent(sc interface{ Scan(...any) error }) (Agent, error) {
	var a Agent
	var since, hb sql.NullInt64
	err := sc.Scan(&a.Name, &a.State, &a.SessionSeq, &a.Mode, &a.Engine, &a.Branch, &a.Worktree,
		&a.ConsecutiveErrors, &a.TotalErrors, &a.Tokens, &a.Nudges, &since, &hb, &a.Activity)
	if since.Valid {
		t := fromNanos(since.Int64)
		a.StateSince = &t
	}
	if hb.Valid {
		t := fromNanos(hb.Int64)
		a.HeartbeatAt = &t
	}
	return a, err
}

// RegisterAgent creates the agent's row in Stopped, or refreshes its
// configured fields, keeping its state and counters.
func (s *Store) RegisterAgent(ctx context.Context, info AgentInfo) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO agents (name, mode, engine, branch, worktree) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET mode = excluded.mode, engine = excluded.engine,
			branch = excluded.branch, worktree = excluded.worktree`,
		info.Name, info.Mode, info.Engine, info.Branch, info.Worktree)
	if err != nil {
		return fmt.Errorf("register agent %s: %w", info.Name, err)
	}
	return nil
}

// Agents returns every agent row, by name.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+agentCols+` FROM agents ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read agents: %w", err)
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Agent returns one agent's row.
func (s *Store) Agent(ctx context.Context, name string) (Agent, error) {
	return getAgent(ctx, s.db, name)
}

// Agent returns one agent's row inside the transaction.
func (t *Tx) Agent(name string) (Agent, error) {
	return getAgent(t.ctx, t.tx, name)
}

func getAgent(ctx context.Context, q execer, name string) (Agent, error) {
	a, err := scanAgent(q.QueryRowContext(ctx, `SELECT `+agentCols+` FROM agents WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("agent %s: %w", name, ErrNoSuchAgent)
	}
	return a, err
}

// Transition applies one change and records its event.
func (s *Store) Transition(ctx context.Context, c Change) (Event, error) {
	var ev Event
	err := s.InTx(ctx, func(tx *Tx) error {
		var err error
		ev, err = tx.Transition(c)
		return err
	})
	return ev, err
}

// Transition applies one compare-and-set change and records its event. The
// first event of an agent has no from state.
func (t *Tx) Transition(c Change) (Event, error) {
	ctx, now := t.ctx, t.now()
	// A transition is a sign of life too: the heartbeat is stamped with it.
	res, err := t.tx.ExecContext(ctx, `UPDATE agents SET state = ?, session_seq = ?, state_since = ?, heartbeat_at = ?
		WHERE name = ? AND state = ?`, c.To, c.Seq, now, now, c.Agent, c.From)
	if err != nil {
		return Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Agent, c.From, c.To, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Agent, c.From, c.To, ErrStateConflict)
	}
	var from any = c.From
	var seen int
	if err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM events WHERE agent = ? LIMIT 1)`, c.Agent).Scan(&seen); err != nil {
		return Event{}, err
	}
	if seen == 0 {
		from = nil
	}
	ev, err := scanEvent(t.tx.QueryRowContext(ctx, `INSERT INTO events (at, agent, from_state, to_state, cause, session_seq)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id, at, agent, from_state, to_state, cause, session_seq`,
		now, c.Agent, from, c.To, c.Cause, c.Seq))
	if err != nil {
		return Event{}, fmt.Errorf("record event: %w", err)
	}
	return ev, nil
}

func scanEvent(sc interface{ Scan(...any) error }) (Event, error) {
	var e Event
	var at int64
	var from sql.NullString
	err := sc.Scan(&e.ID, &at, &e.Agent, &from, &e.To, &e.Cause, &e.SessionSeq)
	e.At = fromNanos(at)
	if from.Valid {
		e.From = &from.String
	}
	return e, err
}

// EventFilter selects events.
type EventFilter struct {
	Agent   string
	SinceID int64 // events with id > SinceID
	Limit   int   // newest Limit; 0 means all
}

// Events returns events oldest first.
func (s *Store) Events(ctx context.Context, f EventFilter) ([]Event, error) {
	q := `SELECT id, at, agent, from_state, to_state, cause, session_seq FROM events WHERE id > ?`
	args := []any{f.SinceID}
	if f.Agent != "" {
		q += ` AND agent = ?`
		args = append(args, f.Agent)
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, rows.Err()
}

// Heartbeat stamps the named agents that are not Stopped: the ones this
// supervisor runs. Others keep their old stamp, so a crashed run's agents
// show as stale.
func (s *Store) Heartbeat(ctx context.Context, agents []string) error {
	if len(agents) == 0 {
		return nil
	}
	args := []any{nanos(s.now())}
	for _, a := range agents {
		args = append(args, a)
	}
	_, err := s.db.ExecContext(ctx, `UPDATE agents SET heartbeat_at = ? WHERE state <> 'Stopped' AND name IN (`+placeholders(len(agents))+`)`, args...)
	return err
}

// ResetErrors starts an agent's error counts over: the thresholds count
// errors within one run of the supervisor.
func (t *Tx) ResetErrors(agent string) error {
	_, err := t.tx.ExecContext(t.ctx, `UPDATE agents SET consecutive_errors = 0, total_errors = 0 WHERE name = ?`, agent)
	return err
}

// SetActivity records what an agent is doing, for status displays.
func (s *Store) SetActivity(ctx context.Context, agent, activity string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE agents SET activity = ? WHERE name = ?`, activity, agent)
	return err
}

// SetNudges records how many nudges an idle agent has had.
func (s *Store) SetNudges(ctx context.Context, agent string, n int) error {
	_, err := s.db.ExecContext(ctx, `UPDATE agents SET nudges = ? WHERE name = ?`, n, agent)
	return err
}

// Deliver moves the agent's queued mail into session seq inside the
// transaction.
func (t *Tx) Deliver(agent string, seq int64) ([]message.Message, error) {
	return deliver(t.ctx, t.tx, t.now(), agent, seq, nil)
}

// DeliverInto delivers the queued messages ids into the running session seq
// inside the transaction.
func (t *Tx) DeliverInto(agent string, seq int64, ids []int64) ([]message.Message, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return deliver(t.ctx, t.tx, t.now(), agent, seq, ids)
}

// StartSession records session seq as running with its prompt and the
// ready task ids it listed.
func (t *Tx) StartSession(agent string, seq int64, engine, prompt string, tasks []string) (int64, error) {
	if tasks == nil {
		tasks = []string{}
	}
	tj, _ := json.Marshal(tasks)
	var id int64
	err := t.tx.QueryRowContext(t.ctx, `INSERT INTO sessions (agent, seq, state, engine, started_at, prompt, tasks)
		VALUES (?, ?, 'running', ?, ?, ?, ?) RETURNING id`, agent, seq, engine, t.now(), prompt, string(tj)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("start session %s/%d: %w", agent, seq, err)
	}
	return id, nil
}

// SessionEnd is how a session ended.
type SessionEnd struct {
	Agent     string
	Seq       int64
	State     string // completed, interrupted, failed, timeout or crashed
	TokensIn  int64
	TokensOut int64
	Error     string
}

// EndSession closes a running session and settles its mail: done when it
// completed, queued again otherwise. It also updates the agent's counters:
// tokens, and errors (reset on completion, counted on failure or timeout).
func (t *Tx) EndSession(e SessionEnd) error {
	ctx := t.ctx
	res, err := t.tx.ExecContext(ctx, `UPDATE sessions SET state = ?, ended_at = ?, tokens_in = ?, tokens_out = ?, error = ?
		WHERE agent = ? AND seq = ? AND state = 'running'`, e.State, t.now(), e.TokensIn, e.TokensOut, e.Error, e.Agent, e.Seq)
	if err != nil {
		return fmt.Errorf("end session %s/%d: %w", e.Agent, e.Seq, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("end session %s/%d: %w (not running)", e.Agent, e.Seq, ErrNoSuchSession)
	}
	if e.State == SessionCompleted {
		_, err = t.tx.ExecContext(ctx, `UPDATE messages SET state = 'done', done_at = ?
			WHERE recipient = ? AND session_seq = ? AND state = 'delivered'`, t.now(), e.Agent, e.Seq)
	} else {
		_, err = t.tx.ExecContext(ctx, `UPDATE messages
			SET state = 'queued', session_seq = NULL, delivered_at = NULL, shown = shown + 1
			WHERE recipient = ? AND session_seq = ? AND state = 'delivered'`, e.Agent, e.Seq)
	}
	if err != nil {
		return fmt.Errorf("settle mail of %s/%d: %w", e.Agent, e.Seq, err)
	}
	counters := `tokens = tokens + ?`
	switch e.State {
	case SessionCompleted:
		counters += `, consecutive_errors = 0`
	case SessionFailed, SessionTimeout:
		counters += `, consecutive_errors = consecutive_errors + 1, total_errors = total_errors + 1`
	}
	_, err = t.tx.ExecContext(ctx, `UPDATE agents SET `+counters+` WHERE name = ?`, e.TokensIn+e.TokensOut, e.Agent)
	return err
}

// AddSessionPgid records a process group the session started, so recovery
// can kill it after a crash.
func (s *Store) AddSessionPgid(ctx context.Context, agent string, seq int64, pgid int) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET pgids = json_insert(pgids, '$[#]', ?)
		WHERE agent = ? AND seq = ?`, pgid, agent, seq)
	if err != nil {
		return fmt.Errorf("record process group of %s/%d: %w", agent, seq, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("record process group of %s/%d: %w", agent, seq, ErrNoSuchSession)
	}
	return nil
}

const sessionCols = `id, agent, seq, state, engine, started_at, ended_at, prompt, tasks, tokens_in, tokens_out, pgids, error`

func scanSession(sc interface{ Scan(...any) error }) (Session, error) {
	var (
		s       Session
		started int64
		ended   sql.NullInt64
		tasks   string
		pgids   string
	)
	err := sc.Scan(&s.ID, &s.Agent, &s.Seq, &s.State, &s.Engine, &started, &ended, &s.Prompt, &tasks,
		&s.TokensIn, &s.TokensOut, &pgids, &s.Error)
	if err != nil {
		return s, err
	}
	s.StartedAt = fromNanos(started)
	if ended.Valid {
		t := fromNanos(ended.Int64)
		s.EndedAt = &t
	}
	_ = json.Unmarshal([]byte(tasks), &s.Tasks)
	_ = json.Unmarshal([]byte(pgids), &s.Pgids)
	return s, nil
}

// Session returns one session.
func (s *Store) Session(ctx context.Context, agent string, seq int64) (Session, error) {
	sess, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = ? AND seq = ?`, agent, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return sess, fmt.Errorf("session %d of %s: %w", seq, agent, ErrNoSuchSession)
	}
	return sess, err
}

// LastSession returns the agent's newest session in the given state (any
// state when state is empty).
func (s *Store) LastSession(ctx context.Context, agent, state string) (Session, error) {
	q := `SELECT ` + sessionCols + ` FROM sessions WHERE agent = ?`
	args := []any{agent}
	if state != "" {
		q += ` AND state = ?`
		args = append(args, state)
	}
	sess, err := scanSession(s.db.QueryRowContext(ctx, q+` ORDER BY seq DESC LIMIT 1`, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return sess, fmt.Errorf("last session of %s: %w", agent, ErrNoSuchSession)
	}
	return sess, err
}

// Sessions lists an agent's sessions, oldest first.
func (s *Store) Sessions(ctx context.Context, agent string) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = ? ORDER BY seq`, agent)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}

// SessionCount counts every session, for the status footer.
func (s *Store) SessionCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sessions`).Scan(&n)
	return n, err
}

// Recovered is what Recover found and fixed for one agent.
type Recovered struct {
	Agent    string
	Sessions []Session // sessions left running, now crashed
	Requeued int64     // delivered mail queued again
}

// RecoverAgent fixes what a crash left for one agent, inside the
// transaction: sessions left running are recorded as crashed, and every
// message still delivered (no session of this agent runs now) is queued
// again. The caller kills the crashed sessions' process groups.
func (t *Tx) RecoverAgent(agent string) (Recovered, error) {
	ctx := t.ctx
	r := Recovered{Agent: agent}
	rows, err := t.tx.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = ? AND state = 'running'`, agent)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			rows.Close()
			return r, err
		}
		r.Sessions = append(r.Sessions, sess)
	}
	rows.Close()
	if _, err := t.tx.ExecContext(ctx, `UPDATE sessions SET state = 'crashed', ended_at = ?, error = 'the supervisor stopped unexpectedly'
		WHERE agent = ? AND state = 'running'`, t.now(), agent); err != nil {
		return r, err
	}
	res, err := t.tx.ExecContext(ctx, `UPDATE messages SET state = 'queued', session_seq = NULL, delivered_at = NULL, shown = shown + 1
		WHERE recipient = ? AND state = 'delivered'`, agent)
	if err != nil {
		return r, err
	}
	r.Requeued, _ = res.RowsAffected()
	return r, nil
}
