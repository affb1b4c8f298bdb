package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/swarmhq/swarm/mailbox"
)

// guarded is the store's connection pool with the rules every write
// follows: a database busy beyond busy_timeout (another process holds the
// write lock that long under load) is waited out with a bounded backoff
// before the write gives up, and a write that failed for want of space
// says so. Reads need neither: in WAL mode they never wait on a writer.
type guarded struct {
	*sql.DB
	path string
	wait time.Duration // how long a write keeps retrying a busy database
	busy func()        // Options.Busy
}

// ExecContext runs one statement outside a transaction. A statement that
// found the database busy committed nothing, so it is run again.
func (g *guarded) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := g.whileBusy(ctx, func() (err error) {
		res, err = g.DB.ExecContext(ctx, query, args...)
		return err
	})
	return res, g.explain(err)
}

// BeginTx begins an immediate transaction: it takes the write lock, and
// waits (bounded) while another process holds it. Nothing ran yet, so a
// retry is always safe, whatever the transaction will do.
func (g *guarded) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	var tx *sql.Tx
	err := g.whileBusy(ctx, func() (err error) {
		tx, err = g.DB.BeginTx(ctx, opts)
		return err
	})
	return tx, err
}

// whileBusy runs fn again while it fails with SQLITE_BUSY or SQLITE_LOCKED,
// backing off from 10 ms to 1 s, for up to g.wait in all. Each attempt
// already waited busy_timeout inside SQLite.
func (g *guarded) whileBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(g.wait)
	pause := 10 * time.Millisecond
	for {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		if g.busy != nil {
			g.busy()
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// explain turns a write that failed for want of space into a
// mailbox.DiskFullError naming the database. SQLite says SQLITE_FULL when
// it knows; a write into the WAL or its index that the file system
// refuses can surface as a disk I/O error instead (778, SQLITE_IOERR_WRITE),
// which is taken for a full disk when the file system has (almost) no
// space left.
func (g *guarded) explain(err error) error { return diskFull(g.path, err) }

// diskFull is explain for the database at path, for the writes an open
// makes too (its migrations, the WAL index).
func diskFull(path string, err error) error {
	if err == nil {
		return nil
	}
	var full *mailbox.DiskFullError
	if errors.As(err, &full) {
		return err
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	free := freeBytes(filepath.Dir(path))
	switch code := se.Code(); {
	case code&0xff == sqlite3.SQLITE_FULL:
	case code&0xff == sqlite3.SQLITE_IOERR && free >= 0 && free < lowSpace:
	default:
		return err
	}
	return fmt.Errorf("%w", &mailbox.DiskFullError{Path: path, Free: free, Err: err})
}

// lowSpace is the free space under which a disk I/O error on a write is
// taken for a full disk: less than a few pages of WAL.
const lowSpace = 256 << 10

// freeBytes is the space an unprivileged writer has left on dir's file
// system, -1 when it cannot be read.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fileID is a file's identity: its device and inode. A database deleted
// and created again, or replaced by a rename, has another.
type fileID struct{ dev, ino uint64 }

func identify(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, nil
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// checkFile verifies that the path still names the file this store
// opened. A process that keeps writing to a deleted (or replaced) database
// loses everything it writes, and the other processes see none of it.
func (s *Store) checkFile() error {
	if s.id == (fileID{}) {
		return nil
	}
	id, err := identify(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s was deleted while this process had it open; what is written now would be lost: stop ('swarm down', or Ctrl-C), then run 'swarm init' and 'swarm up' again", mailbox.ErrDatabaseGone, s.path)
	case err != nil:
		return fmt.Errorf("check database %s: %w", s.path, err)
	case id != s.id:
		return fmt.Errorf("%w: %s is another file than the one this process opened (it was replaced or created again); what is written now would go to the old one: stop ('swarm down', or Ctrl-C) and run 'swarm up' again", mailbox.ErrDatabaseGone, s.path)
	}
	return nil
}
