package verbs

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/protocol"
	"github.com/swarmhq/swarm/swarm"
)

const dispatchPayload = `{"description": "Add pagination to GET /users", "branch": "swarm/backend",
	"acceptance_criteria": ["GET /users?page=2 works"], "risk_level": "low"}`

// protocolOver is the protocol service over a fresh store, with a clock
// that moves a millisecond a call (msg_ids differ).
func protocolOver(t *testing.T) (*swarm.Protocol, mailbox.Store) {
	t.Helper()
	st := openStore(t)
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { at = at.Add(time.Millisecond); return at }
	return &swarm.Protocol{Store: st, Poster: mailbox.NewPoster(st, []string{"lead", "backend", "critic"}, nil), Now: now}, st
}

// begin delivers agent's queued mail into its session seq, ending the
// session before it.
func begin(t *testing.T, st mailbox.Store, agent string, seq int64) {
	t.Helper()
	ctx := context.Background()
	if err := st.RegisterAgent(ctx, mailbox.AgentInfo{Name: agent}); err != nil {
		t.Fatal(err)
	}
	if err := st.InTx(ctx, func(tx mailbox.Tx) error {
		if seq > 1 {
			if err := tx.EndSession(mailbox.SessionEnd{Agent: agent, Seq: seq - 1, State: mailbox.SessionInterrupted}); err != nil {
				return err
			}
		}
		if _, err := tx.Deliver(agent, seq, nil); err != nil {
			return err
		}
		return tx.StartSession(mailbox.SessionStart{Agent: agent, Seq: seq})
	}); err != nil {
		t.Fatal(err)
	}
}

func dispatchReq(from string) SendRequest {
	return SendRequest{Draft: protocol.Draft{Type: protocol.TypeTaskDispatch, From: from, To: "backend", TaskID: "T-42", Payload: []byte(dispatchPayload)}}
}

// TestSendProtocolChecksTheCaller: the protocol verb's rules come from the
// caller the door established, whatever the draft says: the sender, the
// capabilities, and nobody at all. swarm.Protocol.Send itself checks none.
func TestSendProtocolChecksTheCaller(t *testing.T) {
	p, _ := protocolOver(t)
	ctx := context.Background()
	coder := identity.Session("backend", 1, mode.Vector{mode.CanMessage: true})
	lead := identity.Session("lead", 1, mode.Vector{mode.CanMessage: true, mode.CanDispatch: true})
	mute := identity.Session("backend", 1, mode.Vector{})
	for _, tc := range []struct {
		name   string
		caller identity.Caller
		from   string
		rule   identity.Rule
	}{
		{"a coder dispatches", coder, "", identity.RuleCapability},
		{"a coder dispatches as lead", coder, "lead", identity.RuleSender},
		{"a coder dispatches as the operator", coder, "operator", identity.RuleSender},
		{"a session without can_message", mute, "", identity.RuleCapability},
		{"nobody", identity.Caller{}, "lead", identity.RuleSender},
		{"the lead dispatches", lead, "", ""},
		{"the operator dispatches as lead", identity.Operator(), "lead", ""},
	} {
		m, _, err := SendProtocol(ctx, tc.caller, p, dispatchReq(tc.from))
		r, refused := identity.IsRefusal(err)
		switch {
		case tc.rule == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.rule == "" && m.From != tc.caller.Name() && m.From != tc.from:
			t.Errorf("%s: sent as %q", tc.name, m.From)
		case tc.rule != "" && (!refused || r.Rule != tc.rule):
			t.Errorf("%s: %v, want rule %s", tc.name, err, tc.rule)
		}
	}
}

// TestAcksAndResultsNeedTheCurrentSession: a leftover of an agent's
// earlier session can neither acknowledge nor answer for the current one;
// the current session can. What is owed is said first ("not delivered").
func TestAcksAndResultsNeedTheCurrentSession(t *testing.T) {
	p, st := protocolOver(t)
	ctx := context.Background()
	d, _, err := SendProtocol(ctx, identity.Operator(), p, dispatchReq("lead"))
	if err != nil {
		t.Fatal(err)
	}
	s := func(seq int64) identity.Caller {
		return identity.Session("backend", seq, mode.Vector{mode.CanMessage: true})
	}
	if _, err := Ack(ctx, s(1), p, d.MsgID); err == nil || !strings.Contains(err.Error(), "not been delivered") {
		t.Fatalf("an ACK before delivery: %v", err)
	}
	begin(t, st, "backend", 1)
	begin(t, st, "backend", 2)
	var stale *StaleSessionError
	if _, err := AckAll(ctx, s(1), p); !errors.As(err, &stale) || stale.Current != "backend-2" {
		t.Fatalf("AckAll from session 1: %v, want a StaleSessionError naming backend-2", err)
	}
	if _, err := Ack(ctx, s(1), p, d.MsgID); !errors.As(err, &stale) {
		t.Fatalf("an ACK from session 1: %v", err)
	}
	if _, err := Ack(ctx, s(2), p, "#"+strconv.FormatInt(d.ID, 10)); err != nil {
		t.Fatalf("the ACK of session 2: %v", err)
	}
	result := SendRequest{Draft: protocol.Draft{Type: protocol.TypeTaskResult, Payload: []byte(`{"status":"completed","summary":"paginated"}`)}, ReplyTo: d.MsgID}
	if _, _, err := SendProtocol(ctx, s(1), p, result); !errors.As(err, &stale) {
		t.Fatalf("a result from session 1: %v", err)
	}
	r, env, err := SendProtocol(ctx, s(2), p, result)
	if err != nil || r.From != "backend" || r.To != "lead" || env.TaskID != "T-42" {
		t.Fatalf("the result of session 2: %+v, %+v, %v", r, env, err)
	}
	chain, err := st.TaskMessages(ctx, "T-42")
	if err != nil || len(chain) != 3 {
		t.Fatalf("the chain: %d messages, %v (want dispatch, ack, result)", len(chain), err)
	}
	for _, m := range chain {
		if m.From == message.Operator {
			t.Errorf("a message stored from operator: %+v", m)
		}
	}
}
