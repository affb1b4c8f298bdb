// Package mode is the single source of truth for agent modes, strategies,
// capabilities and the tools and commands each grants (DESIGN §9.4). The
// prompt pipeline reads it to tell the model what it may use, the engines
// read it to decide what to offer, and the swarm commands read it to decide
// what to refuse, so the three can never disagree.
//
// A configured mode is one of two modes, execute or coordinate, or one of
// the three profiles kept from before (code, review, delegate), which name
// a mode plus a capability mask. Spec adds the strategy and the agent's
// capability overrides; Spec.Vector derives the capability vector, once per
// session, and Vector.Tools and Vector.Commands follow from it.
package mode

import (
	"fmt"
	"slices"
	"strings"
)

// Mode names an agent's way of working, as configured: one of the two
// modes (execute, coordinate) or one of the profiles (code, review,
// delegate).
type Mode string

// The profiles, kept from before modes had strategies.
const (
	Code     Mode = "code"
	Delegate Mode = "delegate"
	Review   Mode = "review"
)

// The two modes of DESIGN §9.4, as configured words.
const (
	ExecuteMode    Mode = "execute"
	CoordinateMode Mode = "coordinate"
)

// Kind groups modes the way the coordination design notes do: execute modes
// do the work themselves, coordinate modes hand it out.
type Kind string

const (
	Execute    Kind = "execute"
	Coordinate Kind = "coordinate"
)

// Tool names offered to in-process engines.
const (
	Bash         = "bash"
	ReadFile     = "read_file"
	WriteFile    = "write_file"
	EditFile     = "edit_file"
	ListFiles    = "list_files"
	Grep         = "grep"
	SendMessage  = "send_message"
	SendProtocol = "send_protocol"
	Ack          = "ack"
	Escalate     = "escalate"
	Swarm        = "swarm"
	BDClaim      = "bd_claim"
	BDClose      = "bd_close"
	BDShow       = "bd_show"
	GitDiff      = "git_diff"
	GitShow      = "git_show"
)

// AllTools lists every tool in the order they are declared to a model.
var AllTools = []string{Bash, ReadFile, WriteFile, EditFile, ListFiles, Grep, GitDiff, GitShow, SendMessage, SendProtocol, Ack, Escalate, Swarm, BDClaim, BDClose, BDShow}

// BeadsTools are the tools that need bd on PATH.
var BeadsTools = []string{BDClaim, BDClose, BDShow}

type spec struct {
	kind    Kind
	review  bool // the review profile's mask: no edits, commands, claims or queue
	summary string
}

var specs = map[Mode]spec{
	Code: {
		kind:    Execute,
		summary: "writes and changes code on its own branch",
	},
	Delegate: {
		kind:    Coordinate,
		summary: "plans, splits work into tasks and hands them to teammates; does not edit files",
	},
	Review: {
		kind:    Execute,
		review:  true,
		summary: "reads and judges teammates' work and reports findings; does not edit files",
	},
	ExecuteMode: {
		kind:    Execute,
		summary: "does the work itself, on its own branch",
	},
	CoordinateMode: {
		kind:    Coordinate,
		summary: "decomposes the work and delegates it to teammates; does not edit files",
	},
}

// Names returns the valid mode names, sorted.
func Names() []string {
	names := make([]string, 0, len(specs))
	for m := range specs {
		names = append(names, string(m))
	}
	slices.Sort(names)
	return names
}

// Parse returns the mode with the given name, or an error naming the valid ones.
func Parse(name string) (Mode, error) {
	m := Mode(name)
	if _, ok := specs[m]; !ok {
		return "", fmt.Errorf("unknown mode %q (valid: %s)", name, strings.Join(Names(), ", "))
	}
	return m, nil
}

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool { _, ok := specs[m]; return ok }

// Kind reports whether the mode executes or coordinates.
func (m Mode) Kind() Kind { return specs[m].kind }

// Profile is the profile m names (code, review or delegate), or "" when m
// is one of the two modes.
func (m Mode) Profile() Mode {
	switch m {
	case Code, Review, Delegate:
		return m
	}
	return ""
}

// Summary is a one-line description of the mode.
func (m Mode) Summary() string { return specs[m].summary }

// ClaimsTasks reports whether agents in this mode may claim beads tasks, and
// therefore whether a ready task counts as work waiting for them, with the
// mode's default strategy and no overrides.
func (m Mode) ClaimsTasks() bool { return Spec{Mode: m}.Vector().Has(CanClaimTasks) }

// Tools returns the tools this mode grants with its default strategy and
// no overrides, in declaration order. When beads is false the beads tools
// are left out, because bd is not installed.
func (m Mode) Tools(beads bool) []string { return Spec{Mode: m}.Vector().Tools(beads) }

// Allows reports whether the mode grants tool t (bd present).
func (m Mode) Allows(t string) bool { return slices.Contains(m.Tools(true), t) }

// CanWrite reports whether the mode may change files or run commands.
func (m Mode) CanWrite() bool { return m.Allows(WriteFile) || m.Allows(Bash) }
