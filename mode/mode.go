// Package mode is the single source of truth for agent modes and the tools
// each one grants. The prompt pipeline reads it to tell the model what it may
// use, and the engines read it to decide what to offer, so the two can never
// disagree.
package mode

import (
	"fmt"
	"slices"
	"strings"
)

// Mode names an agent's way of working.
type Mode string

// The built-in modes.
const (
	Code     Mode = "code"
	Delegate Mode = "delegate"
	Review   Mode = "review"
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
	BDClaim      = "bd_claim"
	BDClose      = "bd_close"
	BDShow       = "bd_show"
)

// AllTools lists every tool in the order they are declared to a model.
var AllTools = []string{Bash, ReadFile, WriteFile, EditFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, BDClaim, BDClose, BDShow}

// BeadsTools are the tools that need bd on PATH.
var BeadsTools = []string{BDClaim, BDClose, BDShow}

type spec struct {
	kind    Kind
	tools   []string
	claims  bool // may claim beads tasks, so ready tasks count as work
	summary string
}

var specs = map[Mode]spec{
	Code: {
		kind:    Execute,
		tools:   AllTools,
		claims:  true,
		summary: "writes and changes code on its own branch",
	},
	Delegate: {
		kind:    Coordinate,
		tools:   []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate, BDClaim, BDClose, BDShow},
		claims:  true,
		summary: "plans, splits work into tasks and hands them to teammates; does not edit files",
	},
	Review: {
		kind:    Execute,
		tools:   []string{ReadFile, ListFiles, Grep, SendMessage, SendProtocol, Ack, Escalate},
		claims:  false,
		summary: "reads and judges teammates' work and reports findings; does not edit files",
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

// Summary is a one-line description of the mode.
func (m Mode) Summary() string { return specs[m].summary }

// ClaimsTasks reports whether agents in this mode may claim beads tasks, and
// therefore whether a ready task counts as work waiting for them.
func (m Mode) ClaimsTasks() bool { return specs[m].claims }

// Tools returns the tools this mode grants, in declaration order. When
// beads is false the beads tools are left out, because bd is not installed.
func (m Mode) Tools(beads bool) []string {
	var out []string
	for _, t := range specs[m].tools {
		if !beads && slices.Contains(BeadsTools, t) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// Allows reports whether the mode grants tool t.
func (m Mode) Allows(t string) bool { return slices.Contains(specs[m].tools, t) }

// CanWrite reports whether the mode may change files or run commands.
func (m Mode) CanWrite() bool { return m.Allows(WriteFile) || m.Allows(Bash) }
