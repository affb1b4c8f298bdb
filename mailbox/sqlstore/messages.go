package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// MessageCols are the columns scanMessage reads, for a backend's insert
// statement's RETURNING.
const MessageCols = messageCols

const messageCols = `id, coalesce(thread_id, id), reply_to, sender, recipient, kind, urgency, body, payload, created_at, state, session_seq, shown,
	msg_id, task_id, protocol_type, ack_required <> 0, ack_timeout_sec, ack_state, ack_due_at, acked_at`

func scanMessage(sc Row) (message.Message, error) {
	var (
		m                    message.Message
		replyTo              sql.NullInt64
		payload              sql.NullString
		created              int64
		seq                  sql.NullInt64
		msgID, taskID, ptype sql.NullString
		ack                  message.Ack
		due, ackedAt         sql.NullInt64
	)
	err := sc.Scan(&m.ID, &m.ThreadID, &replyTo, &m.From, &m.To, &m.Kind, &m.Urgency, &m.Body, &payload, &created, &m.State, &seq, &m.Shown,
		&msgID, &taskID, &ptype, &ack.Required, &ack.Timeout, &ack.State, &due, &ackedAt)
	if err != nil {
		return m, err
	}
	if replyTo.Valid {
		m.ReplyTo = &replyTo.Int64
	}
	if payload.Valid {
		m.Payload = []byte(payload.String)
	}
	if seq.Valid {
		m.SessionSeq = &seq.Int64
	}
	m.CreatedAt = fromNanos(created)
	if m.Kind == message.KindProtocol {
		m.MsgID, m.TaskID, m.ProtocolType = msgID.String, taskID.String, ptype.String
		ack.DueAt, ack.AckedAt = optTime(due), optTime(ackedAt)
		m.Ack = &ack
	}
	return m, nil
}

func collect(rows Rows, err error) ([]message.Message, error) { return list(rows, err, scanMessage) }

// InsertMessages stores validated drafts: one statement alone, or all of
// them in one transaction. An ack (a draft with AckOf) marks the message
// it acknowledges in the same transaction.
func (s *Store) InsertMessages(ctx context.Context, drafts []message.Draft) ([]message.Message, error) {
	ms, err := s.insertMessages(ctx, drafts)
	return ms, s.answered(ctx, err)
}

// answered completes an *AnsweredError with the answer that stands.
func (s *Store) answered(ctx context.Context, err error) error {
	var ae *mailbox.AnsweredError
	if !errors.As(err, &ae) {
		return err
	}
	m, qerr := scanMessage(s.db.QueryRowContext(ctx, `SELECT `+messageCols+` FROM messages WHERE sender = ? AND answer_key = ?`, ae.Answer.From, ae.Key))
	if qerr != nil {
		return fmt.Errorf("%w: %s answered %s already, and reading that answer failed: %v", mailbox.ErrAlreadyAnswered, ae.Answer.From, ae.Key, qerr)
	}
	ae.Answer = m
	return ae
}

