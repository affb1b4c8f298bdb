package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
)

const agentCols = `name, state, session_seq, mode, engine, branch, worktree, consecutive_errors, total_errors,
	tokens, nudges, state_since, heartbeat_at, activity`

func scanAgent(sc pgx.Row) (mailbox.Agent, error) {
	var a mailbox.Agent
	var since, hb *int64
	err := sc.Scan(&a.Name, &a.State, &a.SessionSeq, &a.Mode, &a.Engine, &a.Branch, &a.Worktree,
		&a.ConsecutiveErrors, &a.TotalErrors, &a.Tokens, &a.Nudges, &since, &hb, &a.Activity)
	if since != nil {
		t := fromNanos(*since)
		a.StateSince = &t
	}
	if hb != nil {
		t := fromNanos(*hb)
		a.HeartbeatAt = &t
	}
	return a, err
}

// RegisterAgent creates the agent's row in Stopped, or refreshes its
// configured fields, keeping its state and counters.
func (s *Store) RegisterAgent(ctx context.Context, info mailbox.AgentInfo) error {
	err := s.fenced(ctx, info.Name, func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO agents (name, mode, engine, branch, worktree) VALUES ($1, $2, $3, $4, $5)
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
	rows, err := s.pool.Query(ctx, `SELECT `+agentCols+` FROM agents ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read agents: %w", err)
	}
	defer rows.Close()
	var out []mailbox.Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("read agents: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Agent returns one agent's row.
func (s *Store) Agent(ctx context.Context, name string) (mailbox.Agent, error) {
	return getAgent(ctx, s.pool, name)
}

// Agent returns one agent's row inside the transaction.
func (t *txn) Agent(name string) (mailbox.Agent, error) { return getAgent(t.ctx, t.tx, name) }

func getAgent(ctx context.Context, q querier, name string) (mailbox.Agent, error) {
	a, err := scanAgent(q.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("agent %s: %w", name, mailbox.ErrNoSuchAgent)
	}
	if err != nil {
		return a, fmt.Errorf("read agent %s: %w", name, err)
	}
	return a, nil
}

// Transition applies one compare-and-set change and records its event.
// Agent subjects move the agents row, escalation subjects the escalations
// row; the first event of a subject has no from state.
func (t *txn) Transition(c fsm.Change) (fsm.Event, error) {
	ctx, now := t.ctx, t.now()
	var agent *string
	switch c.Kind {
	case fsm.SubjectAgent:
		if err := t.fence(c.Subject); err != nil {
			return fsm.Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Subject, c.From, c.To, err)
		}
		// A transition is a sign of life too: the heartbeat is stamped with it.
		tag, err := t.tx.Exec(ctx, `UPDATE agents SET state = $1, session_seq = $2, state_since = $3, heartbeat_at = $3
			WHERE name = $4 AND state = $5`, c.To, c.Seq, now, c.Subject, c.From)
		if err != nil {
			return fsm.Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Subject, c.From, c.To, err)
		}
		if tag.RowsAffected() != 1 {
			return fsm.Event{}, fmt.Errorf("move %s from %s to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
		}
		agent = &c.Subject
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
			agent = &c.By
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
		agent = &a
	default:
		return fsm.Event{}, fmt.Errorf("move %s %s: subjects of this kind have no table yet", c.Kind, c.Subject)
	}
	var from *string
	if c.From != "" {
		var seen bool
		if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE subject_kind = $1 AND subject = $2)`,
			string(c.Kind), c.Subject).Scan(&seen); err != nil {
			return fsm.Event{}, fmt.Errorf("read the events of %s: %w", c.Subject, err)
		}
		if seen {
			from = &c.From
		}
	}
	ev, err := scanEvent(t.tx.QueryRow(ctx, `INSERT INTO events (at, subject_kind, subject, agent, from_state, to_state, cause, session_seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+eventCols,
		now, string(c.Kind), c.Subject, agent, from, c.To, c.Cause, c.Seq))
	if err != nil {
		return fsm.Event{}, fmt.Errorf("record event: %w", err)
	}
	return ev, nil
}

const eventCols = `id, at, subject_kind, subject, agent, from_state, to_state, cause, session_seq`

func scanEvent(sc pgx.Row) (fsm.Event, error) {
	var e fsm.Event
	var at int64
	err := sc.Scan(&e.ID, &at, &e.SubjectKind, &e.Subject, &e.Agent, &e.From, &e.To, &e.Cause, &e.SessionSeq)
	e.At = fromNanos(at)
	return e, err
}

// Events returns events oldest first.
func (s *Store) Events(ctx context.Context, f mailbox.EventFilter) ([]fsm.Event, error) {
	q := `SELECT ` + eventCols + ` FROM events WHERE id > $1`
	args := []any{f.SinceID}
	if f.Agent != "" {
		args = append(args, f.Agent)
		q += fmt.Sprintf(` AND agent = $%d`, len(args))
	}
	if f.Kind != "" {
		args = append(args, string(f.Kind))
		q += fmt.Sprintf(` AND subject_kind = $%d`, len(args))
	}
	if len(f.Subjects) > 0 {
		args = append(args, f.Subjects)
		q += fmt.Sprintf(` AND subject = ANY($%d)`, len(args))
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	var out []fsm.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// Heartbeat stamps the named agents that are not Stopped.
func (s *Store) Heartbeat(ctx context.Context, agents []string) error {
	if len(agents) == 0 {
		return nil
	}
	var lost []error
	err := s.InTx(ctx, func(tx mailbox.Tx) error {
		t := tx.(*txn)
		lost = nil
		var ours []string
		for _, a := range agents {
			// An agent whose lease was taken over is not ours to stamp.
			if err := t.fence(a); errors.Is(err, mailbox.ErrLeaseLost) {
				lost = append(lost, err)
				continue
			} else if err != nil {
				return err
			}
			ours = append(ours, a)
		}
		if len(ours) == 0 {
			return nil
		}
		_, err := t.tx.Exec(ctx, `UPDATE agents SET heartbeat_at = $1 WHERE state <> $2 AND name = ANY($3)`,
			nanos(s.now()), string(lifecycle.Stopped), ours)
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

// ResetErrors starts an agent's error counts over.
func (t *txn) ResetErrors(agent string) error {
	if err := t.fence(agent); err != nil {
		return fmt.Errorf("reset the error counts of %s: %w", agent, err)
	}
	_, err := t.tx.Exec(t.ctx, `UPDATE agents SET consecutive_errors = 0, total_errors = 0 WHERE name = $1`, agent)
	if err != nil {
		return fmt.Errorf("reset the error counts of %s: %w", agent, err)
	}
	return nil
}

// SetActivity records what an agent is doing.
func (s *Store) SetActivity(ctx context.Context, agent, activity string) error {
	if err := s.fenced(ctx, agent, func(q querier) error {
		_, err := q.Exec(ctx, `UPDATE agents SET activity = $1 WHERE name = $2`, activity, agent)
		return err
	}); err != nil {
		return fmt.Errorf("record the activity of %s: %w", agent, err)
	}
	return nil
}

// SetNudges records how many nudges an idle agent has had.
func (s *Store) SetNudges(ctx context.Context, agent string, n int) error {
	if err := s.fenced(ctx, agent, func(q querier) error {
		_, err := q.Exec(ctx, `UPDATE agents SET nudges = $1 WHERE name = $2`, n, agent)
		return err
	}); err != nil {
		return fmt.Errorf("record the nudges of %s: %w", agent, err)
	}
	return nil
}

// StartSession records a session as running.
func (t *txn) StartSession(st mailbox.SessionStart) error {
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
	var caps *string
	if st.Capabilities != nil {
		j := st.Capabilities.JSON()
		caps = &j
	}
	_, err = t.tx.Exec(t.ctx, `INSERT INTO sessions (agent, seq, state, engine, started_at, prompt, tasks, capabilities)
		VALUES ($1, $2, 'running', $3, $4, $5, $6, $7)`, st.Agent, st.Seq, st.Engine, t.now(), st.Prompt, string(tj), caps)
	if pgCode(err) == codeUnique {
		return fmt.Errorf("start session %s/%d: the agent already has a session %d", st.Agent, st.Seq, st.Seq)
	}
	if err != nil {
		return fmt.Errorf("start session %s/%d: %w", st.Agent, st.Seq, err)
	}
	return nil
}

// EndSession closes a running session, settles its mail and updates the
// agent's counters.
func (t *txn) EndSession(e mailbox.SessionEnd) error {
	ctx := t.ctx
	if err := t.fence(e.Agent); err != nil {
		return fmt.Errorf("end session %s/%d: %w", e.Agent, e.Seq, err)
	}
	tag, err := t.tx.Exec(ctx, `UPDATE sessions SET state = $1, ended_at = $2, tokens_in = $3, tokens_out = $4,
		cache_write = $5, cache_read = $6, error = $7, cost_usd = $10
		WHERE agent = $8 AND seq = $9 AND state = 'running'`, string(e.State), t.now(), e.TokensIn, e.TokensOut,
		e.CacheWrite, e.CacheRead, e.Error, e.Agent, e.Seq, e.CostUSD)
	if err != nil {
		return fmt.Errorf("end session %s/%d: %w", e.Agent, e.Seq, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("end session %s/%d: %w (not running)", e.Agent, e.Seq, mailbox.ErrNoSuchSession)
	}
	if _, err := settle(ctx, t.tx, t.now(), e.Agent, e.Seq, e.State == mailbox.SessionCompleted); err != nil {
		return err
	}
	counters := `tokens = tokens + $1`
	switch e.State {
	case mailbox.SessionCompleted:
		counters += `, consecutive_errors = 0`
	case mailbox.SessionFailed, mailbox.SessionTimeout:
		counters += `, consecutive_errors = consecutive_errors + 1, total_errors = total_errors + 1`
	}
	if _, err := t.tx.Exec(ctx, `UPDATE agents SET `+counters+` WHERE name = $2`, e.TokensIn+e.TokensOut+e.CacheWrite, e.Agent); err != nil {
		return fmt.Errorf("count session %s/%d: %w", e.Agent, e.Seq, err)
	}
	return nil
}

// AddSessionPgid records a process group the session started.
func (s *Store) AddSessionPgid(ctx context.Context, agent string, seq int64, pgid int) error {
	var n int64
	err := s.fenced(ctx, agent, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE sessions SET pgids = (pgids::jsonb || to_jsonb($1::bigint))::text
			WHERE agent = $2 AND seq = $3`, pgid, agent, seq)
		n = tag.RowsAffected()
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

func scanSession(sc pgx.Row) (mailbox.Session, error) {
	var (
		s       mailbox.Session
		started int64
		ended   *int64
		tasks   string
		pgids   string
		caps    *string
	)
	err := sc.Scan(&s.ID, &s.Agent, &s.Seq, &s.State, &s.Engine, &started, &ended, &s.Prompt, &tasks,
		&s.TokensIn, &s.TokensOut, &s.CacheWrite, &s.CacheRead, &s.CostUSD, &pgids, &s.Error, &caps)
	if err != nil {
		return s, err
	}
	s.StartedAt = fromNanos(started)
	if ended != nil {
		t := fromNanos(*ended)
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
	if caps != nil {
		v, err := mode.ParseVector(*caps)
		if err != nil {
			return s, fmt.Errorf("session %d of %s: %w", s.Seq, s.Agent, err)
		}
		s.Capabilities = v
	}
	return s, nil
}

// Session returns one session.
func (s *Store) Session(ctx context.Context, agent string, seq int64) (mailbox.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = $1 AND seq = $2`, agent, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return sess, fmt.Errorf("session %d of %s: %w", seq, agent, mailbox.ErrNoSuchSession)
	}
	if err != nil {
		return sess, fmt.Errorf("read session %d of %s: %w", seq, agent, err)
	}
	return sess, nil
}

// LastSession returns the agent's newest session in the given state (any
// state when state is empty).
func (s *Store) LastSession(ctx context.Context, agent string, state mailbox.SessionState) (mailbox.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions
		WHERE agent = $1 AND ($2 = '' OR state = $2) ORDER BY seq DESC LIMIT 1`, agent, string(state)))
	if errors.Is(err, pgx.ErrNoRows) {
		return sess, fmt.Errorf("last session of %s: %w", agent, mailbox.ErrNoSuchSession)
	}
	if err != nil {
		return sess, fmt.Errorf("read the last session of %s: %w", agent, err)
	}
	return sess, nil
}

// SessionCount counts every session.
func (s *Store) SessionCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sessions`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// RecoverAgent fixes what a crash left for one agent, inside the
// transaction: sessions left running are recorded as crashed, and every
// message still delivered is queued again.
func (t *txn) RecoverAgent(agent string) (mailbox.Recovered, error) {
	ctx := t.ctx
	r := mailbox.Recovered{Agent: agent}
	if err := t.fence(agent); err != nil {
		return r, fmt.Errorf("recover %s: %w", agent, err)
	}
	rows, err := t.tx.Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = $1 AND state = 'running' ORDER BY seq`, agent)
	if err != nil {
		return r, fmt.Errorf("recover %s: %w", agent, err)
	}
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			rows.Close()
			return r, fmt.Errorf("recover %s: %w", agent, err)
		}
		r.Sessions = append(r.Sessions, sess)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("recover %s: %w", agent, err)
	}
	if _, err := t.tx.Exec(ctx, `UPDATE sessions SET state = 'crashed', ended_at = $1, error = 'the supervisor stopped unexpectedly'
		WHERE agent = $2 AND state = 'running'`, t.now(), agent); err != nil {
		return r, fmt.Errorf("recover %s: %w", agent, err)
	}
	r.Requeued, err = settle(ctx, t.tx, t.now(), agent, 0, false)
	return r, err
}

