package swarm

import (
	"context"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mode"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// ReportRequest is one `swarm report`: an agent says how a task or its
// session goes (DESIGN §9.4).
type ReportRequest struct {
	Store  mailbox.Store
	Poster *mailbox.Poster
	// Caller reports: a session for its own agent (with can_report_*),
	// the operator for the agent Agent names.
	Caller  identity.Caller
	Agent   string // the operator's; a session's own agent when empty
	Kind    mailbox.ReportKind
	Task    string // task-level kinds only
	Message string
}

// ReportResult is what a report stored and sent.
type ReportResult struct {
	Report      mailbox.Report
	Coordinator string
	Mail        message.Message
}

// Report stores the report and sends it as status mail (which never wakes
// an idle agent) to the agent's coordinator.
func Report(ctx context.Context, req ReportRequest) (ReportResult, error) {
	var res ReportResult
	need := mode.CanReportTaskLevel
	if !req.Kind.TaskLevel() {
		need = mode.CanReportSessionLevel
	}
	if err := req.Caller.Require(need, "swarm report "+string(req.Kind)); err != nil {
		return res, err
	}
	if err := req.Caller.ForAgent(req.Agent, "swarm report --agent "+req.Agent); err != nil {
		return res, err
	}
	if req.Caller.IsSession() {
		req.Agent = req.Caller.Agent()
	}
	if req.Agent == "" {
		return res, fmt.Errorf("who reports? run it from an agent's session, or pass --agent <name>")
	}
	if strings.TrimSpace(req.Message) == "" {
		return res, fmt.Errorf("empty report: say what happened, such as \"tests pass, 2 of 3 endpoints done\"")
	}
	r, err := req.Store.AddReport(ctx, mailbox.Report{Agent: req.Agent, SessionSeq: req.Caller.Seq(), Kind: req.Kind, Task: req.Task, Message: req.Message})
	if err != nil {
		return res, err
	}
	res.Report = r
	to, err := Coordinator(ctx, req.Store, req.Agent, req.Task)
	if err != nil {
		return res, err
	}
	res.Coordinator = to
	subject := string(req.Kind)
	if req.Task != "" {
		subject += " " + req.Task
	}
	m, err := req.Poster.Post(ctx, message.Draft{From: req.Agent, To: to, Kind: message.KindStatus,
		Body: fmt.Sprintf("[report %s] %s", subject, req.Message)})
	if err != nil {
		return res, fmt.Errorf("the report is stored, but sending it to %s failed: %w", to, err)
	}
	res.Mail = m
	return res, nil
}

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
