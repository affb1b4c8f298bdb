package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// Raw is the floor the send rate is measured against (make bench, P1 and
// BenchmarkRawInsert): the same row inserted by one prepared statement,
// autocommit, into a database opened with the same DSN and migrated with
// the same schema. It lives here so that only the store implementation
// writes SQL.
type Raw struct {
	db  *sql.DB
	ins *sql.Stmt
}

// OpenRaw creates and migrates a fresh database at path.
func OpenRaw(ctx context.Context, path string) (*Raw, error) {
	db, err := openDB(path, 0)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	ins, err := db.PrepareContext(ctx, `INSERT INTO messages
		(thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at)
		VALUES (NULL, NULL, ?, ?, 'message', 'normal', ?, NULL, ?)`)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Raw{db: db, ins: ins}, nil
}

// Insert stores one message row, nothing else.
func (r *Raw) Insert(ctx context.Context, from, to, body string) error {
	_, err := r.ins.ExecContext(ctx, from, to, body, time.Now().UnixNano())
	return err
}

// Close closes the database.
func (r *Raw) Close() error {
	r.ins.Close()
	return r.db.Close()
}
