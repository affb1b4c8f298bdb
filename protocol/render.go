package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/swarmhq/swarm/internal/text"
)

// bodyLimit is the most runes of free text a body quotes. The body is a
// one-line summary; the payload holds the whole text.
const bodyLimit = 100

// Body is the one-line summary of a protocol message, stored as the mail's
// body and shown by swarm inbox and the live view:
//
//	task_dispatch T-42 → backend: Add pagination to GET /users
//	review_verdict T-42: rejected (2 issues)
//
// It never fails: a payload it cannot read is summarised by type and task.
func Body(e Envelope) string {
	head := fmt.Sprintf("%s %s", e.Type, e.TaskID)
	p, err := e.DecodePayload()
	if err != nil {
		return head + " → " + e.To
	}
	switch p := p.(type) {
	case TaskDispatch:
		return fmt.Sprintf("%s → %s: %s", head, e.To, firstLine(p.Description))
	case TaskResult:
		if p.SubtaskID != "" {
			head += " (subtask " + firstLine(p.SubtaskID) + ")"
		}
		return fmt.Sprintf("%s: %s: %s", head, p.Status, firstLine(p.Summary))
	case ReviewRequest:
		return fmt.Sprintf("%s → %s: review against %s, %s so far", head, e.To, text.Plural(len(p.AcceptanceCriteria), "criterion", "criteria"), text.Plural(p.RejectCount, "rejection", "rejections"))
	case ReviewVerdict:
		if p.Verdict == "rejected" {
			return fmt.Sprintf("%s: rejected (%s)", head, text.Plural(len(p.Issues), "issue", "issues"))
		}
		if p.Summary != "" {
			return fmt.Sprintf("%s: %s: %s", head, p.Verdict, firstLine(p.Summary))
		}
		return fmt.Sprintf("%s: %s", head, p.Verdict)
	case Escalation:
		return fmt.Sprintf("%s: %s: %s", head, firstLine(p.Reason), firstLine(p.Summary))
	case Ack:
		return fmt.Sprintf("%s: acknowledges %s", head, p.AckOf)
	case Ping:
		return fmt.Sprintf("%s → %s: %s (ACK within %s)", head, e.To, p.Code, Age(e.AckTimeout()))
	}
	return head
}

// firstLine is the first non-blank line of s, cut to bodyLimit runes.
func firstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if utf8.RuneCountInString(line) > bodyLimit {
				return cutRunes(line, bodyLimit-1) + "…"
			}
			return line
		}
	}
	return ""
}

// AckState is what the store knows about a message's ACK when a prompt is
// built.
type AckState struct {
	// Deadline is the stored ACK deadline. Zero means the clock has not
	// started (it starts at delivery), and the full ack_timeout_sec is shown.
	Deadline time.Time
	// Acked is true once the recipient acknowledged the message: a message
	// shown again after an interrupted session must not ask twice.
	Acked bool
}

// RenderPrompt renders a protocol message for section 12 of the prompt
// (Messages from teammates), below its "From ..." line: the type, msg_id,
// task and sender, the payload as compact JSON exactly as stored, and what
// the recipient is expected to do, and by when:
//
//	AMP/1.0 task_dispatch task_dispatch-T-42-1763900000123 · task T-42 · from lead
//	payload: {"description":"...","branch":"swarm/backend",...}
//	ACK required within 4m: swarm ack task_dispatch-T-42-1763900000123
//	Then: do the task ...
func RenderPrompt(e Envelope, ack AckState, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s · task %s · from %s\n", Version, e.Type, e.MsgID, e.TaskID, e.From)
	fmt.Fprintf(&b, "payload: %s\n", e.Payload)
	if e.RequiresAck {
		left := e.AckTimeout()
		if !ack.Deadline.IsZero() {
			left = ack.Deadline.Sub(now)
		}
		switch {
		case ack.Acked:
			b.WriteString("ACK: already sent.\n")
		case left > 0:
			fmt.Fprintf(&b, "ACK required within %s: swarm ack %s\n", Age(left), e.MsgID)
		default:
			fmt.Fprintf(&b, "ACK overdue by %s: swarm ack %s now\n", Age(-left), e.MsgID)
		}
	}
	if then := expected(e); then != "" {
		b.WriteString(then + "\n")
	}
	return b.String()
}

// expected says what answer a message calls for, as a command to run.
func expected(e Envelope) string {
	switch e.Type {
	case TypeTaskDispatch:
		then := fmt.Sprintf("Then: do the task on the branch it names, and report with `swarm send %s --type task_result --reply-to %s --payload '{\"status\":\"completed\",\"summary\":\"...\"}'` (status completed, failed or blocked; add \"commit_hash\" once you have committed).", e.From, e.MsgID)
		var d struct {
			TimeoutMinutes int `json:"timeout_minutes"`
		}
		if json.Unmarshal(e.Payload, &d) == nil && d.TimeoutMinutes > 0 {
			// The workflow engine escalates a result later than this.
			then += fmt.Sprintf(" Your task_result is due within %s of your ACK.", Age(time.Duration(d.TimeoutMinutes)*time.Minute))
		}
		return then
	case TypeReviewRequest:
		return fmt.Sprintf("Then: review the result against every criterion, and answer with `swarm send %s --type review_verdict --reply-to %s --payload '{\"verdict\":\"approved\"}'`, or {\"verdict\":\"rejected\",\"issues\":[\"...\"]} listing what must change.", e.From, e.MsgID)
	case TypePing:
		return "Acknowledging it tells the team you are ready; nothing else is expected."
	}
	if e.RequiresAck {
		return "" // the ACK line says what is expected
	}
	return "No ACK needed."
}

// Age is text.Age, the way prompts show ages and deadlines (45s, 4m, 2h,
// 3d, rounded down), kept here for the callers that name it so.
func Age(d time.Duration) string { return text.Age(d) }
