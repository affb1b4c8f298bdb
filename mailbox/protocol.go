package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// Resolver answers what protocol validation needs from the store (does a
// msg_id exist, what was it) and from the repository (does a commit
// exist). It implements protocol.Resolver.
type Resolver struct {
	Store Store
	// Commits reports whether the repository has a commit (git, wired by
	// the caller). Nil refuses every commit_hash: nothing may be claimed
	// that cannot be checked.
	Commits func(ctx context.Context, hash string) (bool, error)
}

var _ protocol.Resolver = Resolver{}

// MessageExists reports whether a protocol message with msgID is stored.
func (r Resolver) MessageExists(ctx context.Context, msgID string) (bool, error) {
	_, ok, err := r.Lookup(ctx, msgID)
	return ok, err
}

// Lookup returns what the rules need of the stored protocol message msgID.
func (r Resolver) Lookup(ctx context.Context, msgID string) (protocol.Stored, bool, error) {
	m, err := r.Store.ProtocolMessage(ctx, msgID)
	if errors.Is(err, ErrNoSuchMessage) {
		return protocol.Stored{}, false, nil
	}
	if err != nil {
		return protocol.Stored{}, false, err
	}
	return StoredOf(m), true, nil
}

// CommitExists reports whether the repository has the commit.
func (r Resolver) CommitExists(ctx context.Context, hash string) (bool, error) {
	if r.Commits == nil {
		return false, nil
	}
	return r.Commits(ctx, hash)
}

// StoredOf is the protocol view of a stored protocol message.
func StoredOf(m message.Message) protocol.Stored {
	return protocol.Stored{MsgID: m.MsgID, Type: protocol.Type(m.ProtocolType), From: m.From, To: m.To, TaskID: m.TaskID,
		RequiresAck: m.Ack != nil && m.Ack.Required}
}

// Envelope returns a stored protocol message's envelope.
func Envelope(m message.Message) (protocol.Envelope, error) {
	if m.Kind != message.KindProtocol {
		return protocol.Envelope{}, fmt.Errorf("message #%d is %s mail, not a protocol message", m.ID, m.Kind)
	}
	return protocol.Parse(m.Payload)
}

// buildRetries bounds how often PostProtocol builds a message again after
// another process stored the same msg_id first.
const buildRetries = 5

// PostProtocol builds a protocol message from d with b, which computes the
// envelope (msg_id, from, to, timestamp, ACK defaults) and validates it
// against its type's schema and rules, then validates, stores and wakes it
// like Post: mail of kind protocol whose payload is the envelope and whose
// body is protocol.Body. Nothing invalid is stored: a refused draft
// returns the *protocol.ValidationError naming every failing field. The
// message joins the thread of the first message its context_ref names (an
// ack, of the message it acknowledges), and an ack marks that message
// acked in the same transaction. When
// another process stores the same msg_id first, the message is built
// again. An answer to a request its sender answered already is refused
// with an *AnsweredError (package protocol: "One answer per request").
func (p *Poster) PostProtocol(ctx context.Context, b *protocol.Builder, d protocol.Draft) (message.Message, protocol.Envelope, error) {
	for attempt := 0; ; attempt++ {
		env, data, err := b.Build(ctx, d)
		if err != nil {
			return message.Message{}, env, err
		}
		md := message.Draft{From: env.From, To: env.To, Kind: message.KindProtocol, Body: protocol.Body(env),
			Payload: data, MsgID: env.MsgID, TaskID: env.TaskID, ProtocolType: string(env.Type)}
		if env.RequiresAck {
			md.AckTimeout = env.AckTimeout()
		}
		if d.Urgent {
			md.Urgency = message.Urgent
		}
		if env.Type == protocol.TypeAck {
			var a protocol.Ack
			if err := json.Unmarshal(env.Payload, &a); err != nil {
				return message.Message{}, env, fmt.Errorf("read the ack's payload: %w", err)
			}
			md.AckOf = a.AckOf
		}
		if md.AnswerKey, err = p.answerKey(ctx, env); err != nil {
			return message.Message{}, env, err
		}
		parentRef := md.AckOf
		if len(env.ContextRef) > 0 {
			parentRef = env.ContextRef[0]
		}
		if parentRef != "" {
			parent, err := p.store.ProtocolMessage(ctx, parentRef)
			if err != nil {
				return message.Message{}, env, fmt.Errorf("find the thread of %s: %w", parentRef, err)
			}
			md.ReplyTo = parent.ID
		}
		m, err := p.Post(ctx, md)
		if errors.Is(err, ErrDuplicateMsgID) && attempt < buildRetries {
			continue // the Builder bumps past the id now stored
		}
		return m, env, err
	}
}

// answerKey is the key of the one-answer rule for env (protocol.AnswerKey):
// the request it answers is the first context_ref naming a request of the
// type it answers addressed to its sender, else the newest such request of
// its task. "" when env is no answer, or answers no stored request.
func (p *Poster) answerKey(ctx context.Context, env protocol.Envelope) (string, error) {
	want := env.Type.Answers()
	if want == "" {
		return "", nil
	}
	for _, ref := range env.ContextRef {
		m, err := p.store.ProtocolMessage(ctx, ref)
		if errors.Is(err, ErrNoSuchMessage) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("find the request %s answers: %w", env.MsgID, err)
		}
		if m.ProtocolType == string(want) && m.To == env.From {
			return protocol.AnswerKey(env, m.MsgID), nil
		}
	}
	ms, err := p.store.TaskMessages(ctx, env.TaskID)
	if err != nil {
		return "", fmt.Errorf("find the request %s answers: %w", env.MsgID, err)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if m := ms[i]; m.ProtocolType == string(want) && m.To == env.From {
			return protocol.AnswerKey(env, m.MsgID), nil
		}
	}
	return "", nil
}
