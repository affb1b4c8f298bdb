package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
)

const escalationCols = `id, kind, severity, state, hold <> 0, agent, ref, summary, details, dedupe_key, count,
	created_at, acked_at, resolved_at, decision, note, shown_in, notified_state, notified_at, reminders, last_reminded_at`

// escalationOrder is the desk's order: the most severe first, then the
// newest first.
const escalationOrder = ` ORDER BY CASE severity WHEN 'critical' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END DESC, created_at DESC, id DESC`

func scanEscalation(sc pgx.Row) (escalation.Escalation, error) {
	var (
		e                                         escalation.Escalation
		details, decision                         *string
		created                                   int64
		acked, resolved, shown, notifiedAt, remAt *int64
	)
	err := sc.Scan(&e.ID, &e.Kind, &e.Severity, &e.State, &e.Hold, &e.Agent, &e.Ref, &e.Summary, &details, &e.DedupeKey, &e.Count,
		&created, &acked, &resolved, &decision, &e.Note, &shown, &e.Notified.State, &notifiedAt, &e.Notified.Reminders, &remAt)
	if err != nil {
		return e, err
	}
	if details != nil {
		e.Details = []byte(*details)
	}
	if decision != nil {
		d := escalation.Decision(*decision)
		e.Decision = &d
	}
	e.CreatedAt = fromNanos(created)
	e.AckedAt = optTime(acked)
	e.ResolvedAt = optTime(resolved)
	if shown != nil {
		e.ShownIn = *shown
	}
	e.Notified.At = optTime(notifiedAt)
	e.Notified.LastRemindedAt = optTime(remAt)
	return e, nil
}

func optTime(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := fromNanos(*n)
	return &t
}

