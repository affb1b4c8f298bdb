package postgres

import (
	"context"
	"time"
)

// Raw is the floor the send rate is measured against (BenchmarkRawInsert):
// the same row inserted by one statement (pgx prepares and caches it),
// autocommit, into a database migrated with the same schema and reached
// through the same pool settings. It lives here so that only the store
// implementation writes SQL.
type Raw struct {
	s *Store
}

// OpenRaw connects to and migrates the database at rawURL.
func OpenRaw(ctx context.Context, rawURL string) (*Raw, error) {
	s, err := Open(ctx, rawURL, Options{})
	if err != nil {
		return nil, err
	}
	return &Raw{s: s}, nil
}

// Insert stores one message row, nothing else.
func (r *Raw) Insert(ctx context.Context, from, to, body string) error {
	_, err := r.s.pool.Exec(ctx, `INSERT INTO messages
		(thread_id, reply_to, sender, recipient, kind, urgency, body, payload, created_at)
		VALUES (NULL, NULL, $1, $2, 'message', 'normal', $3, NULL, $4)`, from, to, body, time.Now().UnixNano())
	return err
}

// Close closes the database.
func (r *Raw) Close() error { return r.s.Close() }
