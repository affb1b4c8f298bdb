package verbs

import (
	"context"
	"fmt"
	"strings"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/swarm"
)

// The report verb (DESIGN §9.4): an agent tells its coordinator how a task
// or its session goes.

// ReportRequest is one `swarm report`: an agent says how a task or its
// session goes (DESIGN §9.4).
type ReportRequest struct {
	Store   mailbox.Store
	Poster  *mailbox.Poster
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

// Report is the report verb: caller (a session for its own agent, with
// can_report_*; the operator for the agent Agent names) stores the report
// and sends it as status mail (which never wakes an idle agent) to the
// agent's coordinator.
func Report(ctx context.Context, c identity.Caller, req ReportRequest) (ReportResult, error) {
	var res ReportResult
	need := mode.CanReportTaskLevel
	if !req.Kind.TaskLevel() {
		need = mode.CanReportSessionLevel
	}
	if err := c.Require(need, "swarm report "+string(req.Kind)); err != nil {
		return res, err
	}
	if err := c.ForAgent(req.Agent, "swarm report --agent "+req.Agent); err != nil {
		return res, err
	}
	if c.IsSession() {
		req.Agent = c.Agent()
	}
	if req.Agent == "" {
		return res, fmt.Errorf("who reports? run it from an agent's session, or pass --agent <name>")
	}
	if strings.TrimSpace(req.Message) == "" {
		return res, fmt.Errorf("empty report: say what happened, such as \"tests pass, 2 of 3 endpoints done\"")
	}
	r, err := req.Store.AddReport(ctx, mailbox.Report{Agent: req.Agent, SessionSeq: c.Seq(), Kind: req.Kind, Task: req.Task, Message: req.Message})
	if err != nil {
		return res, err
	}
	res.Report = r
	to, err := swarm.Coordinator(ctx, req.Store, req.Agent, req.Task)
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
