package tui

import (
	"context"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
)

func (m *Model) agent(name string) *Agent {
	for i := range m.agents {
		if m.agents[i].Name == name {
			return &m.agents[i]
		}
	}
	return nil
}

// current is the selected agent, nil before the first snapshot.
func (m *Model) current() *Agent {
	if m.selected < 0 || m.selected >= len(m.agents) {
		return nil
	}
	return &m.agents[m.selected]
}

func (m *Model) setFlash(s string, bad bool) { m.flash, m.flashBad = s, bad }

// confirmation is a question on the status line and what y does.
type confirmation struct {
	question string
	no       string // the flash when the answer is not y
	yes      func() tea.Cmd
}

func (m *Model) ask(question, no string, yes func() tea.Cmd) {
	m.confirm = &confirmation{question: question, no: no, yes: yes}
}

func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	if c := m.confirm; c != nil {
		m.confirm = nil
		switch k.String() {
		case "y", "Y":
			return c.yes()
		case "ctrl+c":
			return m.quit()
		}
		m.setFlash(c.no, false)
		return nil
	}
	switch m.screen {
	case screenInput:
		return m.inputKey(k)
	case screenHelp:
		if k.String() == "ctrl+c" {
			return m.quit()
		}
		m.screen = screenMain
		return nil
	case screenPrompt:
		return m.promptKey(k)
	}
	a := m.current()
	switch k.String() {
	case "ctrl+c":
		return m.quit()
	case "q":
		if m.opts.Stop == nil || m.stopping {
			return m.quit() // swarm watch leaves; a second q leaves too
		}
		m.ask("stop the swarm? [y/N]", "not stopped: the swarm keeps running", m.quit)
	case "?":
		m.screen = screenHelp
	case "esc":
		m.flash = ""
	case "up", "k":
		return m.move(-1)
	case "down", "j":
		return m.move(1)
	case "home", "g":
		return m.move(-len(m.agents))
	case "end", "G":
		return m.move(len(m.agents))
	case "enter":
		if a == nil {
			return nil
		}
		m.screen, m.section, m.scroll = screenPrompt, 0, 0
		m.prompt, m.promptErr = nil, nil
		m.promptAgent, m.promptSeq = a.Name, a.Seq
		if a.Seq == 0 {
			return nil
		}
		m.promptLoading = true
		src, name, seq := m.src, a.Name, a.Seq
		return m.jobs.cmd(m.ctx, func(ctx context.Context) tea.Msg {
			secs, err := src.Prompt(ctx, name, seq)
			return promptMsg{agent: name, seq: seq, sections: secs, err: err}
		})
	case "m", "u":
		if a == nil {
			return nil
		}
		m.screen, m.input, m.inputTo, m.inputUrgent = screenInput, nil, a.Name, k.String() == "u"
	case "i":
		if a == nil {
			return nil
		}
		name := a.Name
		m.ask(fmt.Sprintf("interrupt %s (urgent mail %q)? [y/N]", name, interruptBody), "nothing sent: "+name+" was not interrupted",
			func() tea.Cmd { return m.send(name, interruptBody, true, true) })
	case "e":
		if len(m.escalations) > 0 {
			m.escSel = (m.escSel + 1) % len(m.escalations)
		}
	case "a", "r", "x":
		e := m.selectedEscalation()
		if e == nil {
			m.setFlash("no escalation is open", false)
			return nil
		}
		action := map[string]escalation.Event{"a": escalation.Ack, "r": escalation.Event(escalation.Resume), "x": escalation.Event(escalation.Abort)}[k.String()]
		id := e.ID
		m.ask(fmt.Sprintf("%s escalation %d (%s)? [y/N]", action, id, oneLine(e.Summary)), "cancelled: nothing was decided",
			func() tea.Cmd { return m.decide(id, action) })
	case "p":
		if a == nil {
			return nil
		}
		resume := a.State == lifecycle.Paused || m.pausing[a.Name]
		src, name := m.src, a.Name
		return m.jobs.cmd(m.ctx, func(ctx context.Context) tea.Msg {
			return pausedMsg{agent: name, paused: !resume, err: src.SetPaused(ctx, name, !resume)}
		})
	}
	return nil
}

// quit stops the swarm (swarm up) or leaves the view (swarm watch, or a
// second q while stopping).
func (m *Model) quit() tea.Cmd {
	if m.opts.Stop == nil || m.stopping {
		return tea.Quit
	}
	m.stopping = true
	m.opts.Stop()
	m.setFlash("stopping gracefully: running sessions are cancelled and their mail is queued again (q again leaves the view)", false)
	return nil
}

func (m *Model) move(d int) tea.Cmd {
	if len(m.agents) == 0 {
		return nil
	}
	to := min(max(m.selected+d, 0), len(m.agents)-1)
	if to == m.selected {
		return nil
	}
	m.selected = to
	a := m.current()
	m.tail, m.tailAgent, m.tailSeq, m.tailErr = nil, a.Name, -1, nil
	return m.loadTail()
}

func (m *Model) inputKey(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "esc", "ctrl+c":
		m.screen, m.input = screenMain, nil
	case "enter":
		body := strings.TrimSpace(string(m.input))
		m.screen, m.input = screenMain, nil
		if body == "" {
			m.setFlash("nothing sent: the message was empty", false)
			return nil
		}
		return m.send(m.inputTo, body, m.inputUrgent, false)
	case "backspace", "ctrl+h":
		if len(m.input) > 0 {
			m.input = m.input[:len(m.input)-1]
		}
	case "ctrl+u":
		m.input = nil
	default:
		if k.Text != "" {
			m.input = append(m.input, []rune(k.Text)...)
		}
	}
	return nil
}

func (m *Model) promptKey(k tea.KeyPressMsg) tea.Cmd {
	page := max(m.height-4, 1)
	switch k.String() {
	case "ctrl+c":
		return m.quit()
	case "esc", "q", "enter", "backspace":
		m.screen = screenMain
	case "right", "l", "tab", "n":
		if m.section < len(m.prompt)-1 {
			m.section, m.scroll = m.section+1, 0
		}
	case "left", "h", "shift+tab", "N":
		if m.section > 0 {
			m.section, m.scroll = m.section-1, 0
		}
	case "down", "j":
		m.scroll++
	case "up", "k":
		m.scroll--
	case "pgdown", "space", "f":
		m.scroll += page
	case "pgup", "b":
		m.scroll -= page
	case "home", "g":
		m.scroll = 0
	case "end", "G":
		m.scroll = 1 << 30 // clamped when drawn
	}
	m.scroll = max(m.scroll, 0)
	return nil
}
