// Package message holds the mailbox's domain types and the rules a message
// must follow before it is stored. It has no storage code, so the rules can
// be fuzzed without compiling SQLite.
package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Operator is the human at the CLI: a valid sender and recipient that is
// never an agent.
const Operator = "operator"

// Swarm is the runtime's own address: the supervisor sends reminders (and,
// later, workflow dispatches and team pings) from it, and agents answer it
// like anyone else. Like operator it is a valid sender and recipient that
// no agent may take.
const Swarm = "swarm"

// Reserved reports whether name belongs to the runtime or the human rather
// than to an agent: operator and swarm.
func Reserved(name string) bool { return name == Operator || name == Swarm }

// MaxBody is the largest body accepted, in bytes.
const MaxBody = 256 << 10

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// ValidName reports whether name is a well-formed agent name. The rule keeps
// names safe as branch names, directory names and addresses.
func ValidName(name string) bool { return len(name) <= 64 && namePattern.MatchString(name) }

// Kind says what a message is for. Only some kinds wake an idle agent.
type Kind string

const (
	KindMessage  Kind = "message"
	KindTask     Kind = "task"
	KindStatus   Kind = "status"
	KindNudge    Kind = "nudge"
	KindProtocol Kind = "protocol"
)

// Kinds lists every kind.
var Kinds = []Kind{KindMessage, KindTask, KindStatus, KindNudge, KindProtocol}

// Wakes reports whether queued mail of this kind counts as work waiting.
// Status mail is informational and never starts a session on its own.
func (k Kind) Wakes() bool { return k != KindStatus && k.Valid() }

// AckType is the protocol type of an ACK.
const AckType = "ack"

// Wakes reports whether queued mail of kind k and protocol type pt ("" for
// mail that is not protocol) counts as work waiting. An ACK is
// informational like status mail: the recipient reads it in its next
// session, but it never starts one (a dispatcher would otherwise spend a
// whole session on every ACK).
func Wakes(k Kind, pt string) bool { return k.Wakes() && !(k == KindProtocol && pt == AckType) }

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// Urgency is normal or urgent. Urgent mail interrupts a running session.
type Urgency string

const (
	Normal Urgency = "normal"
	Urgent Urgency = "urgent"
)

// State is where a message is in its delivery.
type State string

const (
	Queued    State = "queued"    // waiting for the recipient's next prompt
	Delivered State = "delivered" // shown in session SessionSeq, which has not ended well yet
	Done      State = "done"      // its session completed
)

// States lists every state.
var States = []State{Queued, Delivered, Done}

// AckState is where a protocol message's ACK stands (DESIGN §9.2).
type AckState string

const (
	AckNone      AckState = "none"      // no ACK asked for (and all mail that is not protocol)
	AckPending   AckState = "pending"   // waiting; the deadline runs from the first delivery
	AckAcked     AckState = "acked"     // the recipient acknowledged it
	AckOverdue   AckState = "overdue"   // the deadline passed; an ack_timeout was raised
	AckCancelled AckState = "cancelled" // the operator aborted it (swarm escalation abort)
)

// AckStates lists every ACK state.
var AckStates = []AckState{AckNone, AckPending, AckAcked, AckOverdue, AckCancelled}

// Open reports whether an ACK is still awaited: pending or overdue. A late
// ACK is still taken.
func (s AckState) Open() bool { return s == AckPending || s == AckOverdue }

// Ack is a protocol message's ACK record. DueAt is nil until the message
// is first delivered into a session of its recipient: the clock starts
// there, since an agent cannot acknowledge what it has not seen.
type Ack struct {
	Required bool       `json:"required"`
	State    AckState   `json:"state"`
	Timeout  int        `json:"timeout_sec"`
	DueAt    *time.Time `json:"due_at"`
	AckedAt  *time.Time `json:"acked_at"`
}

