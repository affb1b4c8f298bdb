package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/swarmhq/swarm/mode"
)

func (tb *toolbox) send(ctx context.Context, a sendArgs) (string, error) {
	if tb.s.Messenger == nil {
		return "", errors.New("send_message: messaging is not wired into this session; tell the operator in your final answer instead")
	}
	if a.To == tb.s.Agent {
		return "", fmt.Errorf("send_message: you are %s; send to a teammate or to \"operator\"", a.To)
	}
	id, err := tb.s.Messenger.Send(ctx, a.To, a.Body, a.Urgent, a.ReplyTo)
	if err != nil {
		if ctx.Err() != nil {
			return "", errCancelled
		}
		return "", fmt.Errorf("send_message to %s failed: %v", a.To, err)
	}
	kind := "message"
	if a.Urgent {
		kind = "urgent message"
	}
	return fmt.Sprintf("sent %s %d to %s", kind, id, a.To), nil
}

// escalate raises an escalation about the agent through the supervisor.
func (tb *toolbox) escalate(ctx context.Context, a escalateArgs) (string, error) {
	if tb.s.Escalator == nil {
		return "", errors.New("escalate: escalations are not wired into this session; run `swarm escalate \"<summary>\"` with bash, or tell the operator in your final answer")
	}
	res, err := tb.s.Escalator.Escalate(ctx, EscalationRequest{Summary: a.Summary, Severity: a.Severity, Hold: a.Hold,
		Approval: a.Approval, Ref: a.Ref, Details: a.Details})
	if err != nil {
		if ctx.Err() != nil {
			return "", errCancelled
		}
		return "", fmt.Errorf("escalate failed: %v", err)
	}
	var b strings.Builder
	if res.Created {
		fmt.Fprintf(&b, "escalation %d opened: the operator is notified. Their decision and note come in a later prompt, under Operator Decision.", res.ID)
	} else {
		fmt.Fprintf(&b, "escalation %d was already open: counted (%d times); the operator is not notified again.", res.ID, res.Count)
	}
	if res.Hold {
		b.WriteString(" You are held: this session ends now, and you start again once the operator decides. Commit what you have first if you can.")
	}
	return b.String(), nil
}

// sendProtocol sends a protocol message through the supervisor.
func (tb *toolbox) sendProtocol(ctx context.Context, a protocolArgs) (string, error) {
	if tb.s.Protocol == nil {
		return "", errors.New("send_protocol: protocol messages are not wired into this session; run `swarm send <to> --type T --task ID --payload JSON` with bash, or tell the operator in your final answer")
	}
	// The rules (can_message, can_dispatch for a dispatch, the sender, a
	// work item's verdict) are the verb's: the supervisor checks them
	// with this session's caller.
	sent, err := tb.s.Protocol.Send(ctx, a.ProtocolMessage)
	if err != nil {
		if ctx.Err() != nil {
			return "", errCancelled
		}
		return "", fmt.Errorf("send_protocol refused, nothing was sent:\n%v", err)
	}
	out := fmt.Sprintf("sent %s (message %d) to %s", sent.MsgID, sent.ID, sent.To)
	if sent.AckTimeout > 0 {
		out += fmt.Sprintf("; %s must acknowledge it within %s of its delivery", sent.To, sent.AckTimeout)
	}
	return out, nil
}

// ack acknowledges protocol messages through the supervisor.
func (tb *toolbox) ack(ctx context.Context, a ackArgs) (string, error) {
	if tb.s.Protocol == nil {
		return "", errors.New("ack: protocol messages are not wired into this session; run `swarm ack <msg_id>` with bash")
	}
	sent, err := tb.s.Protocol.Ack(ctx, a.Ref, a.All)
	if err != nil {
		if ctx.Err() != nil {
			return "", errCancelled
		}
		return "", fmt.Errorf("ack failed: %v", err)
	}
	if len(sent) == 0 {
		return "no message awaits your ACK", nil
	}
	var b strings.Builder
	for _, s := range sent {
		fmt.Fprintf(&b, "acknowledged: sent %s (message %d) to %s\n", s.MsgID, s.ID, s.To)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// task runs one beads tool. bd's own error text (a claim lost to another
// actor is an exit 1 with plain text on stderr) goes back to the model.
func (tb *toolbox) task(ctx context.Context, tool string, a taskArgs) (string, error) {
	var (
		out json.RawMessage
		err error
	)
	switch tool {
	case mode.BDClaim:
		out, err = tb.s.Tasks.Claim(ctx, a.ID)
	case mode.BDClose:
		out, err = tb.s.Tasks.Close(ctx, a.ID, a.Reason)
	case mode.BDShow:
		out, err = tb.s.Tasks.Show(ctx, a.ID)
	default:
		return "", fmt.Errorf("internal error: %s is not a beads tool", tool)
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", errCancelled
		}
		return "", fmt.Errorf("%s %s failed: %v", tool, a.ID, err)
	}
	var buf bytes.Buffer
	if json.Indent(&buf, out, "", "  ") == nil {
		out = buf.Bytes()
	}
	text := string(out)
	if len(text) > MaxToolOutput {
		text = truncUTF8(text, MaxToolOutput) + "\n[... truncated ...]"
	}
	if text == "" {
		text = "ok"
	}
	switch tool {
	case mode.BDClaim:
		return fmt.Sprintf("claimed %s\n%s", a.ID, text), nil
	case mode.BDClose:
		return fmt.Sprintf("closed %s\n%s", a.ID, text), nil
	}
	return text, nil
}
