package swarm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/worktree"
)

// This file is the protocol layer (DESIGN §9.2) as the rule-free
// primitives the protocol verbs (verbs.SendProtocol, Ack, AckAll: the
// CLI's and the engines' tools') and the runtime's own dispatches share:
// it resolves what a reply answers, builds and stores the message through
// the one mail service (Poster.PostProtocol), and raises a
// branch_violation escalation when a dispatch names a protected branch.
// Who may send what (the sender, the capabilities, the reviewer's verdict,
// the current session) is the verbs' to check, once, before they call
// here. The ACK deadlines are enforced by the supervisor's ack-deadlines
// service (acks.go).

// Protocol sends protocol messages and ACKs. It is safe for concurrent use.
type Protocol struct {
	Store  mailbox.Store
	Poster *mailbox.Poster
	// Commits reports whether the repository has a commit (commit_hash
	// must name one). Nil refuses every commit_hash.
	Commits func(ctx context.Context, hash string) (bool, error)
	// Now is the clock of msg_ids and timestamps; nil means time.Now.
	Now func() time.Time
	// Base names the base branch while none is recorded yet (before the
	// first swarm up): the branch checked out at the root. Nil: none.
	Base func(ctx context.Context) string
	// Raise raises an escalation: in the supervisor Supervisor.Raise, in
	// a CLI process Raise plus a poke. Nil raises nothing.
	Raise func(ctx context.Context, d escalation.Draft) (escalation.Escalation, bool, error)
}

// SendRequest is a protocol message to send.
type SendRequest struct {
	// Draft is what the sender supplies. Its From is the sender, as the
	// verb decided it from the caller (or swarm for the runtime), never a
	// model's argument.
	Draft protocol.Draft
	// ReplyTo names the message answered: its number (12 or #12) or its
	// msg_id. It fills task_id, to (when not given) and context_ref.
	ReplyTo string
	// Caller is who sends, as the door established it (DESIGN §13.1), for
	// verbs.SendProtocol's rules; Send itself checks none.
	Caller identity.Caller
}

// BranchViolationError is a dispatch refused for naming a protected
// branch, and the branch_violation escalation it raised. It unwraps to
// the *protocol.ValidationError, so it is a validation failure (exit 2).
type BranchViolationError struct {
	Err        *protocol.ValidationError
	Escalation escalation.Escalation
	Created    bool // false: an open twin was counted instead
	RaiseErr   error
}

func (e *BranchViolationError) Error() string { return e.Err.Error() }
func (e *BranchViolationError) Unwrap() error { return e.Err }

// Note says what became of the escalation, for the sender.
func (e *BranchViolationError) Note() string {
	switch {
	case e.RaiseErr != nil:
		return fmt.Sprintf("the branch_violation escalation could not be raised: %v", e.RaiseErr)
	case e.Escalation.ID == 0:
		return ""
	}
	what := "opened"
	if !e.Created {
		what = fmt.Sprintf("raised again (%d times)", e.Escalation.Count)
	}
	note := fmt.Sprintf("branch_violation escalation %d %s", e.Escalation.ID, what)
	if e.Escalation.Holds() {
		note += fmt.Sprintf("; %s is held until the operator decides it (swarm escalation show %d)", e.Escalation.AgentName(), e.Escalation.ID)
	}
	return note
}

// StaleSessionError refuses an ACK or a task_result from a process of a
// session that is not its agent's current one: a leftover of an earlier
// session cannot act for the new instance. It is not a usage error (exit 1).
type StaleSessionError struct {
	Agent   string
	Given   string // $SWARM_SESSION_ID of the caller, "" when unset
	Current string // the agent's latest session, "" when it has none
	What    string // "acknowledge" or "send a task_result"
}

