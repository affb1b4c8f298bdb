package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
)

const agentCols = `name, state, session_seq, mode, engine, branch, worktree, consecutive_errors, total_errors,
	tokens, nudges, state_since, heartbeat_at, activity`

func scanAgent(sc Row) (mailbox.Agent, error) {
	var a mailbox.Agent
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
func (s *Store) RegisterAgent(ctx context.Context, info mailbox.AgentInfo) error {
	err := s.fenced(ctx, info.Name, func(q Querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO agents (name, mode, engine, branch, worktree) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET mode = excluded.mode, engine = excluded.engine,
				branch = excluded.branch, worktree = excluded.worktree`,
			info.Name, info.Mode, info.Engine, info.Branch, info.Worktree)
		return err
	})
	if err != nil {
		return fmt.Errorf("register agent %s: %w", info.Name, err)
	}
	return nil
}

// Agents returns every agent row, by name.
func (s *Store) Agents(ctx context.Context) ([]mailbox.Agent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+agentCols+` FROM agents ORDER BY name`)
	out, err := list(rows, err, scanAgent)
	if err != nil {
		return nil, fmt.Errorf("read agents: %w", err)
	}
	return out, nil
}

// Agent returns one agent's row.
func (s *Store) Agent(ctx context.Context, name string) (mailbox.Agent, error) {
	return getAgent(ctx, s.db, name)
}

// Agent returns one agent's row inside the transaction.
func (t *Tx) Agent(name string) (mailbox.Agent, error) { return getAgent(t.ctx, t.q, name) }

func getAgent(ctx context.Context, q Querier, name string) (mailbox.Agent, error) {
	a, err := scanAgent(q.QueryRowContext(ctx, `SELECT `+agentCols+` FROM agents WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("agent %s: %w", name, mailbox.ErrNoSuchAgent)
	}
	return a, err
}

// Transition applies one compare-and-set change and records its event.
// Agent subjects move the agents row, escalation subjects the escalations
// row; the first event of a subject has no from state.
func (t *Tx) Transition(c fsm.Change) (fsm.Event, error) {
	ctx, now := t.ctx, t.now()
	var agent any
	switch c.Kind {
	case fsm.SubjectAgent:
		if err := t.fence(c.Subject); err != nil {
			return fsm.Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Subject, c.From, c.To, err)
		}
		// A transition is a sign of life too: the heartbeat is stamped with it.
		res, err := t.q.ExecContext(ctx, `UPDATE agents SET state = ?, session_seq = ?, state_since = ?, heartbeat_at = ?
			WHERE name = ? AND state = ?`, c.To, c.Seq, now, now, c.Subject, c.From)
		if err != nil {
			return fsm.Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Subject, c.From, c.To, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fsm.Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
		}
		agent = c.Subject
	case fsm.SubjectEscalation:
		a, err := t.moveEscalation(c)
		if err != nil {
			return fsm.Event{}, err
		}
		agent = a
	case fsm.SubjectItem:
		if err := t.moveItem(c); err != nil {
			return fsm.Event{}, err
		}
		if c.By != "" {
			agent = c.By
		}
	case fsm.SubjectTeam:
		if err := t.moveTeam(c); err != nil {
			return fsm.Event{}, err
		}
	case fsm.SubjectMerge:
		a, err := t.moveCandidate(c)
		if err != nil {
			return fsm.Event{}, err
		}
		agent = a
	default:
		return fsm.Event{}, fmt.Errorf("move %s %s: subjects of this kind have no table yet", c.Kind, c.Subject)
	}
	var from any = c.From
	var seen int
	if err := t.q.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM events WHERE subject_kind = ? AND subject = ? LIMIT 1) AS found`,
		c.Kind, c.Subject).Scan(&seen); err != nil {
		return fsm.Event{}, err
	}
	if seen == 0 || c.From == "" {
		from = nil
	}
	ev, err := scanEvent(t.q.QueryRowContext(ctx, `INSERT INTO events (at, subject_kind, subject, agent, from_state, to_state, cause, session_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+eventCols,
		now, c.Kind, c.Subject, agent, from, c.To, c.Cause, c.Seq))
	if err != nil {
		return fsm.Event{}, fmt.Errorf("record event: %w", err)
	}
	return ev, nil
}

