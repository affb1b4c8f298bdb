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
}

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
	if d.From != Operator && !slices.Contains(known, d.From) {
		return fmt.Errorf("%w %q: known names are %s", ErrUnknownSender, d.From, knownList(known))
	}
	if d.To != Operator && !slices.Contains(known, d.To) {
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
	return nil
}

func checkName(role, name string) error {
	if name == Operator || ValidName(name) {
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
