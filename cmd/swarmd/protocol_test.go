package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// Commands for the protocol scripts (testdata/script/protocol_*.txtar).
// They poll the store for a condition; none sleeps for a fixed time.

// scriptMessage reads message n (its number) from the repo's store.
func scriptMessage(ts *testscript.TestScript, st mailbox.Store, n string) message.Message {
	id, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		ts.Fatalf("bad message number %q", n)
	}
	m, err := st.Message(context.Background(), id)
	if err != nil {
		ts.Fatalf("message #%s: %v", n, err)
	}
	return m
}

// cmdWaitDue waits until the ACK deadline of message n has passed:
// waitdue <n>. The deadline is stored when the message is delivered.
func cmdWaitDue(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitdue <message number>")
	}
	st := openScriptStore(ts)
	defer st.Close()
	poll(ts, "the ACK deadline of #"+args[0], func() (bool, string) {
		m := scriptMessage(ts, st, args[0])
		if m.Ack == nil || m.Ack.DueAt == nil {
			return false, "no deadline yet"
		}
		return time.Now().After(*m.Ack.DueAt), "due at " + m.Ack.DueAt.Format(time.RFC3339Nano)
	})
}

// cmdAckEscalated waits for the unresolved ack_timeout escalation of
// message n and checks it: exactly one, raised once, at most <max> after
// the reference:
// ackescalated <n> <max> due|restart. "due" is the message's deadline;
// "restart" is the supervisor's last start (its newest "recovered" event,
// or its first Initializing when nothing was recovered), for a deadline
// that passed while no supervisor ran. The escalation's id becomes $ESC.
func cmdAckEscalated(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 || (args[2] != "due" && args[2] != "restart") {
		ts.Fatalf("usage: ackescalated <message number> <max lag> due|restart")
	}
	limit, err := time.ParseDuration(args[1])
	if err != nil {
		ts.Fatalf("bad lag %q: %v", args[1], err)
	}
	st := openScriptStore(ts)
	defer st.Close()
	ctx := context.Background()
	m := scriptMessage(ts, st, args[0])
	var found []escalation.Escalation
	poll(ts, "the ack_timeout of "+m.MsgID, func() (bool, string) {
		es, err := st.Escalations(ctx, mailbox.EscalationFilter{})
		if err != nil {
			return false, err.Error()
		}
		found = found[:0]
		for _, e := range es {
			if e.Kind == escalation.KindAckTimeout && e.RefText() == "msg:"+m.MsgID {
				found = append(found, e)
			}
		}
		return len(found) > 0, fmt.Sprintf("%d escalation(s)", len(es))
	})
	if len(found) != 1 || found[0].Count != 1 {
		ts.Fatalf("%d unresolved ack_timeout escalation(s) of %s (count %d); want exactly one, raised once", len(found), m.MsgID, found[0].Count)
	}
	e := found[0]
	m = scriptMessage(ts, st, args[0])
	ref := *m.Ack.DueAt
	if args[2] == "restart" {
		evs, err := st.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectAgent})
		if err != nil {
			ts.Fatalf("events: %v", err)
		}
		for _, ev := range evs {
			if ev.Cause == "recovered" {
				ref = ev.At
			}
		}
		if ref.Before(*m.Ack.DueAt) {
			ts.Fatalf("the supervisor restarted at %s, before the deadline %s", ref, *m.Ack.DueAt)
		}
	}
	lag := e.CreatedAt.Sub(ref)
	ts.Logf("escalation %d raised %s after the %s", e.ID, lag, args[2])
	if lag < 0 || lag > limit {
		ts.Fatalf("escalation %d raised %s after the %s (at %s); want within %s", e.ID, lag, args[2], ref.Format(time.RFC3339Nano), limit)
	}
	ts.Setenv("ESC", strconv.FormatInt(e.ID, 10))
}

// cmdMsgID sets an environment variable to the msg_id of message n:
// msgid <n> <VAR>.
func cmdMsgID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: msgid <message number> <VAR>")
	}
	st := openScriptStore(ts)
	defer st.Close()
	m := scriptMessage(ts, st, args[0])
	if m.MsgID == "" {
		ts.Fatalf("message #%s is not a protocol message", args[0])
	}
	ts.Setenv(args[1], m.MsgID)
}

// cmdWaitMsg waits until message n is in a delivery state, reading the
// store in-process (no swarm process per look, so it notices within
// milliseconds): waitmsg <n> <queued|delivered|done>.
func cmdWaitMsg(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitmsg <message number> <state>")
	}
	st := openScriptStore(ts)
	defer st.Close()
	poll(ts, "#"+args[0]+" "+args[1], func() (bool, string) {
		m := scriptMessage(ts, st, args[0])
		return string(m.State) == args[1], string(m.State)
	})
}
