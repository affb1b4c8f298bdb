package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/swarmhq/swarm/mailbox"
)

// Damage to the file can show in any statement, long after Open: a read
// of a scribbled page, a row of a query half read. So the driver itself is
// wrapped, and every error it returns that says the file is damaged
// (SQLITE_CORRUPT, SQLITE_NOTADB) wraps mailbox.ErrDamaged, whichever
// method of the store it comes through. Callers test it with errors.Is.

// damagedError is a driver error that says the file is damaged.
type damagedError struct{ err error }

func (e *damagedError) Error() string        { return e.err.Error() }
func (e *damagedError) Unwrap() error        { return e.err }
func (e *damagedError) Is(target error) bool { return target == mailbox.ErrDamaged }

// markDamage wraps err when SQLite says the file is damaged.
func markDamage(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	if c := se.Code() & 0xff; c != sqlite3.SQLITE_CORRUPT && c != sqlite3.SQLITE_NOTADB {
		return err
	}
	if errors.Is(err, mailbox.ErrDamaged) {
		return err
	}
	return &damagedError{err: err}
}

// damageConnector opens modernc's connections for a DSN, wrapped.
type damageConnector struct{ dsn string }

func (c damageConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := (&sqlite.Driver{}).Open(c.dsn)
	if err != nil {
		return nil, markDamage(err)
	}
	return &damageConn{conn: conn}, nil
}

func (c damageConnector) Driver() driver.Driver { return &sqlite.Driver{} }

// The interfaces modernc's connection implements and database/sql uses.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type damageConn struct{ conn driver.Conn }

func (c *damageConn) full() fullConn { return c.conn.(fullConn) }

func (c *damageConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}
func (c *damageConn) Close() error { return markDamage(c.conn.Close()) }
func (c *damageConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}
func (c *damageConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.full().BeginTx(ctx, opts)
	if err != nil {
		return nil, markDamage(err)
	}
	return damageTx{tx}, nil
}
func (c *damageConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.full().PrepareContext(ctx, query)
	if err != nil {
		return nil, markDamage(err)
	}
	return &damageStmt{st.(fullStmt)}, nil
}
func (c *damageConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.full().ExecContext(ctx, query, args)
	return r, markDamage(err)
}
func (c *damageConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.full().QueryContext(ctx, query, args)
	if err != nil {
		return nil, markDamage(err)
	}
	return damageRows{r}, nil
}
func (c *damageConn) Ping(ctx context.Context) error { return markDamage(c.full().Ping(ctx)) }
func (c *damageConn) ResetSession(ctx context.Context) error {
	return c.full().ResetSession(ctx) // driver.ErrBadConn passes unchanged
}
func (c *damageConn) IsValid() bool { return c.full().IsValid() }

type damageTx struct{ tx driver.Tx }

func (t damageTx) Commit() error   { return markDamage(t.tx.Commit()) }
func (t damageTx) Rollback() error { return markDamage(t.tx.Rollback()) }

type fullStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type damageStmt struct{ st fullStmt }

func (s *damageStmt) Close() error  { return markDamage(s.st.Close()) }
func (s *damageStmt) NumInput() int { return s.st.NumInput() }
func (s *damageStmt) Exec(args []driver.Value) (driver.Result, error) {
	r, err := s.st.Exec(args) //nolint:staticcheck // the interface's own method
	return r, markDamage(err)
}
func (s *damageStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.st.Query(args) //nolint:staticcheck // the interface's own method
	if err != nil {
		return nil, markDamage(err)
	}
	return damageRows{r}, nil
}
func (s *damageStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.st.ExecContext(ctx, args)
	return r, markDamage(err)
}
func (s *damageStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.st.QueryContext(ctx, args)
	if err != nil {
		return nil, markDamage(err)
	}
	return damageRows{r}, nil
}

type damageRows struct{ driver.Rows }

// Next keeps io.EOF as it is: database/sql compares it.
func (r damageRows) Next(dest []driver.Value) error { return markDamage(r.Rows.Next(dest)) }
func (r damageRows) Close() error                   { return markDamage(r.Rows.Close()) }
