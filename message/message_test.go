package message

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	known := []string{"backend", "frontend"}
	tests := []struct {
		name string
		d    Draft
		want error
	}{
		{"ok", Draft{From: "operator", To: "backend", Body: "hi"}, nil},
		{"agent to operator", Draft{From: "backend", To: "operator", Body: "done"}, nil},
		{"agent to agent urgent", Draft{From: "backend", To: "frontend", Body: "x", Urgency: Urgent, Kind: KindTask}, nil},
		{"unknown recipient", Draft{From: "operator", To: "db", Body: "hi"}, ErrUnknownRecipient},
		{"unknown sender", Draft{From: "db", To: "backend", Body: "hi"}, ErrUnknownSender},
		{"path recipient", Draft{From: "operator", To: "../x", Body: "hi"}, ErrBadName},
		{"upper-case recipient", Draft{From: "operator", To: "Backend", Body: "hi"}, ErrBadName},
		{"empty recipient", Draft{From: "operator", To: "", Body: "hi"}, ErrBadName},
		{"to self", Draft{From: "backend", To: "backend", Body: "hi"}, ErrToSelf},
		{"operator to self", Draft{From: "operator", To: "operator", Body: "hi"}, ErrToSelf},
		{"empty body", Draft{From: "operator", To: "backend", Body: ""}, ErrEmptyBody},
		{"blank body", Draft{From: "operator", To: "backend", Body: " \n\t"}, ErrEmptyBody},
		{"huge body", Draft{From: "operator", To: "backend", Body: strings.Repeat("x", MaxBody+1)}, ErrBodyTooLarge},
		{"max body", Draft{From: "operator", To: "backend", Body: strings.Repeat("x", MaxBody)}, nil},
		{"bad kind", Draft{From: "operator", To: "backend", Body: "x", Kind: "memo"}, ErrBadKind},
		{"bad urgency", Draft{From: "operator", To: "backend", Body: "x", Urgency: "asap"}, ErrBadUrgency},
		{"bad payload", Draft{From: "operator", To: "backend", Body: "x", Payload: []byte("{")}, ErrBadPayload},
		{"bad utf8", Draft{From: "operator", To: "backend", Body: "\xff"}, ErrBadBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.d, known)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestUnknownRecipientNamesKnown(t *testing.T) {
	err := Validate(Draft{From: "operator", To: "db", Body: "hi"}, []string{"backend", "frontend"})
	if err == nil || !strings.Contains(err.Error(), "backend, frontend, operator") {
		t.Fatalf("error %v does not list the known names", err)
	}
}

func TestWakes(t *testing.T) {
	for _, k := range Kinds {
		if got, want := k.Wakes(), k != KindStatus; got != want {
			t.Errorf("%s.Wakes() = %v", k, got)
		}
	}
}

func TestSwarmIsReservedLikeOperator(t *testing.T) {
	known := []string{"backend"}
	for _, d := range []Draft{
		{From: Swarm, To: "backend", Body: "reminder"},
		{From: "backend", To: Swarm, Body: "result", Kind: KindProtocol, MsgID: "task_result-T-1-1", TaskID: "T-1"},
	} {
		if err := Validate(d, known); err != nil {
			t.Errorf("Validate(%s → %s) = %v", d.From, d.To, err)
		}
	}
	if err := Validate(Draft{From: Swarm, To: Swarm, Body: "x"}, known); !errors.Is(err, ErrToSelf) {
		t.Errorf("swarm to itself = %v", err)
	}
	if !Reserved(Swarm) || !Reserved(Operator) || Reserved("backend") {
		t.Error("Reserved is wrong")
	}
}

func TestProtocolFieldsOnlyOnProtocolMail(t *testing.T) {
	known := []string{"backend", "lead"}
	base := Draft{From: "lead", To: "backend", Body: "x"}
	withID := base
	withID.MsgID = "task_dispatch-T-1-1"
	if err := Validate(withID, known); !errors.Is(err, ErrNotProtocol) {
		t.Errorf("a msg_id on plain mail = %v, want ErrNotProtocol", err)
	}
	p := base
	p.Kind, p.MsgID, p.TaskID, p.AckTimeout = KindProtocol, "task_dispatch-T-1-1", "T-1", 300*time.Second
	if err := Validate(p, known); err != nil {
		t.Errorf("a protocol draft = %v", err)
	}
	p.AckTimeout = time.Millisecond
	if err := Validate(p, known); !errors.Is(err, ErrBadAck) {
		t.Errorf("an ACK within 1ms = %v, want ErrBadAck", err)
	}
}

func TestAckStateOpen(t *testing.T) {
	for _, s := range AckStates {
		if got, want := s.Open(), s == AckPending || s == AckOverdue; got != want {
			t.Errorf("%s.Open() = %v", s, got)
		}
	}
}

func TestProtocolMailNeedsAnEnvelope(t *testing.T) {
	err := Validate(Draft{From: "lead", To: "backend", Body: "x", Kind: KindProtocol}, []string{"backend", "lead"})
	if !errors.Is(err, ErrNotProtocol) || !strings.Contains(err.Error(), "--type") {
		t.Fatalf("kind protocol without an envelope = %v", err)
	}
}

func TestAcksNeverWake(t *testing.T) {
	if Wakes(KindProtocol, AckType) || !Wakes(KindProtocol, "task_dispatch") || !Wakes(KindMessage, "") || Wakes(KindStatus, "") {
		t.Fatal("Wakes is wrong")
	}
}
