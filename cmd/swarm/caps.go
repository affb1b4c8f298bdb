package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
)

// modeJSON is how --json shows an agent's mode contract (DESIGN §9.4):
// "mode" is execute or coordinate, "profile" the old word or null.
type modeJSON struct {
	Mode         string      `json:"mode"`
	Profile      *string     `json:"profile"`
	Strategy     string      `json:"strategy"`
	TreeRoot     string      `json:"tree_root,omitempty"`
	Capabilities mode.Vector `json:"capabilities"`
}

// modeOf is the agent's mode contract; caps is the vector its session
// stored, nil to derive it from swarm.toml.
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

// caller is who runs a command: an agent's session, or the operator.
type caller struct {
	Agent string // "" for the operator
	Seq   int64
	Caps  mode.Vector
}

// InSession reports whether the command runs inside an agent's session.
func (c caller) InSession() bool { return c.Agent != "" }

// callerOf finds the session a command runs in, from $SWARM_AGENT and
// $SWARM_SESSION_ID (its number from $SWARM_SESSION_SEQ, else from the id),
// and reads its capability vector from the stored session row, never from
// a flag. A session recorded before capabilities were stored, or not
// recorded at all, has its agent's configured vector. Outside a session
// (either variable unset) the caller is the operator, who may do
// everything.
func (a *App) callerOf(ctx context.Context, st mailbox.Store, cfg *config.Config) (caller, error) {
	agent, id := a.Env.Getenv("SWARM_AGENT"), a.Env.Getenv("SWARM_SESSION_ID")
	if agent == "" || id == "" {
		return caller{}, nil
	}
	seqText := a.Env.Getenv("SWARM_SESSION_SEQ")
	if seqText == "" {
		seqText, _ = strings.CutPrefix(id, agent+"-")
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || swarm.SessionID(agent, seq) != id {
		return caller{}, fmt.Errorf("this command runs inside session %q, which is not a session of %s ($SWARM_AGENT) numbered $SWARM_SESSION_SEQ (%q); do not change the SWARM_* variables", id, agent, a.Env.Getenv("SWARM_SESSION_SEQ"))
	}
	sess, err := st.Session(ctx, agent, seq)
	if err != nil && !errors.Is(err, mailbox.ErrNoSuchSession) {
		return caller{}, err
	}
	caps := sess.Capabilities
	if caps == nil {
		ag, ok := cfg.Agent(agent)
		if !ok {
			return caller{}, fmt.Errorf("this command runs inside session %s of %s, which swarm.toml does not have, so its capabilities are unknown; run swarm commands from a session swarm started", id, agent)
		}
		caps = ag.Spec().Vector()
	}
	return caller{Agent: agent, Seq: seq, Caps: caps}, nil
}

// openCaller opens swarm.toml and its store and finds the calling session,
// for the commands an agent runs: the store is the caller's to close.
func (a *App) openCaller(ctx context.Context) (repo.Layout, *config.Config, mailbox.Store, caller, error) {
	l, cfg, st, err := a.openConfigured(ctx)
	if err != nil {
		return l, nil, nil, caller{}, err
	}
	who, err := a.callerOf(ctx, st, cfg)
	if err != nil {
		st.Close()
		return l, nil, nil, caller{}, err
	}
	return l, cfg, st, who, nil
}

// require refuses what the caller's session may not do: the error names
// the capability and what to do instead. The operator may do everything.
func (c caller) require(cap mode.Capability, what string) error {
	if !c.InSession() || c.Caps.Has(cap) {
		return nil
	}
	return fmt.Errorf("%s is not allowed for %s: session %s lacks %s (see Mode Instructions in your prompt for what you may run; ask operator if you need it)", what, c.Agent, swarm.SessionID(c.Agent, c.Seq), cap)
}

// requireCap refuses, from inside a session, a command whose capability
// the session lacks (exit 1, naming it); the operator may run it.
func (a *App) requireCap(ctx context.Context, st mailbox.Store, cfg *config.Config, cap mode.Capability, what string) error {
	who, err := a.callerOf(ctx, st, cfg)
	if err != nil {
		return err
	}
	return who.require(cap, what)
}
