// Package verbs is swarm's application layer (DESIGN §13.1): every use case
// a door offers — the CLI, `swarm mcp`, the live view, the web desk, the
// control socket — is a function here taking the context, the caller the
// door established (identity.Caller, never a request field) and the
// request. Each verb checks its rule first and refuses with an
// *identity.Refusal naming it; the supervisor's runtime (runners,
// sessions, services) stays in package swarm, which this package calls
// for the rule-free primitives they share (swarm.Raise, swarm.Enqueue,
// swarm.Protocol, ...). Table lists every verb, its doors and its rule.
package verbs

import (
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/swarm"
)

// UsageError is invalid input to a verb (exit 2 from the CLI).
type UsageError = swarm.UsageError

// BranchViolationError is a dispatch refused for naming a protected branch.
type BranchViolationError = swarm.BranchViolationError

// ErrDecided means the escalation was decided already.
var ErrDecided = swarm.ErrDecided

// operatorOnly is the rule of the verbs only the operator runs, in the
// words the CLI has always used ('swarm down').
func operatorOnly(c identity.Caller, command string) error {
	return c.OperatorOnly("'" + command + "'")
}
