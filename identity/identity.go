// Package identity answers "who is asking" (DESIGN §13): the Caller of a
// verb, and the rules that depend only on it.
//
// A Caller is a fact established by the transport, never a claim: the
// supervisor builds a session's Caller from the door (control socket) it
// opened for that session alone, and the operator's from its own door or
// from a CLI process that is not inside any session. No flag, environment
// variable or request field can change it, so nothing outside the doors
// constructs one from user input (internal/deptest keeps the constructors'
// callers few).
//
// Refusal is the typed error every rule returns: it names the rule, the
// caller and what was refused, so the CLI exits 1, MCP answers an error
// result and the web desk a 403, each with the same sentence.
package identity

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/mode"
)

// OperatorName is the operator's name in mail and events.
const OperatorName = "operator"

// SwarmName is the runtime's own name in mail.
const SwarmName = "swarm"

// Caller is who asks: the operator, the runtime itself, or one session of
// one agent with the capability vector stored for that session. The zero
// Caller is nobody: every rule refuses it, so a path that forgot to say
// who asks fails closed instead of acting with the operator's authority.
type Caller struct {
	kind  kind
	agent string // the session's agent
	seq   int64
	caps  mode.Vector
}

type kind uint8

const (
	nobody kind = iota
	operator
	runtime
	session
)

// Operator is the operator's Caller: it may do everything.
func Operator() Caller { return Caller{kind: operator} }

// Runtime is the supervisor acting on its own (the workflow engine, the
// team launch): it may do everything, and speaks as swarm.
func Runtime() Caller { return Caller{kind: runtime} }

// Session is the Caller of session seq of agent with the capability vector
// stored for it. Only a door builds one (swarm's session door, the
// engines' in-process tools of that session, and tests).
func Session(agent string, seq int64, caps mode.Vector) Caller {
	return Caller{kind: session, agent: agent, seq: seq, caps: caps}
}

// IsOperator reports whether the caller is the operator.
func (c Caller) IsOperator() bool { return c.kind == operator }

// IsSession reports whether the caller is an agent's session.
func (c Caller) IsSession() bool { return c.kind == session }

// privileged is the operator or the runtime: no rule refuses them.
func (c Caller) privileged() bool { return c.kind == operator || c.kind == runtime }

// Known reports whether the caller was established (it is not the zero
// Caller).
func (c Caller) Known() bool { return c.kind != nobody }

// Agent is the calling session's agent, "" for the operator.
func (c Caller) Agent() string { return c.agent }

// Seq is the calling session's number, 0 for the operator.
func (c Caller) Seq() int64 { return c.seq }

// Caps is the calling session's capability vector; nil for the operator.
func (c Caller) Caps() mode.Vector { return c.caps }

// SessionID is the calling session's id (backend-3), "" for the operator.
func (c Caller) SessionID() string {
	if !c.IsSession() {
		return ""
	}
	return SessionID(c.agent, c.seq)
}

// Name is the caller's name as a sender of mail: operator, swarm or the
// agent.
func (c Caller) Name() string {
	switch c.kind {
	case operator:
		return OperatorName
	case runtime:
		return SwarmName
	case session:
		return c.agent
	}
	return "nobody"
}

// By is the caller as events and workflow history record it: operator,
// swarm, or <agent>/<session id>.
func (c Caller) By() string {
	if c.IsSession() {
		return c.agent + "/" + c.SessionID()
	}
	return c.Name()
}

func (c Caller) String() string { return c.By() }

// SessionID is the id of session seq of agent: backend-3.
func SessionID(agent string, seq int64) string { return agent + "-" + strconv.FormatInt(seq, 10) }

// Rule names a rule a verb checks.
type Rule string

// The rules.
const (
	RuleCapability   Rule = "capability"    // the session's vector lacks the capability
	RuleOperatorOnly Rule = "operator_only" // only the operator does this
	RuleSender       Rule = "sender"        // --from names someone else
	RuleHoldSelf     Rule = "hold_self"     // an agent holds only itself
	RuleMarkRead     Rule = "mark_read"     // only the operator marks operator mail read
	RuleVerdict      Rule = "verdict"       // only the reviewer's session gives the item's verdict
	RuleStage        Rule = "stage"         // only the stage's agent signals the stage
	RuleWorktree     Rule = "worktree"      // a session's files are in its worktree
	RuleDoor         Rule = "door"          // the request does not fit the door it came through
	RuleOwnSession   Rule = "own_session"   // a session acts only for itself
)

// Refusal is a verb refused by a rule; nothing was done or stored.
type Refusal struct {
	Rule   Rule
	Caller Caller
	// What is the refused action, as a command: "swarm escalation resume".
	What string
	// Why says what the rule needs; Hint what to do instead.
	Why, Hint string
}

