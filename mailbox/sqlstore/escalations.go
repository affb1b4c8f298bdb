package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
)

const escalationCols = `id, kind, severity, state, hold <> 0, agent, ref, summary, details, dedupe_key, count,
	created_at, acked_at, resolved_at, decision, note, shown_in, notified_state, notified_at, reminders, last_reminded_at`

// escalationOrder is the desk's order: the most severe first, then the
// newest first.
const escalationOrder = ` ORDER BY CASE severity WHEN 'critical' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END DESC, created_at DESC, id DESC`

func scanEscalation(sc Row) (escalation.Escalation, error) {
	var (
		e                                         escalation.Escalation
		agent, ref, details, decision             sql.NullString
		created                                   int64
		acked, resolved, shown, notifiedAt, remAt sql.NullInt64
	)
	err := sc.Scan(&e.ID, &e.Kind, &e.Severity, &e.State, &e.Hold, &agent, &ref, &e.Summary, &details, &e.DedupeKey, &e.Count,
		&created, &acked, &resolved, &decision, &e.Note, &shown, &e.Notified.State, &notifiedAt, &e.Notified.Reminders, &remAt)
	if err != nil {
		return e, err
	}
	if agent.Valid {
		e.Agent = &agent.String
	}
	if ref.Valid {
		e.Ref = &ref.String
	}
	if details.Valid {
		e.Details = []byte(details.String)
	}
	if decision.Valid {
		d := escalation.Decision(decision.String)
		e.Decision = &d
	}
	e.CreatedAt = fromNanos(created)
	e.AckedAt = optTime(acked)
	e.ResolvedAt = optTime(resolved)
	e.ShownIn = shown.Int64
	e.Notified.At = optTime(notifiedAt)
	e.Notified.LastRemindedAt = optTime(remAt)
	return e, nil
}