func (e *StaleSessionError) Error() string {
	switch {
	case e.Current == "":
		return fmt.Sprintf("%s has had no session yet, so nothing of it can %s; run this from inside its session", e.Agent, e.What)
	case e.Given == "":
		return fmt.Sprintf("only %s's current session (%s) can %s, and $SWARM_SESSION_ID is not set here: run it from inside that session", e.Agent, e.Current, e.What)
	}
	return fmt.Sprintf("this process belongs to session %s, but %s's current session is %s: a leftover of an earlier session cannot %s for the new one", e.Given, e.Agent, e.Current, e.What)
}

// Builder returns the protocol builder over the store: the recorded base
// branch (main and master are refused anyway), the repository's commits
// and the clock.
func (p *Protocol) Builder(ctx context.Context) (*protocol.Builder, error) {
	base, _, err := p.Store.Meta(ctx, worktree.MetaBaseBranch)
	if err != nil {
		return nil, fmt.Errorf("read the base branch: %w", err)
	}
	if base == "" && p.Base != nil {
		base = p.Base(ctx)
	}
	return &protocol.Builder{Resolver: mailbox.Resolver{Store: p.Store, Commits: p.Commits}, BaseBranch: base, Now: p.Now}, nil
}

// Send builds, validates and stores a protocol message from d.From,
// checking no rule of who may send it (verbs.SendProtocol does, first).
// Refusals: *protocol.ValidationError (every failing field by its JSON
// path; a *BranchViolationError when a dispatch names a protected branch,
// after raising the escalation), or the mail service's own (an unknown
// recipient, a request answered already).
func (p *Protocol) Send(ctx context.Context, req SendRequest) (message.Message, protocol.Envelope, error) {
	d := req.Draft
	if req.ReplyTo != "" {
		answered, err := p.Envelope(ctx, req.ReplyTo)
		if err != nil {
			return message.Message{}, protocol.Envelope{}, err
		}
		if err := d.ReplyTo(answered); err != nil {
			return message.Message{}, protocol.Envelope{}, err
		}
	}
	b, err := p.Builder(ctx)
	if err != nil {
		return message.Message{}, protocol.Envelope{}, err
	}
	m, env, err := p.Poster.PostProtocol(ctx, b, d)
	var bv *protocol.BranchViolation
	var ve *protocol.ValidationError
	if errors.As(err, &bv) && errors.As(err, &ve) {
		return m, env, p.branchViolation(ctx, d, bv, ve)
	}
	return m, env, err
}

// branchViolation raises the escalation of a dispatch to a protected
// branch: critical, holding the sender when it is an agent. The operator's
// refused dispatch is only a refusal: the operator is the one the desk
// would alert, and nothing was stored.
func (p *Protocol) branchViolation(ctx context.Context, d protocol.Draft, bv *protocol.BranchViolation, ve *protocol.ValidationError) error {
	out := &BranchViolationError{Err: ve}
	if p.Raise == nil || d.From == message.Operator {
		return out
	}
	agent := ""
	if !message.Reserved(d.From) {
		agent = d.From
	}
	summary := fmt.Sprintf("%s dispatched task %s to %s on the protected branch %q", d.From, d.TaskID, d.To, bv.Branch)
	out.Escalation, out.Created, out.RaiseErr = p.Raise(ctx, escalation.Draft{
		Kind: escalation.KindBranchViolation, Hold: agent != "", Agent: agent,
		Summary: summary,
		Details: details(map[string]any{"type": d.Type, "from": d.From, "to": d.To, "task_id": d.TaskID,
			"branch": bv.Branch, "base_branch": bv.Base, "payload": string(d.Payload)}),
		DedupeKey: escalation.DefaultDedupeKey(escalation.KindBranchViolation, agent, "dispatch:"+d.TaskID, bv.Branch),
	})
	return out
}

