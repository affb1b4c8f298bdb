package mailbox

import (
	"context"
	"database/sql"
)

// execer is what *sql.DB and *sql.Tx have in common, so each operation is
// written once and used alone or inside InTx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Tx is a transaction over the store's lifecycle operations. Operations that
// must not be separated by a crash (ending a session, settling its mail and
// moving the agent) go through one Tx.
type Tx struct {
	tx  *sql.Tx
	ctx context.Context // the InTx context: operations inside use it
	now func() int64
}

// InTx runs fn in one immediate transaction; every operation of tx runs
// under ctx. fn must only use tx: the store has a single connection, so
// calling Store methods inside fn would wait on itself.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	return s.tx(ctx, func(t *sql.Tx) error {
		return fn(&Tx{tx: t, ctx: ctx, now: func() int64 { return nanos(s.now()) }})
	})
}
