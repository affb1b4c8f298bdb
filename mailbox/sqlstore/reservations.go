package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/swarmhq/swarm/mailbox"
)

const reservationCols = `id, agent, glob, exclusive <> 0, reason, created_at, expires_at, released_at`

func scanReservations(rows Rows) ([]mailbox.Reservation, error) {
	defer rows.Close()
	var out []mailbox.Reservation
	for rows.Next() {
		var r mailbox.Reservation
		var created int64
		var expires, released sql.NullInt64
		if err := rows.Scan(&r.ID, &r.Agent, &r.Glob, &r.Exclusive, &r.Reason, &created, &expires, &released); err != nil {
			return nil, err
		}
		r.CreatedAt = fromNanos(created)
		r.ExpiresAt = nullTime(expires)
		r.ReleasedAt = nullTime(released)
		out = append(out, r)
	}
	return out, rows.Err()
}

func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

func nullNanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return nanos(*t)
}

func reservations(ctx context.Context, q Querier, now time.Time, all bool) ([]mailbox.Reservation, error) {
	query := `SELECT ` + reservationCols + ` FROM reservations`
	var args []any
	if !all {
		query += ` WHERE released_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`
		args = append(args, nanos(now))
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	out, err := scanReservations(rows)
	if err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	return out, nil
}

// Reservations lists the live reservations, or every one.
func (s *Store) Reservations(ctx context.Context, now time.Time, all bool) ([]mailbox.Reservation, error) {
	return reservations(ctx, s.db, now, all)
}

// Reserve checks and stores reservations in one transaction that other
// writers of reservations wait for (SQLite's write lock, taken at BEGIN;
// PostgreSQL's table lock, Dialect.LockTable; readers go on), so racing
// reservations, from any host, are checked one after the other.
func (s *Store) Reserve(ctx context.Context, now time.Time, rs []mailbox.Reservation, check func([]mailbox.Reservation) error) ([]mailbox.Reservation, error) {
	var out []mailbox.Reservation
	err := s.db.InTx(ctx, func(tx Querier) error {
		if s.dialect.LockTable != nil {
			if _, err := tx.ExecContext(ctx, s.dialect.LockTable("reservations")); err != nil {
				return fmt.Errorf("lock reservations: %w", err)
			}
		}
		out = nil
		live, err := reservations(ctx, tx, now, false)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(live); err != nil {
				return err
			}
		}
		for _, r := range rs {
			var id, created int64
			var expires sql.NullInt64
			err := tx.QueryRowContext(ctx, `SELECT id, created_at, expires_at FROM reservations
				WHERE agent = ? AND glob = ? AND released_at IS NULL`, r.Agent, r.Glob).Scan(&id, &created, &expires)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if err := tx.QueryRowContext(ctx, `INSERT INTO reservations (agent, glob, exclusive, reason, created_at, expires_at)
					VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, r.Agent, r.Glob, r.Exclusive, r.Reason, nanos(now), nullNanos(r.ExpiresAt)).Scan(&id); err != nil {
					return fmt.Errorf("reserve %s for %s: %w", r.Glob, r.Agent, err)
				}
			case err != nil:
				return fmt.Errorf("reserve %s for %s: %w", r.Glob, r.Agent, err)
			default:
				if expires.Valid && expires.Int64 <= nanos(now) {
					created = nanos(now) // it had lapsed: a new lease
				}
				if _, err := tx.ExecContext(ctx, `UPDATE reservations SET exclusive = ?, reason = ?, created_at = ?, expires_at = ?
					WHERE id = ?`, r.Exclusive, r.Reason, created, nullNanos(r.ExpiresAt), id); err != nil {
					return fmt.Errorf("refresh the reservation of %s for %s: %w", r.Glob, r.Agent, err)
				}
			}
			rows, err := tx.QueryContext(ctx, `SELECT `+reservationCols+` FROM reservations WHERE id = ?`, id)
			if err != nil {
				return err
			}
			got, err := scanReservations(rows)
			if err != nil {
				return err
			}
			out = append(out, got...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseReservations releases an agent's held reservations of globs, or
// all of them.
func (s *Store) ReleaseReservations(ctx context.Context, agent string, globs []string, now time.Time) ([]mailbox.Reservation, error) {
	var out []mailbox.Reservation
	err := s.db.InTx(ctx, func(tx Querier) error {
		query := `UPDATE reservations SET released_at = ? WHERE agent = ? AND released_at IS NULL`
		args := []any{nanos(now), agent}
		if len(globs) > 0 {
			query += ` AND glob IN (` + In(len(globs)) + `)`
			args = appendAll(args, globs)
		}
		rows, err := tx.QueryContext(ctx, query+` RETURNING `+reservationCols, args...)
		if err != nil {
			return fmt.Errorf("release %s's reservations: %w", agent, err)
		}
		out, err = scanReservations(rows)
		if err != nil {
			return fmt.Errorf("release %s's reservations: %w", agent, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortReservations(out)
	return out, nil
}

// ExpireReservations releases the held reservations past their expiry.
func (s *Store) ExpireReservations(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE reservations SET released_at = expires_at
		WHERE released_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ?`, nanos(now))
	if err != nil {
		return 0, fmt.Errorf("expire reservations: %w", err)
	}
	return res.RowsAffected()
}

// sortReservations puts rows oldest first, as RETURNING gives no order.
func sortReservations(rs []mailbox.Reservation) {
	slices.SortFunc(rs, func(a, b mailbox.Reservation) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