// CheckSession says whether session is agent's current one (its latest,
// running or last ended), with a *StaleSessionError when it is not: what
// the verbs' own_session rule asks. Operator and swarm have no sessions.
func (p *Protocol) CheckSession(ctx context.Context, agent, session, what string) error {
	if message.Reserved(agent) {
		return nil
	}
	serr := &StaleSessionError{Agent: agent, Given: session, What: what}
	last, err := p.Store.LastSession(ctx, agent, "")
	switch {
	case errors.Is(err, mailbox.ErrNoSuchSession):
		return serr
	case err != nil:
		return fmt.Errorf("read %s's sessions: %w", agent, err)
	}
	serr.Current = SessionID(agent, last.Seq)
	if session != serr.Current {
		return serr
	}
	return nil
}

// Ack acknowledges one message (ref: 12, #12 or a msg_id) as c's agent (or
// the operator, for mail to operator): Owed, then AckEnvelope. Whether c
// may (its capability, its current session) is verbs.Ack's rule.
func (p *Protocol) Ack(ctx context.Context, c identity.Caller, ref string) (message.Message, error) {
	env, err := p.Owed(ctx, c, ref)
	if err != nil {
		return message.Message{}, err
	}
	return p.AckEnvelope(ctx, c, env)
}

// Owed is the envelope of the message ref names when c's agent owes it an
// ACK now: sent to it, asking for one, still open and delivered.
func (p *Protocol) Owed(ctx context.Context, c identity.Caller, ref string) (protocol.Envelope, error) {
	agent := c.Name()
	m, err := ResolveMessage(ctx, p.Store, ref)
	if err != nil {
		return protocol.Envelope{}, err
	}
	env, err := mailbox.Envelope(m)
	if err != nil {
		return protocol.Envelope{}, fmt.Errorf("nothing to acknowledge: %w", err)
	}
	a := m.Ack
	switch {
	case m.To != agent:
		return protocol.Envelope{}, fmt.Errorf("%s was sent to %s, not to %s: only its recipient acknowledges it", m.MsgID, m.To, agent)
	case a == nil || !a.Required:
		return protocol.Envelope{}, fmt.Errorf("%s asks for no ACK: nothing to acknowledge", m.MsgID)
	case a.State == message.AckAcked:
		return protocol.Envelope{}, fmt.Errorf("%s was acknowledged already, at %s: nothing to do", m.MsgID, a.AckedAt.Format(time.RFC3339))
	case a.State == message.AckCancelled:
		return protocol.Envelope{}, fmt.Errorf("%s was cancelled by the operator: do not work on it", m.MsgID)
	case a.DueAt == nil && !message.Reserved(agent):
		return protocol.Envelope{}, fmt.Errorf("%s has not been delivered to %s yet: acknowledge it once it is in your prompt", m.MsgID, agent)
	}
	return env, nil
}

// AckEnvelope stores c's agent's ACK of env (Owed's).
func (p *Protocol) AckEnvelope(ctx context.Context, c identity.Caller, env protocol.Envelope) (message.Message, error) {
	b, err := p.Builder(ctx)
	if err != nil {
		return message.Message{}, err
	}
	sent, _, err := p.Poster.PostProtocol(ctx, b, protocol.AckDraft(env, c.Name()))
	return sent, err
}

// AckAll acknowledges every message that awaits c's ACK and has been
// delivered to it, oldest first, and returns the ACKs it sent (the rules:
// verbs.AckAll).
func (p *Protocol) AckAll(ctx context.Context, c identity.Caller) ([]message.Message, error) {
	agent := c.Name()
	owed, err := p.Store.PendingAcks(ctx, agent)
	if err != nil {
		return nil, err
	}
	var sent []message.Message
	for _, m := range owed {
		a, err := p.Ack(ctx, c, m.MsgID)
		if errors.Is(err, mailbox.ErrAckClosed) {
			continue // acknowledged (or cancelled) meanwhile
		}
		if err != nil {
			return sent, fmt.Errorf("acknowledge %s: %w", m.MsgID, err)
		}
		sent = append(sent, a)
	}
	return sent, nil
}