// AddReport stores a report.
func (s *Store) AddReport(ctx context.Context, r mailbox.Report) (mailbox.Report, error) {
	if err := r.Check(); err != nil {
		return r, err
	}
	now := nanos(s.now())
	err := s.pool.QueryRow(ctx, `INSERT INTO reports (agent, session_seq, kind, task, message, at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		r.Agent, r.SessionSeq, string(r.Kind), r.Task, r.Message, now).Scan(&r.ID)
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
	err := s.pool.QueryRow(ctx, `SELECT id, agent, session_seq, kind, task, message, at FROM reports WHERE agent = $1 ORDER BY id DESC LIMIT 1`, agent).
		Scan(&r.ID, &r.Agent, &r.SessionSeq, &r.Kind, &r.Task, &r.Message, &at)
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := s.pool.Query(ctx, `SELECT r.id, r.agent, r.session_seq, r.kind, r.task, r.message, r.at FROM reports r
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
	rows, err := s.pool.Query(ctx, `SELECT s.agent, s.capabilities FROM sessions s
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
	rows, err := s.pool.Query(ctx, `SELECT agent, sum(tokens_in)::bigint, sum(tokens_out)::bigint, sum(cache_write)::bigint, sum(cache_read)::bigint,
		coalesce(sum(cost_usd), 0)::double precision, (count(*) - count(cost_usd))::bigint
		FROM sessions WHERE ended_at >= $1 GROUP BY agent`, nanos(since))
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
