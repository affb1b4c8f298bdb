package swarm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// An agent's coordinator: who it reports to (verbs.Report).

// Coordinator is who an agent reports to about task: the sender of the
// newest mail that handed the agent work on the task (the agent that
// dispatched it): task mail naming it, or a task_dispatch or
// review_request protocol message about it; else operator. Answers (an
// ack, a task_result, a verdict) hand out nothing, so they do not count. A
// session report (no task) goes to the sender of the newest such mail of
// any task, else operator.
func Coordinator(ctx context.Context, st mailbox.Store, agent, task string) (string, error) {
	inbox, err := st.Inbox(ctx, agent, mailbox.Filter{})
	if err != nil {
		return "", fmt.Errorf("find %s's coordinator: %w", agent, err)
	}
	for _, m := range slices.Backward(inbox) {
		if m.From == agent {
			continue
		}
		switch {
		case m.Kind == message.KindTask:
			if task == "" || mentions(m.Body, task) {
				return m.From, nil
			}
		case m.Kind == message.KindProtocol:
			if !handsOutWork(m) {
				continue
			}
			if task == "" || m.TaskID == task || mentions(string(m.Payload), task) {
				return m.From, nil
			}
		}
	}
	return message.Operator, nil
}

// handsOutWork reports whether protocol mail asks its recipient to do
// something: a dispatch or a review request.
func handsOutWork(m message.Message) bool {
	t := m.ProtocolType
	if t == "" {
		if env, err := protocol.Parse(m.Payload); err == nil {
			t = string(env.Type)
		}
	}
	return t == string(protocol.TypeTaskDispatch) || t == string(protocol.TypeReviewRequest)
}

// mentions reports whether text names id as a whole word.
func mentions(text, id string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], id)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(id)
		// "demo-9z2" is not named by "demo-9z2.1", its child.
		child := end+1 < len(text) && text[end] == '.' && idChar(text[end+1])
		if (start == 0 || !idChar(text[start-1])) && (end == len(text) || !idChar(text[end])) && !child {
			return true
		}
		i = start + 1
	}
}

func idChar(c byte) bool {
	return c == '-' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
