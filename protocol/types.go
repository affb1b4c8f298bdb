package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Version is the protocol_version of every envelope this package writes.
const Version = "AMP/1.0"

// MaxPayload is the largest payload accepted, in bytes. It keeps a prompt
// and a database row bounded; a bigger diff or log belongs in a file in the
// repository, referenced by path.
const MaxPayload = 1 << 20

// MaxDepth is how deep a payload's JSON may nest (escalation's details
// cap the same: escalation.MaxDetailsDepth).
const MaxDepth = 64

// Type is what a protocol message is for.
type Type string

// The protocol's message types.
const (
	TypeTaskDispatch  Type = "task_dispatch"
	TypeTaskResult    Type = "task_result"
	TypeReviewRequest Type = "review_request"
	TypeReviewVerdict Type = "review_verdict"
	TypeEscalation    Type = "escalation"
	TypeAck           Type = "ack"
	TypePing          Type = "ping"
)

// Types lists every type in the order the design lists them.
var Types = []Type{TypeTaskDispatch, TypeTaskResult, TypeReviewRequest, TypeReviewVerdict, TypeEscalation, TypeAck, TypePing}

// Valid reports whether t is a known type.
func (t Type) Valid() bool { return slices.Contains(Types, t) }

// DefaultAck says whether a message of this type needs an ACK by default, and
// how long the recipient has. A dispatch and a review request block a
// workflow until acknowledged; a ping is the team launch's readiness check,
// which the launch usually sends with its own ready_timeout. Everything else
// is an answer or a notice and needs none.
func (t Type) DefaultAck() (requires bool, timeout time.Duration) {
	switch t {
	case TypeTaskDispatch:
		return true, 300 * time.Second
	case TypeReviewRequest:
		return true, 600 * time.Second
	case TypePing:
		return true, 60 * time.Second
	}
	return false, 0
}

// Answers is the type of request a message of type t answers: a
// task_result answers a task_dispatch, a review_verdict a review_request.
// "" for the other types, which are not answers (see the package doc's
// "One answer per request").
func (t Type) Answers() Type {
	switch t {
	case TypeTaskResult:
		return TypeTaskDispatch
	case TypeReviewVerdict:
		return TypeReviewRequest
	}
	return ""
}

// AnswerKey names what an answer answers, for the store's rule of one
// answer per request and sender: the request's msg_id, and for a
// task_result about one subtask, "#" and its subtask_id (each subtask may
// be answered once, and the whole task once). "" when env is not an answer
// or request is "".
func AnswerKey(env Envelope, request string) string {
	if request == "" || env.Type.Answers() == "" {
		return ""
	}
	if env.Type == TypeTaskResult {
		var r struct {
			SubtaskID string `json:"subtask_id"`
		}
		if json.Unmarshal(env.Payload, &r) == nil && r.SubtaskID != "" {
			return request + "#" + r.SubtaskID
		}
	}
	return request
}

