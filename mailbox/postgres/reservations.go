package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/swarmhq/swarm/mailbox"
)

const reservationCols = `id, agent, glob, exclusive <> 0, reason, created_at, expires_at, released_at`

func scanReservations(rows pgx.Rows) ([]mailbox.Reservation, error) {
	defer rows.Close()
	var out []mailbox.Reservation
	for rows.Next() {
		var r mailbox.Reservation
		var created int64
		var expires, released *int64
		if err := rows.Scan(&r.ID, &r.Agent, &r.Glob, &r.Exclusive, &r.Reason, &created, &expires, &released); err != nil {
			return nil, err
		}
		r.CreatedAt = fromNanos(created)
		r.ExpiresAt = ptrTime(expires)
		r.ReleasedAt = ptrTime(released)
		out = append(out, r)
	}
	return out, rows.Err()
}

func ptrTime(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := fromNanos(*n)
	return &t
}

func ptrNanos(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := nanos(*t)
	return &n
}

func reservations(ctx context.Context, q querier, now time.Time, all bool) ([]mailbox.Reservation, error) {
	query := `SELECT ` + reservationCols + ` FROM reservations`
	var args []any
	if !all {
		query += ` WHERE released_at IS NULL AND (expires_at IS NULL OR expires_at > $1)`
		args = append(args, nanos(now))
	}
	rows, err := q.Query(ctx, query+` ORDER BY created_at, id`, args...)
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
	return reservations(ctx, s.pool, now, all)
}

// Reserve checks and stores reservations in one transaction that first
// locks the table against other writers (readers go on), so racing
// reservations, from any host, are checked one after the other.
func (s *Store) Reserve(ctx context.Context, now time.Time, rs []mailbox.Reservation, check func([]mailbox.Reservation) error) ([]mailbox.Reservation, error) {
	var out []mailbox.Reservation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		if _, err := tx.Exec(ctx, `LOCK TABLE reservations IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("lock reservations: %w", err)
		}
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
			var expires *int64
			err := tx.QueryRow(ctx, `SELECT id, created_at, expires_at FROM reservations
				WHERE agent = $1 AND glob = $2 AND released_at IS NULL`, r.Agent, r.Glob).Scan(&id, &created, &expires)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				if err := tx.QueryRow(ctx, `INSERT INTO reservations (agent, glob, exclusive, reason, created_at, expires_at)
					VALUES ($1, $2, CASE WHEN $3::boolean THEN 1 ELSE 0 END, $4, $5, $6) RETURNING id`,
					r.Agent, r.Glob, r.Exclusive, r.Reason, nanos(now), ptrNanos(r.ExpiresAt)).Scan(&id); err != nil {
					return fmt.Errorf("reserve %s for %s: %w", r.Glob, r.Agent, err)
				}
			case err != nil:
				return fmt.Errorf("reserve %s for %s: %w", r.Glob, r.Agent, err)
			default:
				if expires != nil && *expires <= nanos(now) {
					created = nanos(now) // it had lapsed: a new lease
				}
				if _, err := tx.Exec(ctx, `UPDATE reservations SET exclusive = CASE WHEN $1::boolean THEN 1 ELSE 0 END,
					reason = $2, created_at = $3, expires_at = $4 WHERE id = $5`,
					r.Exclusive, r.Reason, created, ptrNanos(r.ExpiresAt), id); err != nil {
					return fmt.Errorf("refresh the reservation of %s for %s: %w", r.Glob, r.Agent, err)
				}
			}
			rows, err := tx.Query(ctx, `SELECT `+reservationCols+` FROM reservations WHERE id = $1`, id)
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
	query := `UPDATE reservations SET released_at = $1 WHERE agent = $2 AND released_at IS NULL`
	args := []any{nanos(now), agent}
	if len(globs) > 0 {
		query += ` AND glob = ANY($3)`
		args = append(args, globs)
	}
	rows, err := s.pool.Query(ctx, query+` RETURNING `+reservationCols, args...)
	if err != nil {
		return nil, fmt.Errorf("release %s's reservations: %w", agent, err)
	}
	out, err := scanReservations(rows)
	if err != nil {
		return nil, fmt.Errorf("release %s's reservations: %w", agent, err)
	}
	slices.SortFunc(out, func(a, b mailbox.Reservation) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// ExpireReservations releases the held reservations past their expiry.
func (s *Store) ExpireReservations(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE reservations SET released_at = expires_at
		WHERE released_at IS NULL AND expires_at IS NOT NULL AND expires_at <= $1`, nanos(now))
	if err != nil {
		return 0, fmt.Errorf("expire reservations: %w", err)
	}
	return tag.RowsAffected(), nil
}
