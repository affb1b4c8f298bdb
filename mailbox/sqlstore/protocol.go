package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// Protocol mail (DESIGN §9.2): lookups by msg_id and task, and the ACK
// records the deadline sweeper reads and moves.

// ProtocolMessage returns the protocol message with this msg_id.
func (s *Store) ProtocolMessage(ctx context.Context, msgID string) (message.Message, error) {
	return protocolMessage(ctx, s.db, msgID)
}

func protocolMessage(ctx context.Context, q Querier, msgID string) (message.Message, error) {
	m, err := scanMessage(q.QueryRowContext(ctx, `SELECT `+messageCols+` FROM messages WHERE msg_id = ?`, msgID))
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("msg_id %s: %w", msgID, mailbox.ErrNoSuchMessage)
	}
	return m, err
}

// TaskMessages returns the protocol messages about a task, oldest first.
func (s *Store) TaskMessages(ctx context.Context, taskID string) ([]message.Message, error) {
	ms, err := collect(s.db.QueryContext(ctx, `SELECT `+messageCols+` FROM messages WHERE task_id = ? ORDER BY id`, taskID))
	if err != nil {
		return nil, fmt.Errorf("read the messages of task %s: %w", taskID, err)
	}
	return ms, nil
}

// ProtocolMessages returns every protocol message, oldest first, at most
// limit (the newest) when limit > 0.
func (s *Store) ProtocolMessages(ctx context.Context, limit int) ([]message.Message, error) {
	q := `SELECT ` + messageCols + ` FROM messages WHERE msg_id IS NOT NULL ORDER BY id DESC`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	ms, err := collect(s.db.QueryContext(ctx, q))
	if err != nil {
		return nil, fmt.Errorf("read protocol messages: %w", err)
	}
	slices.Reverse(ms)
	return ms, nil
}

// PendingAcks returns the agent's messages awaiting its ACK whose clock
// has started, oldest first.
func (s *Store) PendingAcks(ctx context.Context, agent string) ([]message.Message, error) {
	ms, err := collect(s.db.QueryContext(ctx, `SELECT `+messageCols+` FROM messages
		WHERE recipient = ? AND ack_state IN ('pending', 'overdue') AND ack_due_at IS NOT NULL ORDER BY id`, agent))
	if err != nil {
		return nil, fmt.Errorf("read the ACKs %s owes: %w", agent, err)
	}
	return ms, nil
}

// DueAcks returns pending ACKs whose deadline is at or before now, the
// earliest deadline first.
func (s *Store) DueAcks(ctx context.Context, now time.Time, limit int) ([]message.Message, error) {
	if limit <= 0 {
		limit = 100
	}
	ms, err := collect(s.db.QueryContext(ctx, `SELECT `+messageCols+` FROM messages
		WHERE ack_state = 'pending' AND ack_due_at <= ? ORDER BY ack_due_at, id LIMIT ?`, nanos(now), limit))
	if err != nil {
		return nil, fmt.Errorf("read ACKs past their deadline: %w", err)
	}
	return ms, nil
}

// NextAckDeadline returns the earliest deadline of a pending ACK.
func (s *Store) NextAckDeadline(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT min(ack_due_at) FROM messages WHERE ack_state = 'pending' AND ack_due_at IS NOT NULL`).Scan(&due)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the next ACK deadline: %w", err)
	}
	if !due.Valid {
		return time.Time{}, false, nil
	}
	return fromNanos(due.Int64), true, nil
}

// MarkAckOverdue moves a pending ACK past its deadline to overdue.
func (s *Store) MarkAckOverdue(ctx context.Context, msgID string, now time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE messages SET ack_state = 'overdue'
		WHERE msg_id = ? AND ack_state = 'pending' AND ack_due_at <= ?`, msgID, nanos(now))
	if err != nil {
		return false, fmt.Errorf("mark the ACK of %s overdue: %w", msgID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// RequeueAck queues a protocol message again with its ACK pending and no
// deadline.
func (t *Tx) RequeueAck(msgID string) (message.Message, error) {
	m, err := scanMessage(t.q.QueryRowContext(t.ctx, `UPDATE messages SET
			state = 'queued', session_seq = NULL, delivered_at = NULL, done_at = NULL,
			shown = shown + CASE WHEN state = 'queued' THEN 0 ELSE 1 END,
			ack_state = 'pending', ack_due_at = NULL, acked_at = NULL
		WHERE msg_id = ? AND ack_state IN ('pending', 'overdue') RETURNING `+messageCols, msgID))
	if errors.Is(err, sql.ErrNoRows) {
		return m, t.ackClosed(msgID, "queue again")
	}
	return m, err
}

// CancelAck ends a protocol message whose ACK is still awaited.
func (t *Tx) CancelAck(msgID string) (message.Message, error) {
	m, err := scanMessage(t.q.QueryRowContext(t.ctx, `UPDATE messages SET
			state = 'done', done_at = ?, ack_state = 'cancelled',
			-- a message waiting in the queue was never completed by a session
			session_seq = CASE WHEN state = 'queued' THEN NULL ELSE session_seq END
		WHERE msg_id = ? AND ack_state IN ('pending', 'overdue') RETURNING `+messageCols, t.now(), msgID))
	if errors.Is(err, sql.ErrNoRows) {
		return m, t.ackClosed(msgID, "cancel")
	}
	return m, err
}

// ackClosed explains why an ACK record could not be moved.
func (t *Tx) ackClosed(msgID, what string) error {
	m, err := protocolMessage(t.ctx, t.q, msgID)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, msgID, err)
	}
	state := message.AckNone
	if m.Ack != nil {
		state = m.Ack.State
	}
	return fmt.Errorf("%s %s: its ACK is %s: %w", what, msgID, state, mailbox.ErrAckClosed)
}