const eventCols = `id, at, subject_kind, subject, agent, from_state, to_state, cause, session_seq`

func scanEvent(sc Row) (fsm.Event, error) {
	var e fsm.Event
	var at int64
	var agent, from sql.NullString
	err := sc.Scan(&e.ID, &at, &e.SubjectKind, &e.Subject, &agent, &from, &e.To, &e.Cause, &e.SessionSeq)
	e.At = fromNanos(at)
	if agent.Valid {
		e.Agent = &agent.String
	}
	if from.Valid {
		e.From = &from.String
	}
	return e, err
}

// Events returns events oldest first.
func (s *Store) Events(ctx context.Context, f mailbox.EventFilter) ([]fsm.Event, error) {
	q := `SELECT ` + eventCols + ` FROM events WHERE id > ?`
	args := []any{f.SinceID}
	if f.Agent != "" {
		q += ` AND agent = ?`
		args = append(args, f.Agent)
	}
	if f.Kind != "" {
		q += ` AND subject_kind = ?`
		args = append(args, f.Kind)
	}
	if len(f.Subjects) > 0 {
		q += ` AND subject IN (` + In(len(f.Subjects)) + `)`
		args = appendAll(args, f.Subjects)
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
	var out []fsm.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// Heartbeat stamps the named agents that are not Stopped: the ones this
// supervisor runs. Others keep their old stamp, so a crashed run's agents
// show as stale.
func (s *Store) Heartbeat(ctx context.Context, agents []string) error {
	if len(agents) == 0 {
		return nil
	}
	var lost []error
	err := s.InTx(ctx, func(tx mailbox.Tx) error {
		t := tx.(*Tx)
		lost = nil
		args := []any{nanos(s.Now()), string(lifecycle.Stopped)}
		for _, a := range agents {
			// An agent whose lease was taken over is not ours to stamp.
			if err := t.fence(a); errors.Is(err, mailbox.ErrLeaseLost) {
				lost = append(lost, err)
				continue
			} else if err != nil {
				return err
			}
			args = append(args, a)
		}
		if len(args) == 2 {
			return nil
		}
		_, err := t.q.ExecContext(ctx, `UPDATE agents SET heartbeat_at = ? WHERE state <> ? AND name IN (`+In(len(args)-2)+`)`, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if len(lost) > 0 {
		return fmt.Errorf("heartbeat: %w", errors.Join(lost...))
	}
	return nil
}

// ResetErrors starts an agent's error counts over: the thresholds count
// errors within one run of the supervisor.
func (t *Tx) ResetErrors(agent string) error {
	if err := t.fence(agent); err != nil {
		return fmt.Errorf("reset the error counts of %s: %w", agent, err)
	}
	_, err := t.q.ExecContext(t.ctx, `UPDATE agents SET consecutive_errors = 0, total_errors = 0 WHERE name = ?`, agent)
	if err != nil {
		return fmt.Errorf("reset the error counts of %s: %w", agent, err)
	}
	return nil
}

// SetActivity records what an agent is doing.
func (s *Store) SetActivity(ctx context.Context, agent, activity string) error {
	if err := s.fenced(ctx, agent, func(q Querier) error {
		_, err := q.ExecContext(ctx, `UPDATE agents SET activity = ? WHERE name = ?`, activity, agent)
		return err
	}); err != nil {
		return fmt.Errorf("record the activity of %s: %w", agent, err)
	}
	return nil
}

// SetNudges records how many nudges an idle agent has had.
func (s *Store) SetNudges(ctx context.Context, agent string, n int) error {
	if err := s.fenced(ctx, agent, func(q Querier) error {
		_, err := q.ExecContext(ctx, `UPDATE agents SET nudges = ? WHERE name = ?`, n, agent)
		return err
	}); err != nil {
		return fmt.Errorf("record the nudges of %s: %w", agent, err)
	}
	return nil
}

// StartSession records a session as running with its prompt and the ready
// task ids it listed.
func (t *Tx) StartSession(st mailbox.SessionStart) error {
	if err := t.fence(st.Agent); err != nil {
		return fmt.Errorf("start session %s/%d: %w", st.Agent, st.Seq, err)
	}
	tasks := st.Tasks
	if tasks == nil {
		tasks = []string{}
	}
	tj, err := json.Marshal(tasks)
	if err != nil {
		return err
	}
	var caps any
	if st.Capabilities != nil {
		caps = st.Capabilities.JSON()
	}
	_, err = t.q.ExecContext(t.ctx, `INSERT INTO sessions (agent, seq, state, engine, started_at, prompt, tasks, capabilities)
		VALUES (?, ?, 'running', ?, ?, ?, ?, ?)`, st.Agent, st.Seq, st.Engine, t.now(), st.Prompt, string(tj), caps)
	if _, unique := t.s.dialect.Unique(err); unique {
		return fmt.Errorf("start session %s/%d: the agent already has a session %d", st.Agent, st.Seq, st.Seq)
	}
	if err != nil {
		return fmt.Errorf("start session %s/%d: %w", st.Agent, st.Seq, err)
	}
	return nil
}

// EndSession closes a running session, settles its mail and updates the
// agent's counters: tokens, and errors (reset on completion, counted on
// failure or timeout).
func (t *Tx) EndSession(e mailbox.SessionEnd) error {
	ctx := t.ctx
	if err := t.fence(e.Agent); err != nil {
		return fmt.Errorf("end session %s/%d: %w", e.Agent, e.Seq, err)
	}
	res, err := t.q.ExecContext(ctx, `UPDATE sessions SET state = ?, ended_at = ?, tokens_in = ?, tokens_out = ?,
		cache_write = ?, cache_read = ?, cost_usd = ?, error = ?
		WHERE agent = ? AND seq = ? AND state = 'running'`, e.State, t.now(), e.TokensIn, e.TokensOut,
		e.CacheWrite, e.CacheRead, e.CostUSD, e.Error, e.Agent, e.Seq)
	if err != nil {
		return fmt.Errorf("end session %s/%d: %w", e.Agent, e.Seq, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("end session %s/%d: %w (not running)", e.Agent, e.Seq, mailbox.ErrNoSuchSession)
	}
	if _, err := settle(ctx, t.q, t.now(), e.Agent, e.Seq, e.State == mailbox.SessionCompleted); err != nil {
		return err
	}
	counters := `tokens = tokens + ?`
	switch e.State {
	case mailbox.SessionCompleted:
		counters += `, consecutive_errors = 0`
	case mailbox.SessionFailed, mailbox.SessionTimeout:
		counters += `, consecutive_errors = consecutive_errors + 1, total_errors = total_errors + 1`
	}
	if _, err := t.q.ExecContext(ctx, `UPDATE agents SET `+counters+` WHERE name = ?`, e.TokensIn+e.TokensOut+e.CacheWrite, e.Agent); err != nil {
		return fmt.Errorf("count session %s/%d: %w", e.Agent, e.Seq, err)
	}
	return nil
}

// AddSessionPgid records a process group the session started.
func (s *Store) AddSessionPgid(ctx context.Context, agent string, seq int64, pgid int) error {
	var n int64
	err := s.fenced(ctx, agent, func(q Querier) error {
		res, err := q.ExecContext(ctx, `UPDATE sessions SET pgids = `+s.dialect.AppendInt("pgids")+`
			WHERE agent = ? AND seq = ?`, int64(pgid), agent, seq)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("record process group of %s/%d: %w", agent, seq, err)
	}
	if n != 1 {
		return fmt.Errorf("record process group of %s/%d: %w", agent, seq, mailbox.ErrNoSuchSession)
	}
	return nil
}

const sessionCols = `id, agent, seq, state, engine, started_at, ended_at, prompt, tasks, tokens_in, tokens_out,
	cache_write, cache_read, cost_usd, pgids, error, capabilities`

func scanSession(sc Row) (mailbox.Session, error) {
	var (
		s       mailbox.Session
		started int64
		ended   sql.NullInt64
		tasks   string
		pgids   string
		caps    sql.NullString
	)
	err := sc.Scan(&s.ID, &s.Agent, &s.Seq, &s.State, &s.Engine, &started, &ended, &s.Prompt, &tasks,
		&s.TokensIn, &s.TokensOut, &s.CacheWrite, &s.CacheRead, &s.CostUSD, &pgids, &s.Error, &caps)
	if err != nil {
		return s, err
	}
	s.StartedAt = fromNanos(started)
	if ended.Valid {
		t := fromNanos(ended.Int64)
		s.EndedAt = &t
	}
	// Both columns are written only by this package as JSON arrays; a
	// hand-edited bad value reads as empty rather than failing status.
	if err := json.Unmarshal([]byte(tasks), &s.Tasks); err != nil {
		s.Tasks = nil
	}
	if err := json.Unmarshal([]byte(pgids), &s.Pgids); err != nil {
		s.Pgids = nil
	}
	if caps.Valid {
		v, err := mode.ParseVector(caps.String)
		if err != nil {
			return s, fmt.Errorf("session %d of %s: %w", s.Seq, s.Agent, err)
		}
		s.Capabilities = v
	}
	return s, nil
}

// Session returns one session.
func (s *Store) Session(ctx context.Context, agent string, seq int64) (mailbox.Session, error) {
	sess, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = ? AND seq = ?`, agent, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return sess, fmt.Errorf("session %d of %s: %w", seq, agent, mailbox.ErrNoSuchSession)
	}
	return sess, err
}

// LastSession returns the agent's newest session in the given state (any
// state when state is empty).
func (s *Store) LastSession(ctx context.Context, agent string, state mailbox.SessionState) (mailbox.Session, error) {
	q := `SELECT ` + sessionCols + ` FROM sessions WHERE agent = ?`
	args := []any{agent}
	if state != "" {
		q += ` AND state = ?`
		args = append(args, state)
	}
	sess, err := scanSession(s.db.QueryRowContext(ctx, q+` ORDER BY seq DESC LIMIT 1`, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return sess, fmt.Errorf("last session of %s: %w", agent, mailbox.ErrNoSuchSession)
	}
	return sess, err
}

// SessionCount counts every session.
func (s *Store) SessionCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sessions`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// RecoverAgent fixes what a crash left for one agent, inside the
// transaction: sessions left running are recorded as crashed, and every
// message still delivered (no session of this agent runs now) is queued
// again. The caller kills the crashed sessions' process groups.
func (t *Tx) RecoverAgent(agent string) (mailbox.Recovered, error) {
	ctx := t.ctx
	r := mailbox.Recovered{Agent: agent}
	if err := t.fence(agent); err != nil {
		return r, fmt.Errorf("recover %s: %w", agent, err)
	}
	rows, err := t.q.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = ? AND state = 'running'`, agent)
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
	if err := rows.Err(); err != nil {
		return r, err
	}
	if _, err := t.q.ExecContext(ctx, `UPDATE sessions SET state = 'crashed', ended_at = ?, error = 'the supervisor stopped unexpectedly'
		WHERE agent = ? AND state = 'running'`, t.now(), agent); err != nil {
		return r, err
	}
	r.Requeued, err = settle(ctx, t.q, t.now(), agent, 0, false)
	return r, err
}

// AddReport stores a report.
func (s *Store) AddReport(ctx context.Context, r mailbox.Report) (mailbox.Report, error) {
	if err := r.Check(); err != nil {
		return r, err
	}
	now := nanos(s.Now())
	// In a transaction: SQLite's waits out a busy database at BEGIN, as
	// a lone write does, and RETURNING id reads the id on both backends.
	err := s.db.InTx(ctx, func(q Querier) error {
		return q.QueryRowContext(ctx, `INSERT INTO reports (agent, session_seq, kind, task, message, at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			r.Agent, r.SessionSeq, r.Kind, r.Task, r.Message, now).Scan(&r.ID)
	})
	if err != nil {
		return r, fmt.Errorf("store the report of %s: %w", r.Agent, err)
	}
	r.At = fromNanos(now)
	return r, nil
}

// LastReport returns the agent's newest report.
func (s *Store) LastReport(ctx context.Context, agent string) (mailbox.Report, error) {
	var (
		r  mailbox.Report
		at int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT id, agent, session_seq, kind, task, message, at FROM reports WHERE agent = ? ORDER BY id DESC LIMIT 1`, agent).
		Scan(&r.ID, &r.Agent, &r.SessionSeq, &r.Kind, &r.Task, &r.Message, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("last report of %s: %w", agent, mailbox.ErrNoReport)
	}
	if err != nil {
		return r, fmt.Errorf("read the last report of %s: %w", agent, err)
	}
	r.At = fromNanos(at)
	return r, nil
}

// LastReports returns every agent's newest report in one grouped query.
func (s *Store) LastReports(ctx context.Context) (map[string]mailbox.Report, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.id, r.agent, r.session_seq, r.kind, r.task, r.message, r.at FROM reports r
		JOIN (SELECT max(id) AS id FROM reports GROUP BY agent) m ON r.id = m.id`)
	if err != nil {
		return nil, fmt.Errorf("read the last reports: %w", err)
	}
	defer rows.Close()
	out := map[string]mailbox.Report{}
	for rows.Next() {
		var (
			r  mailbox.Report
			at int64
		)
		if err := rows.Scan(&r.ID, &r.Agent, &r.SessionSeq, &r.Kind, &r.Task, &r.Message, &at); err != nil {
			return nil, fmt.Errorf("read the last reports: %w", err)
		}
		r.At = fromNanos(at)
		out[r.Agent] = r
	}
	return out, rows.Err()
}

// LastCapabilities returns the vector of every agent's newest session in
// one grouped query.
func (s *Store) LastCapabilities(ctx context.Context) (map[string]mode.Vector, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT s.agent, s.capabilities FROM sessions s
		JOIN (SELECT agent, max(seq) AS seq FROM sessions GROUP BY agent) m ON s.agent = m.agent AND s.seq = m.seq
		WHERE s.capabilities IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read the last sessions' capabilities: %w", err)
	}
	defer rows.Close()
	out := map[string]mode.Vector{}
	for rows.Next() {
		var agent, caps string
		if err := rows.Scan(&agent, &caps); err != nil {
			return nil, fmt.Errorf("read the last sessions' capabilities: %w", err)
		}
		v, err := mode.ParseVector(caps)
		if err != nil {
			return nil, fmt.Errorf("the last session of %s: %w", agent, err)
		}
		out[agent] = v
	}
	return out, rows.Err()
}

// UsageSince sums each agent's tokens over the sessions that ended at or
// after since.
func (s *Store) UsageSince(ctx context.Context, since time.Time) (map[string]mailbox.Usage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT agent, CAST(sum(tokens_in) AS BIGINT), CAST(sum(tokens_out) AS BIGINT),
		CAST(sum(cache_write) AS BIGINT), CAST(sum(cache_read) AS BIGINT),
		CAST(coalesce(sum(cost_usd), 0) AS DOUBLE PRECISION), count(*) - count(cost_usd)
		FROM sessions WHERE ended_at >= ? GROUP BY agent`, nanos(since))
	if err != nil {
		return nil, fmt.Errorf("sum the sessions' tokens: %w", err)
	}
	defer rows.Close()
	out := map[string]mailbox.Usage{}
	for rows.Next() {
		var agent string
		var u mailbox.Usage
		if err := rows.Scan(&agent, &u.Input, &u.Output, &u.CacheWrite, &u.CacheRead, &u.CostUSD, &u.Unpriced); err != nil {
			return nil, fmt.Errorf("sum the sessions' tokens: %w", err)
		}
		out[agent] = u
	}
	return out, rows.Err()
}
