package mode

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Strategy is how an agent goes about its mode's work.
type Strategy string

// Strategies of execute.
const (
	Simple Strategy = "simple"
	Queue  Strategy = "queue"
	Tree   Strategy = "tree"
)

// Strategies of coordinate.
const (
	Default             Strategy = "default"
	IntelligentBatching Strategy = "intelligent-batching"
	DAG                 Strategy = "dag"
)

// Strategies lists the strategies a kind takes, its default first.
func (k Kind) Strategies() []Strategy {
	if k == Coordinate {
		return []Strategy{Default, IntelligentBatching, DAG}
	}
	return []Strategy{Simple, Queue, Tree}
}

// AllStrategies lists every strategy of every kind.
func AllStrategies() []Strategy {
	return append(Execute.Strategies(), Coordinate.Strategies()...)
}

// CheckStrategy says whether mode m takes strategy s ("" always fits: the
// mode's default).
func CheckStrategy(m Mode, s Strategy) error {
	if s == "" || slices.Contains(m.Kind().Strategies(), s) {
		return nil
	}
	var names []string
	for _, x := range m.Kind().Strategies() {
		names = append(names, string(x))
	}
	if slices.Contains(AllStrategies(), s) {
		article := "a"
		if m.Kind() == Execute {
			article = "an"
		}
		return fmt.Errorf("strategy %q does not fit mode %q, %s %s mode (its strategies: %s)", s, m, article, m.Kind(), strings.Join(names, ", "))
	}
	return fmt.Errorf("unknown strategy %q for mode %q (valid: %s)", s, m, strings.Join(names, ", "))
}

// Capability is one thing an agent may do (DESIGN §9.4).
type Capability string

// The capabilities, in the order they are shown.
const (
	CanEditFiles          Capability = "can_edit_files"
	CanRunCommands        Capability = "can_run_commands"
	CanMessage            Capability = "can_message"
	CanDispatch           Capability = "can_dispatch"
	CanClaimTasks         Capability = "can_claim_tasks"
	CanEditTasks          Capability = "can_edit_tasks"
	CanUseQueue           Capability = "can_use_queue"
	CanSpawnSessions      Capability = "can_spawn_sessions"
	CanReportTaskLevel    Capability = "can_report_task_level"
	CanReportSessionLevel Capability = "can_report_session_level"
	CanEscalate           Capability = "can_escalate"
	// CanLand queues the agent's own branch in the merge queue (swarm
	// land, DESIGN §14).
	CanLand Capability = "can_land"
)

// Capabilities lists every capability in display order.
var Capabilities = []Capability{
	CanEditFiles, CanRunCommands, CanMessage, CanDispatch, CanClaimTasks, CanEditTasks,
	CanUseQueue, CanSpawnSessions, CanReportTaskLevel, CanReportSessionLevel, CanEscalate, CanLand,
}

// CapabilityNames lists every capability's name in display order.
func CapabilityNames() []string {
	out := make([]string, len(Capabilities))
	for i, c := range Capabilities {
		out[i] = string(c)
	}
	return out
}

// Valid reports whether c is a known capability.
func (c Capability) Valid() bool { return slices.Contains(Capabilities, c) }

// Vector is a derived capability vector: every capability, on or off. Its
// JSON is {"can_...": bool, ...}.
type Vector map[Capability]bool

// Has reports whether capability c is on.
func (v Vector) Has(c Capability) bool { return v[c] }

// Enabled lists the capabilities that are on, in display order.
func (v Vector) Enabled() []Capability {
	var out []Capability
	for _, c := range Capabilities {
		if v[c] {
			out = append(out, c)
		}
	}
	return out
}

// JSON is the vector as stored with a session.
func (v Vector) JSON() string {
	b, _ := json.Marshal(v)
	return string(b)
}

// ParseVector reads a vector stored with JSON. Unknown names are an
// error; a capability missing from the text is off.
func ParseVector(s string) (Vector, error) {
	var raw map[string]bool
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("read capability vector: %w", err)
	}
	v := Vector{}
	for _, c := range Capabilities {
		v[c] = false
	}
	for name, on := range raw {
		c := Capability(name)
		if !c.Valid() {
			return nil, fmt.Errorf("read capability vector: unknown capability %q", name)
		}
		v[c] = on
	}
	return v, nil
}

