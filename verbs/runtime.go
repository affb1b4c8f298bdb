package verbs

import (
	"context"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/swarm"
)

// The runtime's verbs: pausing and resuming an agent, reloading
// swarm.toml, bringing the swarm up or down, serving the web desk. They
// are the operator's. The runtime itself (the supervisor) is reached
// through Runtime, which the supervisor and the CLI's socket client
// implement, or through the door's own work for what starts or ends a
// process (run).

// Runtime is what the runtime verbs ask of a running swarm (swarm.Runtime
// has the same methods).
type Runtime interface {
	// Pause pauses agent and says what that does (swarm.PauseNow, ...).
	Pause(ctx context.Context, agent string) (string, error)
	// Resume resumes agent (swarm.Resumed).
	Resume(ctx context.Context, agent string) (string, error)
	// Reload re-reads swarm.toml.
	Reload(ctx context.Context) (swarm.ReloadReport, error)
}

var _ Runtime = (*swarm.Supervisor)(nil)

// Pause is the pause verb, the operator's.
func Pause(ctx context.Context, c identity.Caller, rt Runtime, agent string) (string, error) {
	if err := operatorOnly(c, "swarm pause"); err != nil {
		return "", err
	}
	return rt.Pause(ctx, agent)
}

// Resume is the resume verb, the operator's.
func Resume(ctx context.Context, c identity.Caller, rt Runtime, agent string) (string, error) {
	if err := operatorOnly(c, "swarm resume"); err != nil {
		return "", err
	}
	return rt.Resume(ctx, agent)
}

// Reload is the reload verb, the operator's.
func Reload(ctx context.Context, c identity.Caller, rt Runtime) (swarm.ReloadReport, error) {
	if err := operatorOnly(c, "swarm reload"); err != nil {
		return swarm.ReloadReport{}, err
	}
	return rt.Reload(ctx)
}

// Stop is the stop verb of the operator's socket ({"op":"stop"}, what a
// running `swarm down` asks): the operator's. stop asks the supervisor to
// stop.
func Stop(ctx context.Context, c identity.Caller, stop func()) error {
	if err := operatorOnly(c, "swarm down"); err != nil {
		return err
	}
	stop()
	return nil
}

// Up is the up verb, the operator's: run starts the supervisor in this
// process (the door's work, a process boundary).
func Up(ctx context.Context, c identity.Caller, run func(context.Context) error) error {
	if err := operatorOnly(c, "swarm up"); err != nil {
		return err
	}
	return run(ctx)
}

// Down is the stop verb (`swarm down`), the operator's: the running
// supervisor stops, and the agents' work is kept, merged, squashed or
// discarded.
func Down(ctx context.Context, c identity.Caller, req swarm.DownRequest) (swarm.DownResult, error) {
	if err := operatorOnly(c, "swarm down"); err != nil {
		return swarm.DownResult{}, err
	}
	return swarm.Down(ctx, req)
}

// Web is the web desk's verb, the operator's: run serves the desk.
func Web(ctx context.Context, c identity.Caller, run func(context.Context) error) error {
	if err := operatorOnly(c, "swarm web"); err != nil {
		return err
	}
	return run(ctx)
}