func (e *Refusal) Error() string {
	var b strings.Builder
	b.WriteString(e.What + " is refused")
	if e.Caller.Known() {
		b.WriteString(" for " + e.Caller.By())
	}
	if e.Why != "" {
		b.WriteString(": " + e.Why)
	}
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	fmt.Fprintf(&b, " (rule %s)", e.Rule)
	return b.String()
}

// IsRefusal reports whether err is (or wraps) a Refusal, and returns it.
func IsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

func (c Caller) refuse(rule Rule, what, why, hint string) error {
	if !c.Known() {
		why, hint = "nobody established who is asking", "this is a bug in swarm: please report it"
	}
	return &Refusal{Rule: rule, Caller: c, What: what, Why: why, Hint: hint}
}

// Require refuses what the caller's session may not do: its stored vector
// lacks cap. The operator may do everything.
func (c Caller) Require(cap mode.Capability, what string) error {
	if c.privileged() || c.IsSession() && c.caps.Has(cap) {
		return nil
	}
	return c.refuse(RuleCapability, what, fmt.Sprintf("session %s lacks %s", c.SessionID(), cap),
		"see Mode Instructions in your prompt for what you may run; ask operator if you need it")
}

// OperatorOnly refuses what only the operator does.
func (c Caller) OperatorOnly(what string) error {
	if c.privileged() {
		return nil
	}
	return c.refuse(RuleOperatorOnly, what, "only the operator does this, and this runs inside agent session "+c.SessionID(),
		"ask the operator (swarm send operator ...) or escalate")
}

// Sender is the name mail from the caller is sent as. from is the --from
// flag ("" when not given): the operator's flag to speak as a teammate or
// the runtime; a session may only name itself.
func (c Caller) Sender(from string) (string, error) {
	if !c.Known() {
		return "", c.refuse(RuleSender, "sending", "", "")
	}
	if from == "" || from == c.Name() {
		return c.Name(), nil
	}
	if c.privileged() {
		return from, nil
	}
	return "", c.refuse(RuleSender, "--from "+from, "a session sends only as its own agent ("+c.agent+")", "drop --from")
}

// Hold refuses holding an agent other than the caller itself.
func (c Caller) Hold(agent string) error {
	if c.privileged() || c.IsSession() && agent == c.agent {
		return nil
	}
	return c.refuse(RuleHoldSelf, "holding "+agent, "an agent may hold only itself", "escalate without --hold, or ask the operator")
}

// ForAgent refuses acting as or for another agent: a session acts only for
// itself (its inbox, its reports). The operator may act for anyone.
func (c Caller) ForAgent(agent, what string) error {
	if c.privileged() || c.IsSession() && (agent == "" || agent == c.agent) {
		return nil
	}
	return c.refuse(RuleOwnSession, what, "a session acts only for its own agent ("+c.agent+"), not for "+agent, "")
}

// MarkRead refuses marking recipient's mail read unless the caller is the
// operator or the recipient itself.
func (c Caller) MarkRead(recipient string) error {
	if c.privileged() || c.IsSession() && recipient == c.agent {
		return nil
	}
	if recipient == OperatorName {
		return c.refuse(RuleMarkRead, "marking operator's mail read", "only the operator marks the operator's mail read", "read it without --mark-read")
	}
	return c.refuse(RuleMarkRead, "marking "+recipient+"'s mail read", "an agent marks only its own mail read", "read it without --mark-read")
}

// Stage refuses a workflow signal from anyone but the stage's agent. The
// operator signals nothing: the stage's agent does (the operator aborts).
func (c Caller) Stage(stageAgent, what string) error {
	if c.IsSession() && c.agent == stageAgent {
		return nil
	}
	why := "only the stage's agent (" + stageAgent + ") signals it"
	if c.IsOperator() {
		return c.refuse(RuleStage, what, why, "run it from inside "+stageAgent+"'s session, or 'swarm workflow abort' the item")
	}
	return c.refuse(RuleStage, what, why, "")
}

// File resolves a file argument (--payload @file, --details @file) of the
// caller: relative to dir, and for a session only inside its worktree
// (after symlinks), so a session cannot mail out a file it could not read
// itself. The operator's files resolve anywhere.
func (c Caller) File(worktree, dir, name string) (string, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	if c.privileged() {
		return p, nil
	}
	what := "reading @" + name
	if !c.IsSession() || worktree == "" {
		return "", c.refuse(RuleWorktree, what, "the session's worktree is unknown", "pass the content inline or with @-")
	}
	real := resolve(p)
	wt := resolve(worktree)
	if !within(wt, real) {
		return "", c.refuse(RuleWorktree, what, "a session reads files only inside its worktree ("+worktree+")", "copy the file into your worktree, or pass the content with @-")
	}
	return real, nil
}

// resolve is p with its symlinks followed; a missing last element keeps
// its name under its resolved parent, so a missing file inside the
// worktree is the reader's error to report, not a refusal.
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(r, filepath.Base(p))
	}
	return p
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