// Spec is an agent's configured mode, strategy and capability overrides:
// what the vector is derived from.
type Spec struct {
	Mode      Mode
	Strategy  Strategy            // "" means the mode's default strategy
	Overrides map[Capability]bool // capabilities = { can_... = bool }
	TreeRoot  string              // execute/tree: the beads task whose subtree the agent owns
}

// Kind is the spec's mode word as JSON shows it: execute or coordinate.
func (s Spec) Kind() Kind { return s.Mode.Kind() }

// Profile is the profile configured (code, review, delegate), or "".
func (s Spec) Profile() Mode { return s.Mode.Profile() }

// EffectiveStrategy is the strategy, the mode's default when none is set.
func (s Spec) EffectiveStrategy() Strategy {
	if s.Strategy != "" {
		return s.Strategy
	}
	return s.Kind().Strategies()[0]
}

// NeedsBeads reports whether the strategy cannot work without bd: the
// queue is `bd ready`, and a tree is a beads subtree.
func (s Spec) NeedsBeads() bool {
	st := s.EffectiveStrategy()
	return s.Kind() == Execute && (st == Queue || st == Tree)
}

// Vector derives the capability vector: the defaults of DESIGN §9.4's
// table for the mode and strategy, the review profile's mask, then the
// overrides.
func (s Spec) Vector() Vector {
	v := Vector{}
	for _, c := range Capabilities {
		v[c] = false
	}
	for _, c := range []Capability{CanMessage, CanReportTaskLevel, CanReportSessionLevel, CanEscalate, CanClaimTasks} {
		v[c] = true
	}
	if s.Kind() == Coordinate {
		v[CanDispatch], v[CanEditTasks], v[CanSpawnSessions] = true, true, true
	} else {
		v[CanEditFiles], v[CanRunCommands], v[CanLand] = true, true, true
		v[CanUseQueue] = s.EffectiveStrategy() == Queue
	}
	if specs[s.Mode].review {
		v[CanEditFiles], v[CanRunCommands], v[CanClaimTasks], v[CanUseQueue], v[CanLand] = false, false, false, false, false
	}
	for c, on := range s.Overrides {
		if c.Valid() {
			v[c] = on
		}
	}
	return v
}

// Tools returns the in-process tools the vector grants, in declaration
// order. When beads is false the beads tools are left out, because bd is
// not installed. Reading files is always granted; the swarm tool is
// granted with any command (DESIGN §9.4), and itself runs only the
// commands of Vector.Commands.
func (v Vector) Tools(beads bool) []string {
	var out []string
	for _, t := range AllTools {
		if v.AllowsTool(t, beads) {
			out = append(out, t)
		}
	}
	return out
}

// AllowsTool reports whether the vector grants tool t (beads: bd is
// installed).
func (v Vector) AllowsTool(t string, beads bool) bool {
	switch t {
	case Bash:
		return v[CanRunCommands]
	case ReadFile, ListFiles, Grep:
		return true
	case WriteFile, EditFile:
		return v[CanEditFiles]
	case GitDiff, GitShow:
		// Read-only git for a reviewer, which has no shell to run git in
		// (DESIGN §13.3). A coordinator reads a commit with swarm diff
		// --commit through the swarm tool instead: its base prompt has no
		// room for two more tools.
		return !v[CanRunCommands] && !v[CanDispatch]
	case SendMessage, SendProtocol, Ack:
		return v[CanMessage]
	case Escalate:
		return v[CanEscalate]
	case Swarm:
		return len(v.Commands(beads)) > 0
	case BDClaim, BDClose:
		return beads && v[CanClaimTasks]
	case BDShow:
		return beads && (v[CanClaimTasks] || v[CanEditTasks] || v[CanUseQueue])
	}
	return false
}

// Usable reports whether capability c, on in v, gives the agent anything
// to use now: a tool, or a command line that is built (beads: bd is
// installed). can_spawn_sessions, for one, has nothing until swarm spawn
// exists, and bd's capabilities nothing without bd.
func (v Vector) Usable(c Capability, beads bool) bool {
	if !v[c] {
		return false
	}
	if len(v.CommandsFor(c, beads)) > 0 {
		return true
	}
	without := Vector{}
	for k, on := range v {
		without[k] = on
	}
	without[c] = false
	// A tool it grants that is gone without it (turning can_run_commands
	// off takes bash away and adds the read-only git tools).
	rest := without.Tools(beads)
	for _, t := range v.Tools(beads) {
		if !slices.Contains(rest, t) {
			return true
		}
	}
	return false
}