func (s *Store) insertMessages(ctx context.Context, drafts []message.Draft) ([]message.Message, error) {
	now := s.Now()
	if len(drafts) == 1 && drafts[0].AckOf == "" {
		m, err := s.insert(ctx, s.db, drafts[0].Normalize(), now)
		if err != nil {
			return nil, err
		}
		return []message.Message{m}, nil
	}
	var out []message.Message
	err := s.db.InTx(ctx, func(q Querier) error {
		for _, d := range drafts {
			if d.AckOf != "" {
				if err := markAcked(ctx, q, d.AckOf, d.From, nanos(now)); err != nil {
					return err
				}
			}
			m, err := s.insert(ctx, q, d.Normalize(), now)
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
func markAcked(ctx context.Context, q Querier, msgID, by string, now int64) error {
	res, err := q.ExecContext(ctx, `UPDATE messages SET ack_state = 'acked', acked_at = ?
		WHERE msg_id = ? AND recipient = ? AND ack_state IN ('pending', 'overdue')`, now, msgID, by)
	if err != nil {
		return fmt.Errorf("acknowledge %s: %w", msgID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var state message.AckState
	var to string
	err = q.QueryRowContext(ctx, `SELECT ack_state, recipient FROM messages WHERE msg_id = ?`, msgID).Scan(&state, &to)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("acknowledge %s: %w", msgID, mailbox.ErrNoSuchMessage)
	case err != nil:
		return fmt.Errorf("acknowledge %s: %w", msgID, err)
	case to != by:
		return fmt.Errorf("acknowledge %s: it was sent to %s, not %s: %w", msgID, to, by, mailbox.ErrAckClosed)
	}
	return fmt.Errorf("acknowledge %s: its ACK is %s: %w", msgID, state, mailbox.ErrAckClosed)
}

// NewMessage is one draft's values, as a backend's insert statement
// (Dialect.InsertMessage) stores them.
type NewMessage struct {
	ReplyTo                 *int64 // nil: not a reply
	From, To, Kind, Urgency string
	Body                    string
	Payload                 *string
	CreatedAt               int64
	MsgID, TaskID, Protocol *string
	AckSecs                 int64 // > 0: an ACK is due, pending
	AnswerKey               *string
}

// Plain reports whether m is the common draft: no reply, no protocol
// envelope, no ACK (a backend may store it with a cheaper statement).
func (m NewMessage) Plain() bool {
	return m.ReplyTo == nil && m.MsgID == nil && m.TaskID == nil && m.Protocol == nil && m.AckSecs == 0 && m.AnswerKey == nil
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// insert stores one draft with a single statement. A reply takes its
// parent's thread; the reply_to foreign key rejects a missing parent, and
// the unique index on msg_id a msg_id already stored.
func (s *Store) insert(ctx context.Context, q Querier, d message.Draft, now time.Time) (message.Message, error) {
	nm := NewMessage{From: d.From, To: d.To, Kind: string(d.Kind), Urgency: string(d.Urgency), Body: d.Body, CreatedAt: nanos(now),
		MsgID: optString(d.MsgID), TaskID: optString(d.TaskID), Protocol: optString(d.ProtocolType), AnswerKey: optString(d.AnswerKey),
		AckSecs: int64((d.AckTimeout + time.Second - 1) / time.Second)}
	if d.ReplyTo != 0 {
		nm.ReplyTo = &d.ReplyTo
	}
	if len(d.Payload) > 0 {
		nm.Payload = optString(string(d.Payload))
	}
	m, err := scanMessage(s.dialect.InsertMessage(ctx, q, nm))
	if err == nil {
		return m, nil
	}
	names, unique := s.dialect.Unique(err)
	switch {
	case d.ReplyTo != 0 && s.dialect.ForeignKey(err):
		return m, fmt.Errorf("reply to #%d: %w", d.ReplyTo, mailbox.ErrNoSuchMessage)
	case d.AnswerKey != "" && unique && strings.Contains(names, "answer"):
		// The caller reads the answer that stands (answered), once the
		// transaction is over.
		return m, &mailbox.AnsweredError{Key: d.AnswerKey, Answer: message.Message{From: d.From}}
	case d.MsgID != "" && unique:
		return m, fmt.Errorf("msg_id %s: %w", d.MsgID, mailbox.ErrDuplicateMsgID)
	}
	return m, fmt.Errorf("store a message from %s to %s: %w", d.From, d.To, err)
}

// Message returns one message.
func (s *Store) Message(ctx context.Context, id int64) (message.Message, error) {
	m, err := scanMessage(s.db.QueryRowContext(ctx, `SELECT `+messageCols+` FROM messages WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("message #%d: %w", id, mailbox.ErrNoSuchMessage)
	}
	return m, err
}

// Thread returns the messages of message id's thread, oldest first.
func (s *Store) Thread(ctx context.Context, id int64) ([]message.Message, error) {
	first, err := s.Message(ctx, id)
	if err != nil {
		return nil, err
	}
	ms, err := collect(s.db.QueryContext(ctx, `SELECT `+messageCols+` FROM messages
		WHERE id = ? OR thread_id = ? ORDER BY id`, first.ThreadID, first.ThreadID))
	if err != nil {
		return nil, fmt.Errorf("read the thread of #%d: %w", id, err)
	}
	return ms, nil
}

// Queued returns the agent's queued mail in prompt order.
func (s *Store) Queued(ctx context.Context, agent string) ([]message.Message, error) {
	ms, err := collect(s.db.QueryContext(ctx, `SELECT `+messageCols+` FROM messages
		WHERE recipient = ? AND state = 'queued' ORDER BY id`, agent))
	if err != nil {
		return nil, fmt.Errorf("read queued mail of %s: %w", agent, err)
	}
	message.SortForPrompt(ms)
	return ms, nil
}

// deliver moves queued mail into a session: all of it, or only ids.
func deliver(ctx context.Context, q Querier, now int64, agent string, seq int64, ids []int64) ([]message.Message, error) {
	if ids != nil && len(ids) == 0 {
		return nil, nil
	}
	// The ACK clock starts at the first delivery; a redelivery keeps the
	// deadline, so an interrupted session does not buy time.
	query := `UPDATE messages SET state = 'delivered', session_seq = ?, delivered_at = ?,
		ack_due_at = CASE WHEN ack_state = 'pending' AND ack_due_at IS NULL THEN ? + ack_timeout_sec * 1000000000 ELSE ack_due_at END
		WHERE recipient = ? AND state = 'queued'`
	args := []any{seq, now, now, agent}
	if ids != nil {
		query += ` AND id IN (` + In(len(ids)) + `)`
		args = appendAll(args, ids)
	}
	ms, err := collect(q.QueryContext(ctx, query+` RETURNING `+messageCols, args...))
	if err != nil {
		return nil, fmt.Errorf("deliver mail to %s session %d: %w", agent, seq, err)
	}
	message.SortForPrompt(ms)
	return ms, nil
}

// Deliver moves queued mail into session seq inside the transaction.
func (t *Tx) Deliver(agent string, seq int64, ids []int64) ([]message.Message, error) {
	if err := t.fence(agent); err != nil {
		return nil, fmt.Errorf("deliver to %s: %w", agent, err)
	}
	return deliver(t.ctx, t.q, t.now(), agent, seq, ids)
}

// settle ends the delivery of a session's mail: done when the session
// completed, queued again (shown once more) otherwise. seq 0 settles every
// delivered message of the agent, which recovery uses: no session of it
// runs any more.
func settle(ctx context.Context, q Querier, now int64, agent string, seq int64, completed bool) (int64, error) {
	var res Result
	var err error
	which := `recipient = ? AND state = 'delivered'`
	args := []any{agent}
	if seq != 0 {
		which += ` AND session_seq = ?`
		args = append(args, seq)
	}
	if completed {
		res, err = q.ExecContext(ctx, `UPDATE messages SET state = 'done', done_at = ? WHERE `+which, append([]any{now}, args...)...)
	} else {
		res, err = q.ExecContext(ctx, `UPDATE messages SET state = 'queued', session_seq = NULL, delivered_at = NULL, shown = shown + 1 WHERE `+which, args...)
	}
	if err != nil {
		return 0, fmt.Errorf("settle mail of %s session %d: %w", agent, seq, err)
	}
	return res.RowsAffected()
}

// Inbox lists the mail of name, oldest first. With a limit, it keeps the
// newest messages.
func (s *Store) Inbox(ctx context.Context, name string, f mailbox.Filter) ([]message.Message, error) {
	col := "recipient"
	if f.Sent {
		col = "sender"
	}
	q := `SELECT ` + messageCols + ` FROM messages WHERE ` + col + ` = ?`
	args := []any{name}
	if f.State != "" {
		if !slices.Contains(message.States, f.State) {
			return nil, fmt.Errorf("bad state %q: use queued, delivered or done", f.State)
		}
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.From != "" {
		q += ` AND sender = ?`
		args = append(args, f.From)
	}
	if f.Kind != "" {
		q += ` AND kind = ?`
		args = append(args, string(f.Kind))
	}
	if f.Grep != "" {
		q += ` AND ` + s.dialect.Contains("body")
		args = append(args, f.Grep)
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	ms, err := collect(s.db.QueryContext(ctx, q, args...))
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
	rows, err := s.db.QueryContext(ctx, `SELECT state, kind, coalesce(protocol_type, ''), urgency, count(*) FROM messages
		WHERE recipient = ? AND state <> 'done' GROUP BY state, kind, protocol_type, urgency`, agent)
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
			return c, err
		}
		c.Add(st, k, pt, u, n)
	}
	return c, rows.Err()
}

// PendingAll counts every recipient's undone mail in one grouped query.
func (s *Store) PendingAll(ctx context.Context) (map[string]mailbox.Counts, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT recipient, state, kind, coalesce(protocol_type, ''), urgency, count(*) FROM messages
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
			return nil, err
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
	ms, err := collect(s.db.QueryContext(ctx, `SELECT `+messageCols+` FROM messages WHERE id > ? ORDER BY id LIMIT ?`, after, limit))
	if err != nil {
		return nil, fmt.Errorf("read new mail: %w", err)
	}
	return ms, nil
}

// NewestMessageID is the highest message id.
func (s *Store) NewestMessageID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&id); err != nil {
		return 0, fmt.Errorf("read the newest message id: %w", err)
	}
	return id, nil
}

// Prune deletes done mail older than cutoff and checkpoints the WAL.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM messages WHERE state = 'done' AND done_at < ?
		AND id < (SELECT max(id) FROM messages)`, nanos(cutoff))
	if err != nil {
		return 0, fmt.Errorf("prune mail: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune mail: %w", err)
	}
	if s.dialect.AfterPrune != "" {
		if _, err := s.db.ExecContext(ctx, s.dialect.AfterPrune); err != nil {
			return n, fmt.Errorf("after pruning: %w", err)
		}
	}
	return n, nil
}
