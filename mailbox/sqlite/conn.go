package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/swarmhq/swarm/mailbox/sqlstore"
)

// conn is the store's sqlstore.Conn: statements through the guarded pool,
// transactions immediate (tx).
type conn struct{ s *Store }

func (c conn) ExecContext(ctx context.Context, query string, args ...any) (sqlstore.Result, error) {
	return c.s.db.ExecContext(ctx, query, args...)
}

func (c conn) QueryContext(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return rows(c.s.db.QueryContext(ctx, query, args...))
}

func (c conn) QueryRowContext(ctx context.Context, query string, args ...any) sqlstore.Row {
	return c.s.db.QueryRowContext(ctx, query, args...)
}

func (c conn) InTx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return c.s.tx(ctx, func(tx *sql.Tx) error { return fn(txq{tx}) })
}

// txq is one transaction's Querier.
type txq struct{ tx *sql.Tx }

func (t txq) ExecContext(ctx context.Context, query string, args ...any) (sqlstore.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

func (t txq) QueryContext(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return rows(t.tx.QueryContext(ctx, query, args...))
}

func (t txq) QueryRowContext(ctx context.Context, query string, args ...any) sqlstore.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

// rows keeps a nil *sql.Rows from becoming a non-nil interface.
func rows(r *sql.Rows, err error) (sqlstore.Rows, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

// dialect is SQLite's side of the seam.
func (s *Store) dialect() sqlstore.Dialect {
	return sqlstore.Dialect{
		Unique: func(err error) (string, bool) {
			var se *sqlite.Error
			if errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
				return err.Error(), true // "UNIQUE constraint failed: messages.sender, messages.answer_key"
			}
			return "", false
		},
		ForeignKey: isForeignKey,
		AfterPrune: `PRAGMA wal_checkpoint(TRUNCATE)`,
		Contains:   func(col string) string { return `instr(` + col + `, ?) > 0` },
		AppendInt:  func(col string) string { return `json_insert(` + col + `, '$[#]', ?)` },
		InsertMessage: func(ctx context.Context, q sqlstore.Querier, m sqlstore.NewMessage) sqlstore.Row {
			stmt := s.insert
			if t, ok := q.(txq); ok {
				stmt = t.tx.StmtContext(ctx, s.insert)
			}
			return explained{stmt.QueryRowContext(ctx, m.ReplyTo, m.From, m.To, m.Kind, m.Urgency, m.Body, m.Payload, m.CreatedAt,
				m.MsgID, m.TaskID, m.Protocol, m.AckSecs, m.AnswerKey), s.db}
		},
	}
}

// explained is a row whose error says a full disk so.
type explained struct {
	row *sql.Row
	g   *guarded
}

func (e explained) Scan(dest ...any) error { return e.g.explain(e.row.Scan(dest...)) }

// insertSQL stores one draft (Dialect.InsertMessage). A reply takes its
// parent's thread.
const insertSQL = `INSERT INTO messages
	(thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at,
	 msg_id, task_id, protocol_type, ack_required, ack_timeout_sec, ack_state, answer_key)
	VALUES ((SELECT coalesce(thread_id, id) FROM messages WHERE id = ?1), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
	 ?9, ?10, ?11, ?12 > 0, ?12, CASE WHEN ?12 > 0 THEN 'pending' ELSE 'none' END, ?13)
	RETURNING ` + sqlstore.MessageCols
