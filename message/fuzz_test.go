package message

import (
	"errors"
	"strings"
	"testing"
)

// FuzzValidate checks that validation never panics and that what it accepts
// really follows the rules the store relies on.
func FuzzValidate(f *testing.F) {
	f.Add("operator", "backend", "message", "normal", "hi", "")
	f.Add("backend", "backend", "task", "urgent", "x", `{"a":1}`)
	f.Add("../x", "operator", "nudge", "", " ", "{")
	f.Add("a-1", "b", "status", "urgent", "\xff", "null")
	known := []string{"backend", "frontend", "a-1", "b"}
	f.Fuzz(func(t *testing.T, from, to, kind, urgency, body, payload string) {
		d := Draft{From: from, To: to, Kind: Kind(kind), Urgency: Urgency(urgency), Body: body, Payload: []byte(payload)}
		err := Validate(d, known)
		if err != nil {
			if errors.Unwrap(err) == nil && !isSentinel(err) {
				t.Fatalf("error %v is not one of the documented errors", err)
			}
			return
		}
		n := d.Normalize()
		if n.From == n.To || strings.TrimSpace(n.Body) == "" || len(n.Body) > MaxBody || !n.Kind.Valid() {
			t.Fatalf("accepted an invalid draft: %+v", n)
		}
		for _, name := range []string{n.From, n.To} {
			if name != Operator && !ValidName(name) {
				t.Fatalf("accepted bad name %q", name)
			}
		}
	})
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrEmptyBody, ErrBadBody, ErrBadPayload} {
		if err == s {
			return true
		}
	}
	return false
}
