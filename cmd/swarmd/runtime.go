package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

// socketRuntime is the CLI's verbs.Runtime: the running supervisor,
// reached through the operator's control socket. With app, the agent is
// checked against swarm.toml first; the live view and the desk give the
// layout only.
type socketRuntime struct {
	app *App
	l   repo.Layout
}

var _ verbs.Runtime = socketRuntime{}

func (r socketRuntime) Pause(ctx context.Context, agent string) (string, error) {
	return r.pause(ctx, agent, true)
}

func (r socketRuntime) Resume(ctx context.Context, agent string) (string, error) {
	return r.pause(ctx, agent, false)
}

// pause checks that agent is one of the swarm's, then asks the supervisor.
func (r socketRuntime) pause(ctx context.Context, agent string, pause bool) (string, error) {
	if r.app == nil {
		return pauseAgent(ctx, r.l, agent, pause)
	}
	l, cfg, err := r.app.loadRunning(ctx)
	if err != nil {
		return "", err
	}
	if _, err := r.app.knownAgent(ctx, l, cfg, agent); err != nil {
		return "", err
	}
	return pauseAgent(ctx, l, agent, pause)
}

func (r socketRuntime) Reload(ctx context.Context) (swarm.ReloadReport, error) {
	var rep swarm.ReloadReport
	l := r.l
	if r.app != nil {
		var err error
		if l, err = r.app.layout(); err != nil {
			return rep, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := control.Call(ctx, l, control.Request{Op: control.OpReload})
	switch {
	case errors.Is(err, control.ErrNoSupervisor):
		return rep, errors.New("no supervisor is running in this repository: nothing to reload ('swarm up' reads swarm.toml when it starts)")
	case err != nil && resp.Error != "":
		return rep, fmt.Errorf("swarm reload: %s", resp.Error)
	case err != nil:
		return rep, fmt.Errorf("swarm reload: %w", err)
	}
	if err := json.Unmarshal(resp.Data, &rep); err != nil {
		return rep, fmt.Errorf("swarm reload: the supervisor's answer does not read (is it an older swarm? restart it): %w", err)
	}
	return rep, nil
}