func typeList() string {
	s := make([]string, len(Types))
	for i, t := range Types {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// Envelope is a protocol message as stored. The JSON names are the contract
// of §9.2; Payload holds the payload exactly as stored (compact JSON, in the
// sender's field order), which is what the prompt shows and what a workflow
// forwards verbatim.
type Envelope struct {
	ProtocolVersion string          `json:"protocol_version"`
	MsgID           string          `json:"msg_id"`
	Type            Type            `json:"type"`
	From            string          `json:"from"`
	To              string          `json:"to"`
	TaskID          string          `json:"task_id"`
	Timestamp       string          `json:"timestamp"`
	RequiresAck     bool            `json:"requires_ack"`
	AckTimeoutSec   int             `json:"ack_timeout_sec"`
	ContextRef      []string        `json:"context_ref"`
	Payload         json.RawMessage `json:"payload"`
}

// TimestampLayout is how timestamps are written: RFC 3339, UTC, milliseconds.
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// Time parses the envelope's timestamp.
func (e Envelope) Time() (time.Time, error) {
	return time.Parse(TimestampLayout, e.Timestamp)
}

// AckTimeout is ack_timeout_sec as a duration.
func (e Envelope) AckTimeout() time.Duration { return time.Duration(e.AckTimeoutSec) * time.Second }

// Marshal encodes the envelope as stored: compact, fields in contract order,
// and without HTML escaping, so a diff's "<" and "&&" stay readable in the
// database and in prompts.
func (e Envelope) Marshal() ([]byte, error) {
	if e.ContextRef == nil {
		e.ContextRef = []string{} // the contract has an array, never null
	}
	return marshal(e)
}

// Parse decodes a stored envelope without checking it; use
// [Builder.Validate] for that. It is what readers (the prompt, swarm inbox,
// the workflow engine) use on envelopes the store already accepted.
func Parse(data []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return Envelope{}, fmt.Errorf("protocol: not an AMP/1.0 envelope: %w", err)
	}
	return e, nil
}

// Payload is implemented by the typed payload of each type.
type Payload interface {
	PayloadType() Type
}

// TaskDispatch asks an agent to do a task.
type TaskDispatch struct {
	Description        string    `json:"description"`
	Branch             string    `json:"branch"`
	AcceptanceCriteria []string  `json:"acceptance_criteria"`
	RiskLevel          string    `json:"risk_level"` // low, medium or high
	Repo               string    `json:"repo,omitempty"`
	Subtasks           []Subtask `json:"subtasks,omitempty"`
	ForbiddenActions   []string  `json:"forbidden_actions,omitempty"`
	TimeoutMinutes     int       `json:"timeout_minutes,omitempty"`
}

// Subtask is one part of a dispatched task.
type Subtask struct {
	SubtaskID   string `json:"subtask_id"`
	Description string `json:"description"`
}

// TaskResult reports how a dispatched task (or one subtask) ended.
type TaskResult struct {
	Status     string   `json:"status"` // completed, failed or blocked
	Summary    string   `json:"summary"`
	WorkLog    string   `json:"work_log,omitempty"`
	CommitHash string   `json:"commit_hash,omitempty"`
	Artifacts  []string `json:"artifacts,omitempty"` // paths in the repository
	SubtaskID  string   `json:"subtask_id,omitempty"`
}

// ReviewRequest asks a reviewer to judge a task result against the
// dispatch's criteria.
type ReviewRequest struct {
	OriginalDispatchRef string   `json:"original_dispatch_ref"`
	TaskResultRef       string   `json:"task_result_ref"`
	RejectCount         int      `json:"reject_count"`
	AcceptanceCriteria  []string `json:"acceptance_criteria"`
	Diff                string   `json:"diff,omitempty"`
	CIStatus            string   `json:"ci_status,omitempty"`
	CoordinatorNotes    string   `json:"coordinator_notes,omitempty"`
}

// ReviewVerdict is a reviewer's judgment. Issues must be non-empty when the
// verdict is rejected: they are forwarded verbatim as the next dispatch's
// instructions.
type ReviewVerdict struct {
	Verdict string   `json:"verdict"` // approved or rejected
	Issues  []string `json:"issues,omitempty"`
	Summary string   `json:"summary,omitempty"`
}

// Escalation raises a problem with whoever coordinates the task.
type Escalation struct {
	Reason  string          `json:"reason"`
	Summary string          `json:"summary"`
	Details json.RawMessage `json:"details,omitempty"` // a string, object or array
}

// Ack acknowledges a message that required an ACK.
type Ack struct {
	AckOf string `json:"ack_of"`
}

// Ping is the team launch's readiness check; the recipient answers with an
// ACK.
type Ping struct {
	Code string `json:"code"` // for example CORE_BOOTSTRAP_PING
}

// PayloadType implements Payload.
func (TaskDispatch) PayloadType() Type { return TypeTaskDispatch }

// PayloadType implements Payload.
func (TaskResult) PayloadType() Type { return TypeTaskResult }

// PayloadType implements Payload.
func (ReviewRequest) PayloadType() Type { return TypeReviewRequest }

// PayloadType implements Payload.
func (ReviewVerdict) PayloadType() Type { return TypeReviewVerdict }

// PayloadType implements Payload.
func (Escalation) PayloadType() Type { return TypeEscalation }

// PayloadType implements Payload.
func (Ack) PayloadType() Type { return TypeAck }

// PayloadType implements Payload.
func (Ping) PayloadType() Type { return TypePing }

// newPayload returns a pointer to a zero payload of type t, or nil.
func newPayload(t Type) Payload {
	switch t {
	case TypeTaskDispatch:
		return &TaskDispatch{}
	case TypeTaskResult:
		return &TaskResult{}
	case TypeReviewRequest:
		return &ReviewRequest{}
	case TypeReviewVerdict:
		return &ReviewVerdict{}
	case TypeEscalation:
		return &Escalation{}
	case TypeAck:
		return &Ack{}
	case TypePing:
		return &Ping{}
	}
	return nil
}

// DecodePayload decodes the payload into its typed struct and returns it
// by value (TaskDispatch, TaskResult, ...). Use a type switch on the result.
func (e Envelope) DecodePayload() (Payload, error) {
	p := newPayload(e.Type)
	if p == nil {
		return nil, fmt.Errorf("protocol: unknown type %q: use one of %s", e.Type, typeList())
	}
	if err := json.Unmarshal(e.Payload, p); err != nil {
		return nil, fmt.Errorf("protocol: %s payload of %s: %w", e.Type, e.MsgID, err)
	}
	return deref(p), nil
}

func deref(p Payload) Payload {
	switch v := p.(type) {
	case *TaskDispatch:
		return *v
	case *TaskResult:
		return *v
	case *ReviewRequest:
		return *v
	case *ReviewVerdict:
		return *v
	case *Escalation:
		return *v
	case *Ack:
		return *v
	case *Ping:
		return *v
	}
	return p
}

// MarshalPayload encodes a typed payload for a [Draft], for Go callers (the
// workflow engine, the team launch) that build messages from data.
func MarshalPayload(p Payload) ([]byte, error) { return marshal(p) }

// marshal is json.Marshal without HTML escaping and without the trailing
// newline an Encoder adds.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
