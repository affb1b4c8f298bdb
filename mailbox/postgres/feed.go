package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/swarmhq/swarm/mailbox"
)

// Feed listens on Channel with a connection of its own. Every table's
// statement trigger notifies it; notifications sent by this store's own
// pooled connections are not news (as SQLite's data_version ignores the
// connection's own commits).
//
// When the listening connection drops, Wait polls the newest message id
// every interval and reconnects with backoff; once it is back it reports
// a change, because anything may have been committed while nobody
// listened, so the reader re-reads. A listening connection that goes
// quiet is pinged now and then, so a silently dead one is noticed too.
func (s *Store) Feed(ctx context.Context, every time.Duration) (mailbox.Feed, error) {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	f := &feed{s: s, every: every, ping: max(every, 15*time.Second)}
	if err := f.connect(ctx); err != nil {
		return nil, fmt.Errorf("listen for changes on %s: %w", s.loc, err)
	}
	last, err := newestMessageID(ctx, s.pool)
	if err != nil {
		f.Close()
		return nil, err
	}
	f.last = last
	return f, nil
}

type feed struct {
	s     *Store
	every time.Duration // the poll interval while the listener is down
	ping  time.Duration // how long the listener may stay quiet before a ping

	conn    *pgx.Conn // the listening connection; nil while down
	last    int64     // the newest message id seen, for polling while down
	backoff time.Duration
	retryAt time.Time
	// dropped counts lost listening connections (tests read it).
	dropped int
}

// listenerPID is the listening backend's pid, 0 while down (tests use it).
func (f *feed) listenerPID() uint32 {
	if f.conn == nil {
		return 0
	}
	return f.conn.PgConn().PID()
}

func (f *feed) connect(ctx context.Context) error {
	c, err := pgx.ConnectConfig(ctx, f.s.cfg.ConnConfig.Copy())
	if err != nil {
		return err
	}
	if _, err := c.Exec(ctx, `LISTEN `+Channel); err != nil {
		c.Close(context.Background())
		return err
	}
	f.conn = c
	return nil
}

func (f *feed) drop() {
	if f.conn != nil {
		f.conn.Close(context.Background())
		f.conn = nil
		f.dropped++
	}
}

// Wait blocks until another connection commits, or ctx ends.
func (f *feed) Wait(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if f.conn == nil {
			changed, err := f.whileDown(ctx)
			if changed || err != nil {
				return err
			}
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, f.ping)
		n, err := f.conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if !f.s.ownPID(n.PID) {
				return nil
			}
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for a while: make sure the listener is still there.
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := f.conn.Exec(pctx, `SELECT 1`)
			cancel()
			if err != nil && ctx.Err() == nil {
				f.drop()
			}
		default:
			// Terminated (a server restart), or the network went away: the
			// pool's idle connections are as dead as this one, and the next
			// statement on one would be cut off after it was sent, leaving
			// it unknown whether it committed. Close them now; new ones wait
			// for the server (InsertMessages, Open).
			f.drop()
			f.s.pool.Reset()
		}
	}
}

// whileDown tries to listen again (with backoff) and polls the newest
// message id meanwhile. It reports a change when the listener is back or
// a new message appeared.
func (f *feed) whileDown(ctx context.Context) (bool, error) {
	if now := time.Now(); !now.Before(f.retryAt) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f.connect(cctx)
		cancel()
		if err == nil {
			f.backoff = 0
			if id, err := newestMessageID(ctx, f.s.pool); err == nil {
				f.last = id
			}
			return true, nil // whatever happened meanwhile: re-read
		}
		if ctx.Err() != nil {
			return false, context.Cause(ctx)
		}
		f.backoff = min(max(2*f.backoff, 50*time.Millisecond), 10*time.Second)
		f.retryAt = now.Add(f.backoff)
	}
	if id, err := newestMessageID(ctx, f.s.pool); err == nil && id != f.last {
		f.last = id
		return true, nil
	}
	t := time.NewTimer(min(f.every, time.Until(f.retryAt)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, context.Cause(ctx)
	case <-t.C:
		return false, nil
	}
}

func (f *feed) Close() error {
	if f.conn != nil {
		err := f.conn.Close(context.Background())
		f.conn = nil
		return err
	}
	return nil
}
