package swarm

import (
	"context"
	"errors"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mode"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// TestRedeliveredSessionAnswersOnce is issue 28's crash round: backend's
// session 1 answers a dispatch and crashes before it completes, so the
// dispatch is delivered again into session 2, which answers again. The
// second answer, though from the current session, is refused and names
// the first; the task's chain holds one result.
func TestRedeliveredSessionAnswersOnce(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	sup := clockedSupervisor(t, clk)
	p, st, ctx := sup.Protocol(), sup.store, context.Background()

	d, _ := send(t, p, dispatchTo("backend", 0))
	startSession(t, st, "backend", 1)
	if _, err := p.Ack(ctx, sessionOf("backend", 1), d.MsgID); err != nil {
		t.Fatal(err)
	}
	result := func(session string) (message.Message, error) {
		clk.Add(time.Millisecond)
		seq, _ := strconv.ParseInt(strings.TrimPrefix(session, "backend-"), 10, 64)
		caller := identity.Session("backend", seq, mode.Vector{mode.CanMessage: true})
		m, _, err := p.Send(ctx, SendRequest{Caller: caller, ReplyTo: d.MsgID,
			Draft: protocol.Draft{Type: protocol.TypeTaskResult, From: "backend", Payload: []byte(`{"status":"completed","summary":"paginated"}`)}})
		return m, err
	}
	first, err := result("backend-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.InTx(ctx, func(tx mailbox.Tx) error {
		return tx.EndSession(mailbox.SessionEnd{Agent: "backend", Seq: 1, State: mailbox.SessionCrashed})
	}); err != nil {
		t.Fatal(err)
	}
	if again := startSession(t, st, "backend", 2); len(again) != 1 || again[0].ID != d.ID {
		t.Fatalf("session 2 got %d message(s), want the dispatch #%d again", len(again), d.ID)
	}
	clk.Add(time.Millisecond)
	_, err = result("backend-2")
	var ae *mailbox.AnsweredError
	if !errors.As(err, &ae) || ae.Answer.ID != first.ID {
		t.Fatalf("the redelivered session's second result: %v; want it refused as answered by #%d", err, first.ID)
	}
	if want := "backend already answered " + d.MsgID + " as #"; !strings.Contains(err.Error(), want) {
		t.Fatalf("refusal %q does not say %q", err, want)
	}
	chain, err := st.TaskMessages(ctx, "T-42")
	if err != nil {
		t.Fatal(err)
	}
	results := 0
	for _, m := range chain {
		if m.ProtocolType == string(protocol.TypeTaskResult) {
			results++
		}
	}
	if results != 1 {
		t.Fatalf("%d task_results stored for one dispatch, want 1", results)
	}
}