func getEscalation(ctx context.Context, q Querier, id int64) (escalation.Escalation, error) {
	e, err := scanEscalation(q.QueryRowContext(ctx, `SELECT `+escalationCols+` FROM escalations WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("escalation %d: %w", id, mailbox.ErrNoSuchEscalation)
	}
	if err != nil {
		return e, fmt.Errorf("read escalation %d: %w", id, err)
	}
	return e, nil
}

// Escalation returns one escalation.
func (s *Store) Escalation(ctx context.Context, id int64) (escalation.Escalation, error) {
	return getEscalation(ctx, s.db, id)
}

// Escalation returns one escalation inside the transaction.
func (t *Tx) Escalation(id int64) (escalation.Escalation, error) {
	return getEscalation(t.ctx, t.q, id)
}

// Escalations lists escalations as f selects them, in the desk's order.
func (s *Store) Escalations(ctx context.Context, f mailbox.EscalationFilter) ([]escalation.Escalation, error) {
	q := `SELECT ` + escalationCols + ` FROM escalations WHERE true`
	var args []any
	switch {
	case f.Unshown:
		q += ` AND state = 'resolved' AND shown_in IS NULL`
	case f.Unsettled:
		q += ` AND (state <> 'resolved' OR notified_state IN ('open', 'acked'))`
	case !f.All:
		q += ` AND state <> 'resolved'`
	}
	if f.Agent != "" {
		q += ` AND agent = ?`
		args = append(args, f.Agent)
	}
	rows, err := s.db.QueryContext(ctx, q+escalationOrder, args...)
	out, err := list(rows, err, scanEscalation)
	if err != nil {
		return nil, fmt.Errorf("read escalations: %w", err)
	}
	return out, nil
}

// EscalationsByRef lists the escalations about ref, newest first.
func (s *Store) EscalationsByRef(ctx context.Context, ref string, openOnly bool) ([]escalation.Escalation, error) {
	if ref == "" {
		return nil, nil
	}
	q := `SELECT ` + escalationCols + ` FROM escalations WHERE ref = ?`
	if openOnly {
		q += ` AND state <> 'resolved'`
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id DESC`, ref)
	out, err := list(rows, err, scanEscalation)
	if err != nil {
		return nil, fmt.Errorf("read the escalations about %s: %w", ref, err)
	}
	return out, nil
}

// SetNotified records the notifier's bookkeeping for one escalation.
func (s *Store) SetNotified(ctx context.Context, id int64, n escalation.Notified) error {
	res, err := s.db.ExecContext(ctx, `UPDATE escalations SET notified_state = ?, notified_at = ?, reminders = ?, last_reminded_at = ?
		WHERE id = ?`, n.State, optNanos(n.At), n.Reminders, optNanos(n.LastRemindedAt), id)
	if err != nil {
		return fmt.Errorf("record notification of escalation %d: %w", id, err)
	}
	if k, err := res.RowsAffected(); err != nil || k != 1 {
		return fmt.Errorf("record notification of escalation %d: %w", id, mailbox.ErrNoSuchEscalation)
	}
	return nil
}

// UnresolvedTwin returns the unresolved escalation with this dedupe key.
func (t *Tx) UnresolvedTwin(key string) (escalation.Escalation, bool, error) {
	e, err := scanEscalation(t.q.QueryRowContext(t.ctx, `SELECT `+escalationCols+` FROM escalations
		WHERE dedupe_key = ? AND state <> 'resolved'`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("look for an unresolved twin: %w", err)
	}
	return e, true, nil
}

// InsertEscalation stores a draft as an open escalation.
func (t *Tx) InsertEscalation(d escalation.Draft) (escalation.Escalation, error) {
	var details any
	if len(d.Details) > 0 {
		details = string(d.Details)
	}
	e, err := scanEscalation(t.q.QueryRowContext(t.ctx, `INSERT INTO escalations
		(kind, severity, state, hold, agent, ref, summary, details, dedupe_key, created_at)
		VALUES (?, ?, 'open', ?, ?, ?, ?, ?, ?, ?) RETURNING `+escalationCols,
		d.Kind, d.Severity, d.Hold, nullIfEmpty(d.Agent), nullIfEmpty(d.Ref), d.Summary, details, d.DedupeKey, t.now()))
	if err != nil {
		return e, fmt.Errorf("store escalation %q: %w", d.Summary, err)
	}
	return e, nil
}

// CountEscalation adds one to an unresolved escalation's count.
func (t *Tx) CountEscalation(id int64) (escalation.Escalation, error) {
	e, err := scanEscalation(t.q.QueryRowContext(t.ctx, `UPDATE escalations SET count = count + 1
		WHERE id = ? AND state <> 'resolved' RETURNING `+escalationCols, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("count escalation %d: %w (or it is resolved)", id, mailbox.ErrNoSuchEscalation)
	}
	return e, err
}

// SetDecision writes an escalation's decision and note.
func (t *Tx) SetDecision(id int64, d escalation.Decision, note string) error {
	var dec any
	if d != "" {
		dec = string(d)
	}
	res, err := t.q.ExecContext(t.ctx, `UPDATE escalations SET decision = coalesce(?, decision), note = ? WHERE id = ?`, dec, note, id)
	if err != nil {
		return fmt.Errorf("record the decision on escalation %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("record the decision on escalation %d: %w", id, mailbox.ErrNoSuchEscalation)
	}
	return nil
}

// MarkShown records the session whose prompt carried the decisions.
func (t *Tx) MarkShown(ids []int64, seq int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := appendAll([]any{seq}, ids)
	if _, err := t.q.ExecContext(t.ctx, `UPDATE escalations SET shown_in = ? WHERE id IN (`+In(len(ids))+`)`, args...); err != nil {
		return fmt.Errorf("record decisions shown in session %d: %w", seq, err)
	}
	return nil
}

// moveEscalation is Transition's compare-and-set for escalation subjects.
// It returns the escalation's agent for the event row.
func (t *Tx) moveEscalation(c fsm.Change) (any, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("move escalation %q: the subject must be its id", c.Subject)
	}
	var agent sql.NullString
	if c.From == "" {
		// The first change: the row was just stored in To, and nothing
		// moved it before.
		err = t.q.QueryRowContext(t.ctx, `SELECT agent FROM escalations WHERE id = ? AND state = ?
			AND NOT EXISTS (SELECT 1 FROM events WHERE subject_kind = 'escalation' AND subject = ?)`, id, c.To, c.Subject).Scan(&agent)
	} else {
		stamp, args := "", []any{c.To}
		switch escalation.State(c.To) {
		case escalation.Acked:
			stamp, args = `, acked_at = ?`, append(args, t.now())
		case escalation.Resolved:
			stamp, args = `, resolved_at = ?`, append(args, t.now())
		}
		err = t.q.QueryRowContext(t.ctx, `UPDATE escalations SET state = ?`+stamp+`
			WHERE id = ? AND state = ? RETURNING agent`, append(args, id, c.From)...).Scan(&agent)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("move escalation %d from %q to %s: %w", id, c.From, c.To, mailbox.ErrStateConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("move escalation %d from %q to %s: %w", id, c.From, c.To, err)
	}
	if agent.Valid {
		return agent.String, nil
	}
	return nil, nil
}

// MarkOperatorDone marks mail to operator done.
func (s *Store) MarkOperatorDone(ctx context.Context, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := appendAll([]any{nanos(s.Now())}, ids)
	res, err := s.db.ExecContext(ctx, `UPDATE messages SET state = 'done', done_at = ?
		WHERE recipient = 'operator' AND state <> 'done' AND id IN (`+In(len(ids))+`)`, args...)
	if err != nil {
		return 0, fmt.Errorf("mark operator mail done: %w", err)
	}
	return res.RowsAffected()
}
