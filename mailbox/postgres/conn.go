package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/swarmhq/swarm/mailbox/sqlstore"
	"github.com/swarmhq/swarm/message"
)

// conn is the store's sqlstore.Conn: statements through the pool,
// transactions read committed (the fence's FOR SHARE and the message
// lock do the rest).
type conn struct{ s *Store }

func (c conn) ExecContext(ctx context.Context, query string, args ...any) (sqlstore.Result, error) {
	return pgq{c.s.pool}.ExecContext(ctx, query, args...)
}

func (c conn) QueryContext(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return pgq{c.s.pool}.QueryContext(ctx, query, args...)
}

func (c conn) QueryRowContext(ctx context.Context, query string, args ...any) sqlstore.Row {
	return pgq{c.s.pool}.QueryRowContext(ctx, query, args...)
}

func (c conn) InTx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return pgx.BeginFunc(ctx, c.s.pool, func(tx pgx.Tx) error { return fn(pgq{tx}) })
}

// querier is what the pool and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgq runs sqlstore's statements on the pool or a transaction: ? become
// $N, and the arguments what PostgreSQL's columns take.
type pgq struct{ q querier }

func (p pgq) ExecContext(ctx context.Context, query string, args ...any) (sqlstore.Result, error) {
	tag, err := p.q.Exec(ctx, rebind(query), fix(args)...)
	return affected(tag.RowsAffected()), err
}

func (p pgq) QueryContext(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	r, err := p.q.Query(ctx, rebind(query), fix(args)...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

func (p pgq) QueryRowContext(ctx context.Context, query string, args ...any) sqlstore.Row {
	return p.q.QueryRow(ctx, rebind(query), fix(args)...)
}

type affected int64

func (a affected) RowsAffected() (int64, error) { return int64(a), nil }

// rows is pgx's result set as sqlstore reads it.
type rows struct{ pgx.Rows }

func (r rows) Close() error { r.Rows.Close(); return nil }

// fix passes booleans as 0/1 (both schemas store flags as integers) and
// named string and integer types (message.Kind, escalation.State) as plain
// ones, as SQLite's driver does. It copies args before changing one: they
// are the caller's.
func fix(args []any) []any {
	out := args
	for i, a := range args {
		var v any
		switch a := a.(type) {
		case nil, string, int64, int, float64, *string, *int64:
			continue
		case bool:
			v = int64(0)
			if a {
				v = int64(1)
			}
		default:
			switch rv := reflect.ValueOf(a); rv.Kind() {
			case reflect.String:
				v = rv.String()
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				v = rv.Int()
			default:
				continue
			}
		}
		if &out[0] == &args[0] {
			out = slices.Clone(args)
		}
		out[i] = v
	}
	return out
}

// rebound caches rebind's work: most statements are fixed strings. Those
// built with IN lists vary with the list's length, so the cache stops
// growing at maxRebound entries.
var (
	rebound  sync.Map // sqlstore's statement → PostgreSQL's
	nRebound atomic.Int64
)

const maxRebound = 4096

// rebind turns SQLite's parameters (? and ?N) into PostgreSQL's ($N),
// outside quoted text.
func rebind(query string) string {
	if q, ok := rebound.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	n, quote := 0, byte(0)
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			if j > i+1 {
				b.WriteString("$" + query[i+1:j])
				i = j - 1
				continue
			}
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	if nRebound.Add(1) <= maxRebound {
		rebound.Store(query, b.String())
	}
	return b.String()
}

// dialect is PostgreSQL's side of the seam.
var dialect = sqlstore.Dialect{
	Unique: func(err error) (string, bool) {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == codeUnique {
			return pe.ConstraintName + " " + pe.Detail, true // "messages_answer Key (sender, answer_key)=…"
		}
		return "", false
	},
	ForeignKey: func(err error) bool { return pgCode(err) == codeForeignKey },
	ShareLock:  ` FOR SHARE`,
	LockTable:  func(table string) string { return `LOCK TABLE ` + table + ` IN SHARE ROW EXCLUSIVE MODE` },
	Contains:   func(col string) string { return `strpos(` + col + `, ?) > 0` },
	AppendInt:  func(col string) string { return `(` + col + `::jsonb || to_jsonb(CAST(? AS BIGINT)))::text` },
	InsertMessage: func(ctx context.Context, q sqlstore.Querier, m sqlstore.NewMessage) sqlstore.Row {
		if m.Plain() {
			return q.QueryRowContext(ctx, insertPlainSQL, lockMessages, m.From, m.To, m.Kind, m.Urgency, m.Body, m.Payload, m.CreatedAt)
		}
		return q.QueryRowContext(ctx, insertSQL, m.ReplyTo, m.From, m.To, m.Kind, m.Urgency, m.Body, m.Payload, m.CreatedAt, lockMessages,
			m.MsgID, m.TaskID, m.Protocol, m.AckSecs, m.AnswerKey)
	},
}

// insertSQL stores one draft in one statement. The materialised CTE takes
// the message lock before the identity default draws an id, and holds it
// until commit, so ids commit in order (see the package comment). A reply
// takes its parent's thread. A protocol draft asking for an ACK
// (ack_timeout_sec > 0) stores it pending.
const insertSQL = `WITH serial AS MATERIALIZED (SELECT pg_advisory_xact_lock(?9::bigint))
	INSERT INTO messages (thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at,
		msg_id, task_id, protocol_type, ack_required, ack_timeout_sec, ack_state, answer_key)
	SELECT (SELECT coalesce(m.thread_id, m.id) FROM messages m WHERE m.id = ?1::bigint), ?1::bigint,
		?2::text, ?3::text, ?4::text, ?5::text, ?6::text, ?7::text, ?8::bigint,
		?10::text, ?11::text, ?12::text, CASE WHEN ?13::bigint > 0 THEN 1 ELSE 0 END, ?13::bigint,
		CASE WHEN ?13::bigint > 0 THEN 'pending' ELSE 'none' END, ?14::text
	FROM serial
	RETURNING ` + sqlstore.MessageCols

// insertPlainSQL is insertSQL for the common draft (NewMessage.Plain). The
// columns it leaves out take their defaults (NULL, 0, 'none'), and without
// the parent lookup and the CASEs the statement costs about what a bare
// INSERT does (BenchmarkSend).
const insertPlainSQL = `WITH serial AS MATERIALIZED (SELECT pg_advisory_xact_lock(?1::bigint))
	INSERT INTO messages (sender, recipient, kind, urgency, body, payload, created_at)
	SELECT ?2::text, ?3::text, ?4::text, ?5::text, ?6::text, ?7::text, ?8::bigint
	FROM serial
	RETURNING ` + sqlstore.MessageCols

// InsertMessages stores validated drafts (sqlstore's), and mail must not
// be lost to a server restarting under a running process: a statement
// that surely did not commit (see notCommitted) is tried again for a
// while. Any other cut is returned: it may have committed, and trying
// again could store the mail twice.
func (s *Store) InsertMessages(ctx context.Context, drafts []message.Draft) (ms []message.Message, err error) {
	for pause, deadline := 50*time.Millisecond, time.Now().Add(s.wait); ; pause = min(2*pause, time.Second) {
		ms, err = s.Store.InsertMessages(ctx, drafts)
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

// newestMessageID is the highest message id, read by the feed.
func newestMessageID(ctx context.Context, q querier) (int64, error) {
	var id int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&id); err != nil {
		return 0, fmt.Errorf("read the newest message id: %w", err)
	}
	return id, nil
}
