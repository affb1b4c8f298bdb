package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Draft is what a sender supplies; Build computes the rest of the envelope.
type Draft struct {
	Type Type
	// From is the sender: $SWARM_AGENT, operator or swarm. It comes from the
	// caller's identity, never from a model's argument.
	From string
	To   string
	// TaskID names the task the message is about (--task); a ping's is
	// team-<name>.
	TaskID string
	// Payload is the payload JSON as given (--payload); empty means {}.
	Payload []byte
	// ContextRef lists msg_ids this message builds on (--context-ref).
	ContextRef []string
	// AckTimeout asks for an ACK within this time (--ack-timeout), also for
	// a type that needs none by default. Zero keeps the type's default. It
	// is stored in whole seconds, rounded up.
	AckTimeout time.Duration
	// NoAck asks for no ACK (--no-ack).
	NoAck bool
	// Urgent makes the mail urgent: it interrupts the recipient's running
	// session. Only the runtime sets it (the team launch's relaunch ping);
	// it is not part of the envelope.
	Urgent bool
}

// maxBumps bounds the search for a free msg_id. A thousand messages of one
// type and task within a second is far beyond any real swarm; past it
// something is wrong with the clock or the Resolver.
const maxBumps = 1000

// Build checks a draft and returns the envelope and its JSON, ready to store
// as the payload of a mail of kind protocol. It computes protocol_version,
// from, to, timestamp and msg_id; on a msg_id already stored it bumps the
// milliseconds (and the timestamp with them) until the id is free. A draft
// that fails returns a *ValidationError naming every failing field; an error
// of any other type means the Resolver could not answer.
func (b *Builder) Build(ctx context.Context, d Draft) (Envelope, []byte, error) {
	if b.Resolver == nil {
		return Envelope{}, nil, errNoResolver
	}
	var pre collector // problems with the draft itself, found before the schema runs
	env := Envelope{
		ProtocolVersion: Version,
		Type:            d.Type,
		From:            d.From,
		To:              d.To,
		TaskID:          d.TaskID,
		ContextRef:      slices.Clone(d.ContextRef),
	}
	if env.ContextRef == nil {
		env.ContextRef = []string{}
	}
	env.Payload = draftPayload(&pre, d.Payload)
	env.RequiresAck, env.AckTimeoutSec = draftAck(&pre, d)

	at := b.now()
	env.MsgID, env.Timestamp = MsgID(d.Type, d.TaskID, at), Timestamp(at)
	data, err := env.Marshal()
	if err != nil {
		return Envelope{}, nil, fmt.Errorf("protocol: encoding the envelope: %w", err)
	}
	var c collector
	if _, err := b.check(ctx, &c, data, false); err != nil {
		return Envelope{}, nil, err
	}
	// msg_id is derived from type and task_id: when those are wrong, an
	// error on msg_id only repeats them. Problems found in the draft come
	// before anything the schema says about the same field.
	all := pre
	for _, f := range c.fields {
		derived := f.Path == "msg_id" && (c.failedAny("type") || c.failedAny("task_id"))
		if !derived && !pre.failedAny(f.Path) {
			all.fields = append(all.fields, f)
		}
	}
	if err := all.err(d.Type); err != nil {
		return Envelope{}, nil, err
	}

	for i := 0; ; i++ {
		taken, err := b.Resolver.MessageExists(ctx, env.MsgID)
		if err != nil {
			return Envelope{}, nil, fmt.Errorf("protocol: checking that msg_id %s is free: %w", env.MsgID, err)
		}
		if !taken {
			break
		}
		if i == maxBumps {
			return Envelope{}, nil, fmt.Errorf("protocol: no free msg_id for %s %s within %d ms of %s; check the clock and the store", d.Type, d.TaskID, maxBumps, Timestamp(at))
		}
		at = at.Add(time.Millisecond)
		env.MsgID, env.Timestamp = MsgID(d.Type, d.TaskID, at), Timestamp(at)
	}
	data, err = env.Marshal()
	if err != nil {
		return Envelope{}, nil, fmt.Errorf("protocol: encoding the envelope: %w", err)
	}
	return env, data, nil
}

