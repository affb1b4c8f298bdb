package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

const messageCols = `id, coalesce(thread_id, id), reply_to, sender, recipient, kind, urgency, body, payload, created_at, state, session_seq, shown,
	msg_id, task_id, protocol_type, ack_required <> 0, ack_timeout_sec, ack_state, ack_due_at, acked_at`

func scanMessage(sc pgx.Row) (message.Message, error) {
	var (
		m                    message.Message
		payload              *string
		created              int64
		msgID, taskID, ptype *string
		ack                  message.Ack
		due, ackedAt         *int64
	)
	err := sc.Scan(&m.ID, &m.ThreadID, &m.ReplyTo, &m.From, &m.To, &m.Kind, &m.Urgency, &m.Body, &payload, &created, &m.State, &m.SessionSeq, &m.Shown,
		&msgID, &taskID, &ptype, &ack.Required, &ack.Timeout, &ack.State, &due, &ackedAt)
	if err != nil {
		return m, err
	}
	if payload != nil {
		m.Payload = []byte(*payload)
	}
	m.CreatedAt = fromNanos(created)
	if m.Kind == message.KindProtocol {
		m.MsgID, m.TaskID, m.ProtocolType = deref(msgID), deref(taskID), deref(ptype)
		ack.DueAt, ack.AckedAt = optTime(due), optTime(ackedAt)
		m.Ack = &ack
	}
	return m, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func collect(rows pgx.Rows, err error) ([]message.Message, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []message.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// insertSQL stores one draft in one statement. The materialised CTE takes
// the message lock before the identity default draws an id, and holds it
// until commit, so ids commit in order (see the package comment). A reply
// takes its parent's thread; the reply_to foreign key rejects a missing
// parent, and the unique index on msg_id a msg_id already stored. A
// protocol draft asking for an ACK (ack_timeout_sec > 0) stores it pending.
const insertSQL = `WITH serial AS MATERIALIZED (SELECT pg_advisory_xact_lock($9::bigint))
	INSERT INTO messages (thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at,
		msg_id, task_id, protocol_type, ack_required, ack_timeout_sec, ack_state, answer_key)
	SELECT (SELECT coalesce(m.thread_id, m.id) FROM messages m WHERE m.id = $1::bigint), $1::bigint,
		$2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::bigint,
		$10::text, $11::text, $12::text, CASE WHEN $13::bigint > 0 THEN 1 ELSE 0 END, $13::bigint,
		CASE WHEN $13::bigint > 0 THEN 'pending' ELSE 'none' END, $14::text
	FROM serial
	RETURNING ` + messageCols

// insertPlainSQL is insertSQL for the common draft: no reply, no protocol
// envelope, no ACK. The columns it leaves out take their defaults (NULL,
// 0, 'none'), and without the parent lookup and the CASEs the statement
// costs about what a bare INSERT does (BenchmarkSend).
const insertPlainSQL = `WITH serial AS MATERIALIZED (SELECT pg_advisory_xact_lock($1::bigint))
	INSERT INTO messages (sender, recipient, kind, urgency, body, payload, created_at)
	SELECT $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::bigint
	FROM serial
	RETURNING ` + messageCols

// InsertMessages stores validated drafts: one statement alone, or all of
// them in one transaction. An ack (a draft with AckOf) marks the message
// it acknowledges in the same transaction.
func (s *Store) InsertMessages(ctx context.Context, drafts []message.Draft) ([]message.Message, error) {
	ms, err := s.insertRetrying(ctx, drafts)
	return ms, s.answered(ctx, err)
}

// answered completes an *AnsweredError with the answer that stands.
func (s *Store) answered(ctx context.Context, err error) error {
	var ae *mailbox.AnsweredError
	if !errors.As(err, &ae) {
		return err
	}
	m, qerr := scanMessage(s.pool.QueryRow(ctx, `SELECT `+messageCols+` FROM messages WHERE sender = $1 AND answer_key = $2`, ae.Answer.From, ae.Key))
	if qerr != nil {
		return fmt.Errorf("%w: %s answered %s already, and reading that answer failed: %v", mailbox.ErrAlreadyAnswered, ae.Answer.From, ae.Key, qerr)
	}
	ae.Answer = m
	return ae
}

func (s *Store) insertRetrying(ctx context.Context, drafts []message.Draft) (ms []message.Message, err error) {
	// Mail must not be lost to a server restarting under a running
	// process: a statement that surely did not commit (see notCommitted)
	// is tried again for a while. Any other cut is returned: it may have
	// committed, and trying again could store the mail twice.
	for pause, deadline := 50*time.Millisecond, time.Now().Add(s.wait); ; pause = min(2*pause, time.Second) {
		ms, err = s.insertMessages(ctx, drafts)
		if err == nil || !notCommitted(err) || time.Now().Add(pause).After(deadline) {
			return ms, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
	}
}

// notCommitted reports whether err proves the statement did not commit:
// nothing was sent (no connection could be made, or pgx says so). A
// connection ended after the statement went out, even with the server's
// 57P01 (shutting down), may follow its commit: measured, one post in
// about a hundred across two restarts was stored and still answered so.
func notCommitted(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err)
}

func (s *Store) insertMessages(ctx context.Context, drafts []message.Draft) ([]message.Message, error) {
	now := s.now()
	if len(drafts) == 1 && drafts[0].AckOf == "" {
		m, err := insert(ctx, s.pool, drafts[0].Normalize(), now)
		if err != nil {
			return nil, err
		}
		return []message.Message{m}, nil
	}
	var out []message.Message
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, d := range drafts {
			if d.AckOf != "" {
				if err := markAcked(ctx, tx, d.AckOf, d.From, nanos(now)); err != nil {
					return err
				}
			}
			m, err := insert(ctx, tx, d.Normalize(), now)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// markAcked records the ACK of msgID by its recipient: pending or overdue
// become acked.
func markAcked(ctx context.Context, q querier, msgID, by string, now int64) error {
	tag, err := q.Exec(ctx, `UPDATE messages SET ack_state = 'acked', acked_at = $1
		WHERE msg_id = $2 AND recipient = $3 AND ack_state IN ('pending', 'overdue')`, now, msgID, by)
	if err != nil {
		return fmt.Errorf("acknowledge %s: %w", msgID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var state message.AckState
	var to string
	err = q.QueryRow(ctx, `SELECT ack_state, recipient FROM messages WHERE msg_id = $1`, msgID).Scan(&state, &to)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("acknowledge %s: %w", msgID, mailbox.ErrNoSuchMessage)
	case err != nil:
		return fmt.Errorf("acknowledge %s: %w", msgID, err)
	case to != by:
		return fmt.Errorf("acknowledge %s: it was sent to %s, not %s: %w", msgID, to, by, mailbox.ErrAckClosed)
	}
	return fmt.Errorf("acknowledge %s: its ACK is %s: %w", msgID, state, mailbox.ErrAckClosed)
}

func insert(ctx context.Context, q querier, d message.Draft, now time.Time) (message.Message, error) {
	var replyTo *int64
	if d.ReplyTo != 0 {
		replyTo = &d.ReplyTo
	}
	var payload *string
	if len(d.Payload) > 0 {
		p := string(d.Payload)
		payload = &p
	}
	ackSecs := int64((d.AckTimeout + time.Second - 1) / time.Second)
	var row pgx.Row
	if replyTo == nil && d.MsgID == "" && d.TaskID == "" && d.ProtocolType == "" && ackSecs == 0 {
		row = q.QueryRow(ctx, insertPlainSQL, lockMessages, d.From, d.To, string(d.Kind), string(d.Urgency), d.Body, payload, nanos(now))
	} else {
		row = q.QueryRow(ctx, insertSQL, replyTo, d.From, d.To, string(d.Kind), string(d.Urgency), d.Body, payload, nanos(now), lockMessages,
			nullIfEmpty(d.MsgID), nullIfEmpty(d.TaskID), nullIfEmpty(d.ProtocolType), ackSecs, nullIfEmpty(d.AnswerKey))
	}
	m, err := scanMessage(row)
	if err != nil {
		if d.ReplyTo != 0 && pgCode(err) == codeForeignKey {
			return m, fmt.Errorf("reply to #%d: %w", d.ReplyTo, mailbox.ErrNoSuchMessage)
		}
		if d.AnswerKey != "" && pgConstraint(err) == "messages_answer" {
			// The caller reads the answer that stands (answered), once
			// the transaction is over.
			return m, &mailbox.AnsweredError{Key: d.AnswerKey, Answer: message.Message{From: d.From}}
		}
		if d.MsgID != "" && pgCode(err) == codeUnique {
			return m, fmt.Errorf("msg_id %s: %w", d.MsgID, mailbox.ErrDuplicateMsgID)
		}
		return m, fmt.Errorf("store a message from %s to %s: %w", d.From, d.To, err)
	}
	return m, nil
}

// Message returns one message.
func (s *Store) Message(ctx context.Context, id int64) (message.Message, error) {
	m, err := scanMessage(s.pool.QueryRow(ctx, `SELECT `+messageCols+` FROM messages WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, fmt.Errorf("message #%d: %w", id, mailbox.ErrNoSuchMessage)
	}
	if err != nil {
		return m, fmt.Errorf("read message #%d: %w", id, err)
	}
	return m, nil
}

// Thread returns the messages of message id's thread, oldest first.
func (s *Store) Thread(ctx context.Context, id int64) ([]message.Message, error) {
	first, err := s.Message(ctx, id)
	if err != nil {
		return nil, err
	}
	ms, err := collect(s.pool.Query(ctx, `SELECT `+messageCols+` FROM messages
		WHERE id = $1 OR thread_id = $1 ORDER BY id`, first.ThreadID))
	if err != nil {
		return nil, fmt.Errorf("read the thread of #%d: %w", id, err)
	}
	return ms, nil
}

// Queued returns the agent's queued mail in prompt order.
func (s *Store) Queued(ctx context.Context, agent string) ([]message.Message, error) {
	ms, err := collect(s.pool.Query(ctx, `SELECT `+messageCols+` FROM messages
		WHERE recipient = $1 AND state = 'queued' ORDER BY id`, agent))
	if err != nil {
		return nil, fmt.Errorf("read queued mail of %s: %w", agent, err)
	}
	message.SortForPrompt(ms)
	return ms, nil
}

// Deliver moves queued mail into session seq inside the transaction: all
// of it, or only ids.
func (t *txn) Deliver(agent string, seq int64, ids []int64) ([]message.Message, error) {
	if err := t.fence(agent); err != nil {
		return nil, fmt.Errorf("deliver to %s: %w", agent, err)
	}
	if ids != nil && len(ids) == 0 {
		return nil, nil
	}
	// The ACK clock starts at the first delivery; a redelivery keeps the
	// deadline, so an interrupted session does not buy time.
	query := `UPDATE messages SET state = 'delivered', session_seq = $1, delivered_at = $2,
		ack_due_at = CASE WHEN ack_state = 'pending' AND ack_due_at IS NULL THEN $2 + ack_timeout_sec * 1000000000 ELSE ack_due_at END
		WHERE recipient = $3 AND state = 'queued'`
	args := []any{seq, t.now(), agent}
	if ids != nil {
		query += ` AND id = ANY($4)`
		args = append(args, ids)
	}
	ms, err := collect(t.tx.Query(t.ctx, query+` RETURNING `+messageCols, args...))
	if err != nil {
		return nil, fmt.Errorf("deliver mail to %s session %d: %w", agent, seq, err)
	}
	message.SortForPrompt(ms)
	return ms, nil
}

// settle ends the delivery of a session's mail: done when the session
// completed, queued again (shown once more) otherwise. seq 0 settles every
// delivered message of the agent, which recovery uses.
func settle(ctx context.Context, q querier, now int64, agent string, seq int64, completed bool) (int64, error) {
	which := `recipient = $1 AND state = 'delivered' AND ($2 = 0 OR session_seq = $2)`
	var (
		tag pgconn.CommandTag
		err error
	)
	if completed {
		tag, err = q.Exec(ctx, `UPDATE messages SET state = 'done', done_at = $3 WHERE `+which, agent, seq, now)
	} else {
		tag, err = q.Exec(ctx, `UPDATE messages SET state = 'queued', session_seq = NULL, delivered_at = NULL, shown = shown + 1 WHERE `+which, agent, seq)
	}
	if err != nil {
		return 0, fmt.Errorf("settle mail of %s session %d: %w", agent, seq, err)
	}
	return tag.RowsAffected(), nil
}

// Inbox lists the mail of name, oldest first. With a limit, it keeps the
// newest messages.
func (s *Store) Inbox(ctx context.Context, name string, f mailbox.Filter) ([]message.Message, error) {
	col := "recipient"
	if f.Sent {
		col = "sender"
	}
	q := `SELECT ` + messageCols + ` FROM messages WHERE ` + col + ` = $1`
	args := []any{name}
	if f.State != "" {
		if !slices.Contains(message.States, f.State) {
			return nil, fmt.Errorf("bad state %q: use queued, delivered or done", f.State)
		}
		q += ` AND state = $2`
		args = append(args, string(f.State))
	}
	if f.From != "" {
		args = append(args, f.From)
		q += fmt.Sprintf(` AND sender = $%d`, len(args))
	}
	if f.Kind != "" {
		args = append(args, string(f.Kind))
		q += fmt.Sprintf(` AND kind = $%d`, len(args))
	}
	if f.Grep != "" {
		args = append(args, f.Grep)
		q += fmt.Sprintf(` AND strpos(body, $%d) > 0`, len(args))
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	ms, err := collect(s.pool.Query(ctx, q, args...))
	if err != nil {
		return nil, fmt.Errorf("read inbox of %s: %w", name, err)
	}
	slices.Reverse(ms)
	return ms, nil
}

// Pending counts the agent's undone mail by group; mailbox.Counts applies
// the rule of which kinds wake.
func (s *Store) Pending(ctx context.Context, agent string) (mailbox.Counts, error) {
	var c mailbox.Counts
	rows, err := s.pool.Query(ctx, `SELECT state, kind, coalesce(protocol_type, ''), urgency, count(*) FROM messages
		WHERE recipient = $1 AND state <> 'done' GROUP BY state, kind, protocol_type, urgency`, agent)
	if err != nil {
		return c, fmt.Errorf("count mail of %s: %w", agent, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			st message.State
			k  message.Kind
			pt string
			u  message.Urgency
			n  int
		)
		if err := rows.Scan(&st, &k, &pt, &u, &n); err != nil {
			return c, fmt.Errorf("count mail of %s: %w", agent, err)
		}
		c.Add(st, k, pt, u, n)
	}
	return c, rows.Err()
}

// PendingAll counts every recipient's undone mail in one grouped query.
func (s *Store) PendingAll(ctx context.Context) (map[string]mailbox.Counts, error) {
	rows, err := s.pool.Query(ctx, `SELECT recipient, state, kind, coalesce(protocol_type, ''), urgency, count(*) FROM messages
		WHERE state <> 'done' GROUP BY recipient, state, kind, protocol_type, urgency`)
	if err != nil {
		return nil, fmt.Errorf("count waiting mail: %w", err)
	}
	defer rows.Close()
	out := map[string]mailbox.Counts{}
	for rows.Next() {
		var (
			to string
			st message.State
			k  message.Kind
			pt string
			u  message.Urgency
			n  int
		)
		if err := rows.Scan(&to, &st, &k, &pt, &u, &n); err != nil {
			return nil, fmt.Errorf("count waiting mail: %w", err)
		}
		c := out[to]
		c.Add(st, k, pt, u, n)
		out[to] = c
	}
	return out, rows.Err()
}

// MessagesSince returns up to limit messages with id > after, oldest first.
func (s *Store) MessagesSince(ctx context.Context, after int64, limit int) ([]message.Message, error) {
	if limit <= 0 {
		limit = 200
	}
	ms, err := collect(s.pool.Query(ctx, `SELECT `+messageCols+` FROM messages WHERE id > $1 ORDER BY id LIMIT $2`, after, limit))
	if err != nil {
		return nil, fmt.Errorf("read new mail: %w", err)
	}
	return ms, nil
}

// NewestMessageID is the highest message id.
func (s *Store) NewestMessageID(ctx context.Context) (int64, error) {
	return newestMessageID(ctx, s.pool)
}

func newestMessageID(ctx context.Context, q querier) (int64, error) {
	var id int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&id); err != nil {
		return 0, fmt.Errorf("read the newest message id: %w", err)
	}
	return id, nil
}

// Prune deletes done mail older than cutoff, keeping the newest message.
// Autovacuum reclaims the space; VACUUM cannot run inside the pool's
// implicit transactions and is the operator's call.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM messages WHERE state = 'done' AND done_at < $1
		AND id < (SELECT max(id) FROM messages)`, nanos(cutoff))
	if err != nil {
		return 0, fmt.Errorf("prune mail: %w", err)
	}
	return tag.RowsAffected(), nil
}
