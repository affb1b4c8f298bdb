package main

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/repo"
)

func isNotFound(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound)
}

// pokeEscalation tells a running supervisor that escalation id was raised
// or decided, so it holds, releases and notifies now. Without a supervisor
// the row waits for the next 'swarm up', which applies it.
func pokeEscalation(ctx context.Context, l repo.Layout, id int64) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := control.Call(ctx, l, control.Request{Op: control.OpEscalation, Escalation: id}); err != nil && !errors.Is(err, control.ErrNoSupervisor) {
		slog.Warn("tell the supervisor about the escalation; it notices within a second anyway", "escalation", id, "err", err)
	}
}

// parseID reads a message or escalation number: 12 or #12.
func parseID(what, s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(s), "#"), 10, 64)
	if err != nil || n < 1 {
		return 0, usagef("%s must be a number such as 12 or #12, got %q", what, s)
	}
	return n, nil
}