func optNanos(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := nanos(*t)
	return &n
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func getEscalation(ctx context.Context, q querier, id int64) (escalation.Escalation, error) {
	e, err := scanEscalation(q.QueryRow(ctx, `SELECT `+escalationCols+` FROM escalations WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("escalation %d: %w", id, mailbox.ErrNoSuchEscalation)
	}
	if err != nil {
		return e, fmt.Errorf("read escalation %d: %w", id, err)
	}
	return e, nil
}

// Escalation returns one escalation.
func (s *Store) Escalation(ctx context.Context, id int64) (escalation.Escalation, error) {
	return getEscalation(ctx, s.pool, id)
}

// Escalation returns one escalation inside the transaction.
func (t *txn) Escalation(id int64) (escalation.Escalation, error) {
	return getEscalation(t.ctx, t.tx, id)
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
		q += ` AND agent = $1`
		args = append(args, f.Agent)
	}
	rows, err := s.pool.Query(ctx, q+escalationOrder, args...)
	if err != nil {
		return nil, fmt.Errorf("read escalations: %w", err)
	}
	defer rows.Close()
	var out []escalation.Escalation
	for rows.Next() {
		e, err := scanEscalation(rows)
		if err != nil {
			return nil, fmt.Errorf("read escalations: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read escalations: %w", err)
	}
	return out, nil
}

// SetNotified records the notifier's bookkeeping for one escalation.
func (s *Store) SetNotified(ctx context.Context, id int64, n escalation.Notified) error {
	tag, err := s.pool.Exec(ctx, `UPDATE escalations SET notified_state = $1, notified_at = $2, reminders = $3, last_reminded_at = $4
		WHERE id = $5`, string(n.State), optNanos(n.At), n.Reminders, optNanos(n.LastRemindedAt), id)
	if err != nil {
		return fmt.Errorf("record notification of escalation %d: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("record notification of escalation %d: %w", id, mailbox.ErrNoSuchEscalation)
	}
	return nil
}

// UnresolvedTwin returns the unresolved escalation with this dedupe key.
func (t *txn) UnresolvedTwin(key string) (escalation.Escalation, bool, error) {
	e, err := scanEscalation(t.tx.QueryRow(t.ctx, `SELECT `+escalationCols+` FROM escalations
		WHERE dedupe_key = $1 AND state <> 'resolved'`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("look for an unresolved twin: %w", err)
	}
	return e, true, nil
}

// InsertEscalation stores a draft as an open escalation.
func (t *txn) InsertEscalation(d escalation.Draft) (escalation.Escalation, error) {
	var details *string
	if len(d.Details) > 0 {
		s := string(d.Details)
		details = &s
	}
	e, err := scanEscalation(t.tx.QueryRow(t.ctx, `INSERT INTO escalations
		(kind, severity, state, hold, agent, ref, summary, details, dedupe_key, created_at)
		VALUES ($1, $2, 'open', CASE WHEN $3::boolean THEN 1 ELSE 0 END, $4, $5, $6, $7, $8, $9) RETURNING `+escalationCols,
		string(d.Kind), string(d.Severity), d.Hold, nullIfEmpty(d.Agent), nullIfEmpty(d.Ref), d.Summary, details, d.DedupeKey, t.now()))
	if err != nil {
		return e, fmt.Errorf("store escalation %q: %w", d.Summary, err)
	}
	return e, nil
}

// CountEscalation adds one to an unresolved escalation's count.
func (t *txn) CountEscalation(id int64) (escalation.Escalation, error) {
	e, err := scanEscalation(t.tx.QueryRow(t.ctx, `UPDATE escalations SET count = count + 1
		WHERE id = $1 AND state <> 'resolved' RETURNING `+escalationCols, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("count escalation %d: %w (or it is resolved)", id, mailbox.ErrNoSuchEscalation)
	}
	if err != nil {
		return e, fmt.Errorf("count escalation %d: %w", id, err)
	}
	return e, nil
}

// SetDecision writes an escalation's decision and note.
func (t *txn) SetDecision(id int64, d escalation.Decision, note string) error {
	tag, err := t.tx.Exec(t.ctx, `UPDATE escalations SET decision = coalesce($1, decision), note = $2 WHERE id = $3`,
		nullIfEmpty(string(d)), note, id)
	if err != nil {
		return fmt.Errorf("record the decision on escalation %d: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("record the decision on escalation %d: %w", id, mailbox.ErrNoSuchEscalation)
	}
	return nil
}

// MarkShown records the session whose prompt carried the decisions.
func (t *txn) MarkShown(ids []int64, seq int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := t.tx.Exec(t.ctx, `UPDATE escalations SET shown_in = $1 WHERE id = ANY($2)`, seq, ids); err != nil {
		return fmt.Errorf("record decisions shown in session %d: %w", seq, err)
	}
	return nil
}

// moveEscalation is Transition's compare-and-set for escalation subjects.
// It returns the escalation's agent for the event row.
func (t *txn) moveEscalation(c fsm.Change) (*string, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("move escalation %q: the subject must be its id", c.Subject)
	}
	var agent *string
	if c.From == "" {
		// The first change: the row was just stored in To, and nothing
		// moved it before.
		err = t.tx.QueryRow(t.ctx, `SELECT agent FROM escalations WHERE id = $1 AND state = $2
			AND NOT EXISTS (SELECT 1 FROM events WHERE subject_kind = 'escalation' AND subject = $3)`, id, c.To, c.Subject).Scan(&agent)
	} else {
		stamp := ""
		args := []any{c.To, id, c.From}
		switch escalation.State(c.To) {
		case escalation.Acked:
			stamp, args = `, acked_at = $4`, append(args, t.now())
		case escalation.Resolved:
			stamp, args = `, resolved_at = $4`, append(args, t.now())
		}
		err = t.tx.QueryRow(t.ctx, `UPDATE escalations SET state = $1`+stamp+`
			WHERE id = $2 AND state = $3 RETURNING agent`, args...).Scan(&agent)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("move escalation %d from %q to %s: %w", id, c.From, c.To, mailbox.ErrStateConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("move escalation %d from %q to %s: %w", id, c.From, c.To, err)
	}
	return agent, nil
}

// MarkOperatorDone marks mail to operator done.
func (s *Store) MarkOperatorDone(ctx context.Context, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE messages SET state = 'done', done_at = $1
		WHERE recipient = 'operator' AND state <> 'done' AND id = ANY($2)`, nanos(s.now()), ids)
	if err != nil {
		return 0, fmt.Errorf("mark operator mail done: %w", err)
	}
	return tag.RowsAffected(), nil
}
