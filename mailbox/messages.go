package mailbox

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/message"
)

// ErrNoSuchMessage means a reply_to id does not exist.
var ErrNoSuchMessage = errors.New("no such message")

const messageCols = `id, coalesce(thread_id, id), reply_to, sender, recipient, kind, urgency, body, payload, created_at, state, session_seq, shown`

func scanMessage(sc interface{ Scan(...any) error }) (message.Message, error) {
	var (
		m       message.Message
		replyTo sql.NullInt64
		payload sql.NullString
		created int64
		seq     sql.NullInt64
	)
	err := sc.Scan(&m.ID, &m.ThreadID, &replyTo, &m.From, &m.To, &m.Kind, &m.Urgency, &m.Body, &payload, &created, &m.State, &seq, &m.Shown)
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
	return m, nil
}

func collect(rows *sql.Rows, err error) ([]message.Message, error) {
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

// Send validates and stores one message. A draft with ReplyTo joins the
// thread of the message it answers.
func (s *Store) Send(ctx context.Context, d message.Draft) (message.Message, error) {
	d = d.Normalize()
	if err := message.Validate(d, s.agents); err != nil {
		return message.Message{}, err
	}
	m, err := insert(ctx, s.insert, d, s.now())
	if err != nil {
		return message.Message{}, fmt.Errorf("send to %s: %w", d.To, err)
	}
	return m, nil
}

// Reply answers message id: it goes back to that message's sender, in its
// thread.
func (s *Store) Reply(ctx context.Context, id int64, d message.Draft) (message.Message, error) {
	var to string
	err := s.db.QueryRowContext(ctx, `SELECT sender FROM messages WHERE id = ?`, id).Scan(&to)
	if errors.Is(err, sql.ErrNoRows) {
		return message.Message{}, fmt.Errorf("reply to #%d: %w", id, ErrNoSuchMessage)
	}
	if err != nil {
		return message.Message{}, err
	}
	d.To, d.ReplyTo = to, id
	return s.Send(ctx, d)
}

// Broadcast sends one copy to every agent except the sender, in one
// transaction: all are stored or none. Operator is not a broadcast
// recipient.
func (s *Store) Broadcast(ctx context.Context, d message.Draft) ([]message.Message, error) {
	d = d.Normalize()
	var drafts []message.Draft
	for _, a := range s.agents {
		if a == d.From {
			continue
		}
		c := d
		c.To = a
		if err := message.Validate(c, s.agents); err != nil {
			return nil, err
		}
		drafts = append(drafts, c)
	}
	if len(drafts) == 0 {
		return nil, fmt.Errorf("broadcast from %s: no other agents to send to", d.From)
	}
	var out []message.Message
	now := s.now()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		stmt := tx.StmtContext(ctx, s.insert)
		for _, c := range drafts {
			m, err := insert(ctx, stmt, c, now)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	return out, nil
}

// insert stores one draft with a single statement. A reply takes its
// parent's thread; the reply_to foreign key rejects a missing parent.
func insert(ctx context.Context, q querier, d message.Draft, now time.Time) (message.Message, error) {
	var replyTo any
	if d.ReplyTo != 0 {
		replyTo = d.ReplyTo
	}
	var payload any
	if len(d.Payload) > 0 {
		payload = string(d.Payload)
	}
	row := q.QueryRowContext(ctx, replyTo, d.From, d.To, d.Kind, d.Urgency, d.Body, payload, nanos(now))
	m, err := scanMessage(row)
	if err != nil && d.ReplyTo != 0 && isForeignKey(err) {
		return m, fmt.Errorf("reply to #%d: %w", d.ReplyTo, ErrNoSuchMessage)
	}
	return m, err
}

const insertSQL = `INSERT INTO messages
	(thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at)
	VALUES ((SELECT coalesce(thread_id, id) FROM messages WHERE id = ?1), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
	RETURNING ` + messageCols

// querier is the prepared insert, alone or bound to a transaction.
type querier interface {
	QueryRowContext(ctx context.Context, args ...any) *sql.Row
}

// sortForPrompt puts urgent mail first, then the oldest.
func sortForPrompt(ms []message.Message) {
	slices.SortFunc(ms, func(a, b message.Message) int {
		if a.IsUrgent() != b.IsUrgent() {
			if a.IsUrgent() {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// Deliver moves the agent's queued mail into session seq, in one
// statement, and returns it urgent first, then oldest. Each message's Shown
// says how many earlier sessions saw it without completing.
func (s *Store) Deliver(ctx context.Context, agent string, seq int64) ([]message.Message, error) {
	return deliver(ctx, s.db, nanos(s.now()), agent, seq, nil)
}

// DeliverInto delivers specific queued messages into a session that is
// already running: urgent mail injected at a tool boundary. Messages that are
// no longer queued are skipped; the ones delivered are returned.
func (s *Store) DeliverInto(ctx context.Context, agent string, seq int64, ids []int64) ([]message.Message, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return deliver(ctx, s.db, nanos(s.now()), agent, seq, ids)
}

// deliver moves queued mail into a session: all of it, or only ids.
func deliver(ctx context.Context, q execer, now int64, agent string, seq int64, ids []int64) ([]message.Message, error) {
	query := `UPDATE messages SET state = 'delivered', session_seq = ?, delivered_at = ?
		WHERE recipient = ? AND state = 'queued'`
	args := []any{seq, now, agent}
	if ids != nil {
		query += ` AND id IN (` + placeholders(len(ids)) + `)`
		for _, id := range ids {
			args = append(args, id)
		}
	}
	ms, err := collect(q.QueryContext(ctx, query+` RETURNING `+messageCols, args...))
	if err != nil {
		return nil, fmt.Errorf("deliver mail to %s session %d: %w", agent, seq, err)
	}
	sortForPrompt(ms)
	return ms, nil
}

// Complete marks the mail delivered into the agent's session seq as done.
func (s *Store) Complete(ctx context.Context, agent string, seq int64) (int64, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE messages SET state = 'done', done_at = ?
		WHERE recipient = ? AND session_seq = ? AND state = 'delivered'`, nanos(s.now()), agent, seq)
	if err != nil {
		return 0, fmt.Errorf("complete mail of %s session %d: %w", agent, seq, err)
	}
	return res.RowsAffected()
}

// Abandon queues the mail of a session that did not complete again, and
// counts one more showing for each message.
func (s *Store) Abandon(ctx context.Context, agent string, seq int64) (int64, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE messages
		SET state = 'queued', session_seq = NULL, delivered_at = NULL, shown = shown + 1
		WHERE recipient = ? AND session_seq = ? AND state = 'delivered'`, agent, seq)
	if err != nil {
		return 0, fmt.Errorf("requeue mail of %s session %d: %w", agent, seq, err)
	}
	return res.RowsAffected()
}

// Queued returns the agent's queued mail as the next prompt would show it,
// urgent first, without delivering anything.
func (s *Store) Queued(ctx context.Context, agent string) ([]message.Message, error) {
	ms, err := collect(s.db.QueryContext(ctx, `SELECT `+messageCols+` FROM messages
		WHERE recipient = ? AND state = 'queued' ORDER BY id`, agent))
	if err != nil {
		return nil, fmt.Errorf("read queued mail of %s: %w", agent, err)
	}
	sortForPrompt(ms)
	return ms, nil
}

// Get returns one message.
func (s *Store) Get(ctx context.Context, id int64) (message.Message, error) {
	m, err := scanMessage(s.db.QueryRowContext(ctx, `SELECT `+messageCols+` FROM messages WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("message #%d: %w", id, ErrNoSuchMessage)
	}
	return m, err
}

// Filter selects messages for Inbox.
type Filter struct {
	State message.State // empty: every state
	Sent  bool          // the messages name sent, instead of received
	Limit int           // the newest Limit messages; 0 means all
}

// Inbox lists the mail of name (an agent or operator), oldest first. With a
// limit, it keeps the newest messages.
func (s *Store) Inbox(ctx context.Context, name string, f Filter) ([]message.Message, error) {
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

// Counts is how much mail an agent has waiting.
type Counts struct {
	Queued    int
	Delivered int
	Urgent    int // queued urgent mail
	Waking    int // queued mail of a kind that wakes an idle agent
}

// Pending returns the counts of the agent's undone mail.
func (s *Store) Pending(ctx context.Context, agent string) (Counts, error) {
	var c Counts
	err := s.db.QueryRowContext(ctx, `SELECT
		count(*) FILTER (WHERE state = 'queued'),
		count(*) FILTER (WHERE state = 'delivered'),
		count(*) FILTER (WHERE state = 'queued' AND urgency = 'urgent'),
		count(*) FILTER (WHERE state = 'queued' AND kind <> 'status')
		FROM messages WHERE recipient = ? AND state <> 'done'`, agent).Scan(&c.Queued, &c.Delivered, &c.Urgent, &c.Waking)
	return c, err
}

// Prune deletes done mail older than retention and checkpoints the WAL.
func (s *Store) Prune(ctx context.Context, retention time.Duration) (int64, error) {
	cutoff := nanos(s.now().Add(-retention))
	res, err := s.db.ExecContext(ctx, `DELETE FROM messages WHERE state = 'done' AND done_at < ?
		AND id < (SELECT max(id) FROM messages)`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("prune mail: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return n, fmt.Errorf("checkpoint: %w", err)
	}
	return n, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
