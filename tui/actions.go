package tui

import (
	"context"
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
)

// setEscalations takes the unresolved escalations, keeping the selection
// on the same escalation when it is still there.
func (m *Model) setEscalations(es []escalation.Escalation) {
	var id int64
	if e := m.selectedEscalation(); e != nil {
		id = e.ID
	}
	m.escalations, m.escSel = es, 0
	for i, e := range es {
		if e.ID == id {
			m.escSel = i
		}
	}
	_ = id
}

func (m *Model) selectedEscalation() *escalation.Escalation {
	if m.escSel < 0 || m.escSel >= len(m.escalations) {
		return nil
	}
	return &m.escalations[m.escSel]
}

// decide applies an escalation decision the operator confirmed.
func (m *Model) decide(id int64, action escalation.Event) tea.Cmd {
	src := m.src
	m.setFlash(fmt.Sprintf("%s escalation %d…", action, id), false)
	return m.jobs.cmd(m.ctx, func(ctx context.Context) tea.Msg {
		esc, err := src.Decide(ctx, id, action)
		return decidedMsg{action: action, esc: esc, err: err}
	})
}

func decidedText(action escalation.Event) string {
	switch action {
	case escalation.Ack:
		return "acked: no more reminders"
	case escalation.Event(escalation.Resume):
		return "resolved: resume; a held agent carries on"
	case escalation.Event(escalation.Abort):
		return "resolved: abort; a held agent goes idle"
	}
	return "resolved: " + string(action)
}

func (m *Model) send(to, body string, urgent, interrupt bool) tea.Cmd {
	src := m.src
	return m.jobs.cmd(m.ctx, func(ctx context.Context) tea.Msg {
		msg, err := src.Send(ctx, to, body, urgent)
		return sentMsg{msg: msg, interrupt: interrupt, err: err}
	})
}

func (m *Model) gotSent(msg sentMsg) {
	if msg.err != nil {
		m.setFlash("not sent: "+msg.err.Error(), true)
		return
	}
	m.addMail(msg.msg)
	switch {
	case msg.interrupt:
		m.setFlash(fmt.Sprintf("interrupting %s: urgent #%d %q", msg.msg.To, msg.msg.ID, msg.msg.Body), false)
	case msg.msg.IsUrgent():
		m.setFlash(fmt.Sprintf("sent urgent #%d to %s: its running session is interrupted", msg.msg.ID, msg.msg.To), false)
	default:
		m.setFlash(fmt.Sprintf("sent #%d to %s: it is in the next prompt", msg.msg.ID, msg.msg.To), false)
	}
}

func (m *Model) gotPaused(msg pausedMsg) {
	if msg.err != nil {
		verb := "resume"
		if msg.paused {
			verb = "pause"
		}
		m.setFlash(fmt.Sprintf("cannot %s %s: %v", verb, msg.agent, msg.err), true)
		return
	}
	a := m.agent(msg.agent)
	if !msg.paused {
		delete(m.pausing, msg.agent)
		m.setFlash(fmt.Sprintf("resuming %s", msg.agent), false)
		return
	}
	if a != nil && a.State == lifecycle.Paused {
		return
	}
	m.pausing[msg.agent] = true
	if a != nil && (a.State == lifecycle.Running || a.State == lifecycle.Interrupting) {
		m.setFlash(fmt.Sprintf("pausing %s once its running session ends (p again cancels)", msg.agent), false)
	} else {
		m.setFlash(fmt.Sprintf("pausing %s", msg.agent), false)
	}
}
