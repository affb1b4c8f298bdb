package swarm

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/swarmhq/swarm/mailbox"
)

var errRestarting = errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")

// restartingStore answers only Unavailable: errRestarting is the database away.
type restartingStore struct{ mailbox.Store }

func (restartingStore) Unavailable(err error) bool { return errors.Is(err, errRestarting) }

// A start-up step that meets a database restarting (R9 restarts
// PostgreSQL under starting supervisors) is run again until the database
// is back; any other error ends it at once.
func TestWhileAwayWaitsOutARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		calls := 0
		err := WhileAway(context.Background(), restartingStore{}, nil, log, "record the trusted settings", func() error {
			calls++
			if calls < 3 {
				return errRestarting
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("WhileAway = %v after %d calls; want nil after 3", err, calls)
		}
		calls = 0
		other := errors.New("disk full")
		if err := WhileAway(context.Background(), restartingStore{}, nil, log, "x", func() error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
			t.Fatalf("another error: %v after %d calls; want it after 1", err, calls)
		}
		ctx, cancel := context.WithCancel(context.Background())
		calls = 0
		err = WhileAway(ctx, restartingStore{}, nil, log, "x", func() error { calls++; cancel(); return errRestarting })
		if !errors.Is(err, errRestarting) || calls != 1 {
			t.Fatalf("cancelled while away: %v after %d calls; want errRestarting after 1", err, calls)
		}
	})
}