// Message is a stored message with its delivery record. The JSON names are a
// contract that scripts rely on.
type Message struct {
	ID         int64           `json:"id"`
	ThreadID   int64           `json:"thread_id"`
	ReplyTo    *int64          `json:"reply_to"`
	From       string          `json:"from"`
	To         string          `json:"to"`
	Kind       Kind            `json:"kind"`
	Urgency    Urgency         `json:"urgency"`
	Body       string          `json:"body"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	State      State           `json:"state"`
	SessionSeq *int64          `json:"session_seq"`
	Shown      int             `json:"shown"` // sessions it was shown to that did not complete
	CreatedAt  time.Time       `json:"created_at"`
	// MsgID and TaskID are a protocol message's envelope ids (kind
	// protocol; empty otherwise), stored as columns so they are indexed.
	MsgID  string `json:"msg_id,omitempty"`
	TaskID string `json:"task_id,omitempty"`
	// ProtocolType is the envelope's type (task_dispatch, ack, ...); the
	// envelope itself is the payload.
	ProtocolType string `json:"-"`
	// Ack is a protocol message's ACK record; nil for other mail.
	Ack *Ack `json:"ack,omitempty"`
}

// NeedsAck reports whether the message still waits for its recipient's ACK.
func (m Message) NeedsAck() bool { return m.Ack != nil && m.Ack.Required && m.Ack.State.Open() }

// IsUrgent reports whether the message is urgent.
func (m Message) IsUrgent() bool { return m.Urgency == Urgent }

// Draft is a message before it is stored.
type Draft struct {
	From    string
	To      string
	Kind    Kind    // default message
	Urgency Urgency // default normal
	Body    string
	Payload json.RawMessage
	ReplyTo int64 // 0: starts a new thread

	// Protocol mail only (kind protocol), set from the envelope by
	// Poster.PostProtocol: its msg_id and task_id, the ACK it asks for
	// (AckTimeout > 0: an ACK is required within that time of the first
	// delivery), and, for an ack, the msg_id it acknowledges, which the
	// store marks acked in the same transaction.
	MsgID        string
	TaskID       string
	ProtocolType string
	AckTimeout   time.Duration
	AckOf        string
	// AnswerKey is set on a protocol answer (a task_result or a
	// review_verdict) to what it answers (protocol.AnswerKey): the store
	// keeps one answer per sender and key.
	AnswerKey string
}

// Validation errors. Each is wrapped with the details of the failure.
var (
	ErrBadName          = errors.New("bad name")
	ErrUnknownRecipient = errors.New("unknown recipient")
	ErrUnknownSender    = errors.New("unknown sender")
	ErrToSelf           = errors.New("cannot send a message to oneself")
	ErrEmptyBody        = errors.New("empty message body")
	ErrBodyTooLarge     = errors.New("message body too large")
	ErrBadKind          = errors.New("bad kind")
	ErrBadUrgency       = errors.New("bad urgency")
	ErrBadPayload       = errors.New("payload is not valid JSON")
	ErrBadBody          = errors.New("message body is not valid UTF-8")
	ErrNotProtocol      = errors.New("protocol fields and kind disagree")
	ErrBadAck           = errors.New("bad ACK request")
)

// Normalize fills a draft's defaults.
func (d Draft) Normalize() Draft {
	if d.Kind == "" {
		d.Kind = KindMessage
	}
	if d.Urgency == "" {
		d.Urgency = Normal
	}
	return d
}

// Validate checks a draft against the names mail may be addressed to. known
// holds the agents; operator is always known.
func Validate(d Draft, known []string) error {
	d = d.Normalize()
	if err := checkName("sender", d.From); err != nil {
		return err
	}
	if err := checkName("recipient", d.To); err != nil {
		return err
	}
	if !Reserved(d.From) && !slices.Contains(known, d.From) {
		return fmt.Errorf("%w %q: known names are %s", ErrUnknownSender, d.From, knownList(known))
	}
	if !Reserved(d.To) && !slices.Contains(known, d.To) {
		return fmt.Errorf("%w %q: known names are %s", ErrUnknownRecipient, d.To, knownList(known))
	}
	if d.From == d.To {
		return fmt.Errorf("%w (%s)", ErrToSelf, d.From)
	}
	if !d.Kind.Valid() {
		return fmt.Errorf("%w %q: use one of %s", ErrBadKind, d.Kind, joinKinds())
	}
	if d.Urgency != Normal && d.Urgency != Urgent {
		return fmt.Errorf("%w %q: use normal or urgent", ErrBadUrgency, d.Urgency)
	}
	if strings.TrimSpace(d.Body) == "" {
		return ErrEmptyBody
	}
	if len(d.Body) > MaxBody {
		return fmt.Errorf("%w: %d bytes, the limit is %d (256 KiB); put large content in a file in the repo and send its path", ErrBodyTooLarge, len(d.Body), MaxBody)
	}
	if !utf8.ValidString(d.Body) {
		return ErrBadBody
	}
	if len(d.Payload) > 0 && !json.Valid(d.Payload) {
		return ErrBadPayload
	}
	if d.Kind != KindProtocol && (d.MsgID != "" || d.TaskID != "" || d.ProtocolType != "" || d.AckTimeout != 0 || d.AckOf != "" || d.AnswerKey != "") {
		return fmt.Errorf("%w: only mail of kind protocol has a msg_id, task_id or ACK, this is %s; send it with --type, which builds a protocol message", ErrNotProtocol, d.Kind)
	}
	if d.Kind == KindProtocol && d.MsgID == "" {
		return fmt.Errorf("%w: protocol mail is built from an envelope; send it with 'swarm send <to> --type T --task ID --payload JSON'", ErrNotProtocol)
	}
	if d.Kind == KindProtocol && d.AckTimeout != 0 && (d.MsgID == "" || d.AckTimeout < time.Second) {
		return fmt.Errorf("%w: an ACK needs a msg_id and a timeout of at least 1s, got %q and %s", ErrBadAck, d.MsgID, d.AckTimeout)
	}
	return nil
}

func checkName(role, name string) error {
	if Reserved(name) || ValidName(name) {
		return nil
	}
	return fmt.Errorf("%w: %s %q is not an agent name (lower-case letters, digits and '-', starting with a letter)", ErrBadName, role, name)
}

func knownList(known []string) string {
	all := append(slices.Clone(known), Operator)
	return strings.Join(all, ", ")
}

func joinKinds() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// SortForPrompt puts mail in the order a prompt shows it: urgent first,
// then oldest (by id, which grows with time). Every reader of queued mail
// uses this one order.
func SortForPrompt(ms []Message) {
	slices.SortStableFunc(ms, func(a, b Message) int {
		if a.IsUrgent() != b.IsUrgent() {
			if a.IsUrgent() {
				return -1
			}
			return 1
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}
