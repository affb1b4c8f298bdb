package main

import (
	"context"
	"fmt"
	"os"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/verbs"
)

// modeJSON is how --json shows an agent's mode contract (verbs.ModeView).
type modeJSON = verbs.ModeView

// modeOf is the agent's mode contract; caps is the vector its session
// stored, nil to derive it from swarm.toml (as the status verb's rows).
func modeOf(a config.Agent, caps mode.Vector) modeJSON {
	s := a.Spec()
	if caps == nil {
		caps = s.Vector()
	}
	out := modeJSON{Mode: string(s.Kind()), Strategy: string(s.EffectiveStrategy()), TreeRoot: s.TreeRoot, Capabilities: caps}
	if p := s.Profile(); p != "" {
		ps := string(p)
		out.Profile = &ps
	}
	return out
}

// callerOf is who runs this command (DESIGN §13): the session whose door
// the supervisor ran it for, else the operator. The caller is never read
// from a flag or a variable: a CLI process outside the supervisor is the
// operator, and one that runs inside a session of this swarm without going
// through its door (it cleared $SWARM_DOOR) is refused.
func (a *App) callerOf(ctx context.Context, st mailbox.Store, cfg *config.Config) (identity.Caller, error) {
	if a.caller != nil {
		return *a.caller, nil
	}
	if err := a.outsideSessions(); err != nil {
		return identity.Caller{}, err
	}
	return identity.Operator(), nil
}

// outsideSessions refuses a CLI process that runs inside a session of this
// swarm (it or an ancestor was started with the session's door in its
// environment) but did not come through that door: a session acts as
// itself, through its door, and never opens the store.
func (a *App) outsideSessions() error {
	if a.inProcess || a.caller != nil {
		return nil
	}
	l, err := a.layout()
	if err != nil {
		return nil // no repository: nothing to guard
	}
	m, in := proc.InSession(os.Getpid(), l.Root)
	if !in {
		return nil
	}
	return &identity.Refusal{Rule: identity.RuleDoor, What: "swarm " + a.command,
		Why:  fmt.Sprintf("this process runs inside session %s of this swarm (process %d carries its door) but did not come through the door", orUnknown(m.Session), m.Pid),
		Hint: "sessions reach the swarm only through their own door ($" + control.DoorEnv + "); run swarm commands with your session's environment unchanged"}
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// openCaller opens swarm.toml and its store and finds the calling session,
// for the commands an agent runs: the store is the caller's to close.
func (a *App) openCaller(ctx context.Context) (repo.Layout, *config.Config, mailbox.Store, identity.Caller, error) {
	l, cfg, st, err := a.openConfigured(ctx)
	if err != nil {
		return l, nil, nil, identity.Caller{}, err
	}
	who, err := a.callerOf(ctx, st, cfg)
	if err != nil {
		st.Close()
		return l, nil, nil, identity.Caller{}, err
	}
	return l, cfg, st, who, nil
}

// callerFile resolves a file argument of the caller (--payload @file,
// --details @file): relative to the command's directory, and for a
// session only inside its agent's worktree.
func (a *App) callerFile(ctx context.Context, st mailbox.Store, who identity.Caller, name string) (string, error) {
	worktree := ""
	if who.IsSession() {
		ag, err := st.Agent(ctx, who.Agent())
		if err != nil {
			return "", fmt.Errorf("read %s's worktree: %w", who.Agent(), err)
		}
		worktree = ag.Worktree
	}
	return who.File(worktree, a.Cwd, name)
}