// Log returns a task's protocol messages, oldest first; with no task, the
// newest limit protocol messages (all when limit is 0).
func (p *Protocol) Log(ctx context.Context, task string, limit int) ([]message.Message, error) {
	if task != "" {
		return p.Store.TaskMessages(ctx, task)
	}
	return p.Store.ProtocolMessages(ctx, limit)
}

// Envelope is the envelope of the protocol message ref names (12, #12 or
// a msg_id); plain mail has none.
func (p *Protocol) Envelope(ctx context.Context, ref string) (protocol.Envelope, error) {
	m, err := ResolveMessage(ctx, p.Store, ref)
	if err != nil {
		return protocol.Envelope{}, err
	}
	if m.Kind != message.KindProtocol {
		return protocol.Envelope{}, fmt.Errorf("message #%d is plain mail, not a protocol message: answer it with 'swarm reply %d' or 'swarm send %s <body> --reply-to %d'", m.ID, m.ID, m.From, m.ID)
	}
	return mailbox.Envelope(m)
}

// ResolveMessage finds the message ref names: its number (12 or #12) or a
// protocol msg_id.
func ResolveMessage(ctx context.Context, st mailbox.Store, ref string) (message.Message, error) {
	ref = strings.TrimSpace(ref)
	if n, ok := MessageNumber(ref); ok {
		m, err := st.Message(ctx, n)
		if errors.Is(err, mailbox.ErrNoSuchMessage) {
			return m, fmt.Errorf("no message #%d: 'swarm inbox <agent>' lists messages with their numbers", n)
		}
		return m, err
	}
	m, err := st.ProtocolMessage(ctx, ref)
	if errors.Is(err, mailbox.ErrNoSuchMessage) {
		return m, fmt.Errorf("no message %q: give a message number (12 or #12) or a protocol msg_id ('swarm protocol log' lists them)", ref)
	}
	return m, err
}

// MessageNumber reads a message number written 12 or #12.
func MessageNumber(ref string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(ref, "#"), 10, 64)
	return n, err == nil && n > 0
}

// protocolTool is the engine's way to send protocol messages and ACKs as
// the agent, from its running session.
type protocolTool struct {
	p      *Protocol
	caller identity.Caller // the running session
	verbs  Verbs
}

func (t protocolTool) Send(ctx context.Context, pm engine.ProtocolMessage) (engine.ProtocolSent, error) {
	d := protocol.Draft{Type: protocol.Type(pm.Type), From: t.caller.Name(), To: pm.To, TaskID: pm.TaskID, Payload: pm.Payload,
		ContextRef: pm.ContextRef, AckTimeout: pm.AckTimeout, NoAck: pm.NoAck}
	req := SendRequest{Draft: d, ReplyTo: pm.ReplyTo, Caller: t.caller}
	m, env, err := t.verbs.SendProtocol(ctx, t.caller, t.p, req)
	var bv *BranchViolationError
	if errors.As(err, &bv) && bv.Note() != "" {
		return engine.ProtocolSent{}, fmt.Errorf("%w\n%s", err, bv.Note())
	}
	if err != nil {
		return engine.ProtocolSent{}, err
	}
	return sentOf(m, env.AckTimeout()), nil
}

func (t protocolTool) Ack(ctx context.Context, ref string, all bool) ([]engine.ProtocolSent, error) {
	acks, err := t.verbs.Ack(ctx, t.caller, t.p, ref, all)
	if err != nil {
		return nil, err
	}
	out := make([]engine.ProtocolSent, len(acks))
	for i, m := range acks {
		out[i] = sentOf(m, 0)
	}
	return out, nil
}

func sentOf(m message.Message, ack time.Duration) engine.ProtocolSent {
	return engine.ProtocolSent{ID: m.ID, MsgID: m.MsgID, To: m.To, AckTimeout: ack}
}