// draftPayload compacts the given payload. It is stored in the sender's
// field order and spelling (only whitespace goes), so what the recipient
// sees and what a workflow forwards is what the sender wrote. A payload
// that is not JSON is reported and replaced by {}, so the rest of the
// message is still checked.
func draftPayload(c *collector, raw []byte) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage("{}") // the schema then names each missing field
	}
	switch {
	case len(raw) > MaxPayload:
		c.addf("payload", "is %d bytes, the limit is %d (1 MiB); put large content in a file in the repository and give its path", len(raw), MaxPayload)
	case !utf8.Valid(raw):
		c.add("payload", "is not valid UTF-8")
	default:
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			var v any
			if uerr := json.Unmarshal(raw, &v); uerr != nil {
				err = uerr // it knows the offset, which Compact does not report
			}
			c.add("payload", "is not valid JSON: "+jsonErr(raw, err))
			break
		}
		return b.Bytes()
	}
	return json.RawMessage("{}")
}

// jsonErr says where JSON broke, since the offset alone is hard to use.
func jsonErr(raw []byte, err error) string {
	se, ok := err.(*json.SyntaxError)
	if !ok {
		return err.Error()
	}
	off := int(min(max(se.Offset, 1), int64(len(raw))))
	near := string(raw[max(0, off-20):off])
	return fmt.Sprintf("%v, at byte %d, after %q", err, se.Offset, near)
}

// draftAck applies --ack-timeout and --no-ack to the type's default.
func draftAck(c *collector, d Draft) (bool, int) {
	requires, timeout := d.Type.DefaultAck()
	switch {
	case d.NoAck && d.AckTimeout != 0:
		c.add("ack_timeout_sec", "--ack-timeout and --no-ack contradict each other; give one")
		return false, 0
	case d.NoAck:
		return false, 0
	case d.AckTimeout < 0:
		c.addf("ack_timeout_sec", "--ack-timeout %s is negative; give a duration such as 5m", d.AckTimeout)
	case d.AckTimeout > 0 && d.AckTimeout < time.Second:
		c.addf("ack_timeout_sec", "--ack-timeout %s is under a second; give a duration such as 5m", d.AckTimeout)
	case d.AckTimeout > 0:
		requires, timeout = true, d.AckTimeout
	}
	secs := int((timeout + time.Second - 1) / time.Second)
	return requires, secs
}

// ReplyTo fills a draft from the message it answers (--reply-to): the task
// id, the answered msg_id first in context_ref, and the recipient when none
// is given (the answered message's sender). A task id already given must be
// the answered message's: an answer about another task is a mistake, and
// refused as a *ValidationError.
func (d *Draft) ReplyTo(answered Envelope) error {
	if d.TaskID != "" && d.TaskID != answered.TaskID {
		return &ValidationError{Type: d.Type, Fields: []FieldError{{
			Path:   "task_id",
			Reason: fmt.Sprintf("is %q, but %s is about %q; leave --task out when replying", d.TaskID, answered.MsgID, answered.TaskID),
		}}}
	}
	d.TaskID = answered.TaskID
	if d.To == "" {
		d.To = answered.From
	}
	refs := []string{answered.MsgID}
	for _, r := range d.ContextRef {
		if r != answered.MsgID {
			refs = append(refs, r)
		}
	}
	d.ContextRef = refs
	return nil
}

// AckDraft is the ACK of a message, sent by its recipient (swarm ack).
func AckDraft(of Envelope, from string) Draft {
	payload, _ := marshal(Ack{AckOf: of.MsgID}) // cannot fail: a struct of one string
	return Draft{Type: TypeAck, From: from, To: of.From, TaskID: of.TaskID, Payload: payload}
}
