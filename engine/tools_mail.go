package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
