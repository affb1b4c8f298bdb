package tui

import (
	"context"

	tea "charm.land/bubbletea/v2"

	"github.com/swarmhq/swarm/lifecycle"
)

// reload re-reads the snapshot, with at most one read in flight: changes
// that arrive meanwhile cost one more read, not one each.
func (m *Model) reload() tea.Cmd {
	if m.reloading {
		m.reloadAgain = true
		return nil
	}
	m.reloading = true
	src := m.src
	return m.jobs.cmd(m.ctx, func(ctx context.Context) tea.Msg {
		snap, err := src.Snapshot(ctx)
		return snapshotMsg{snap: snap, err: err}
	})
}

func (m *Model) gotSnapshot(msg snapshotMsg) tea.Cmd {
	m.reloading = false
	var cmds []tea.Cmd
	if m.reloadAgain {
		m.reloadAgain = false
		cmds = append(cmds, m.reload())
	}
	if msg.err != nil {
		if m.ctx.Err() == nil {
			m.setFlash("cannot read the swarm's state: "+msg.err.Error(), true)
		}
		return tea.Batch(cmds...)
	}
	name := ""
	if a := m.current(); a != nil {
		name = a.Name
	}
	m.agents = msg.snap.Agents
	for _, mm := range msg.snap.Mail {
		m.addMail(mm)
	}
	m.tokens, m.sessions, m.budget, m.team = msg.snap.Tokens, msg.snap.Sessions, msg.snap.Budget, msg.snap.Team
	m.setEscalations(msg.snap.Escalations)
	m.workflows = msg.snap.Workflows
	m.merges = msg.snap.Merges
	m.selected = 0
	for i, a := range m.agents {
		if a.Name == name {
			m.selected = i
		}
		if a.State == lifecycle.Paused {
			delete(m.pausing, a.Name)
		}
	}
	first := !m.loaded
	m.loaded = true
	if a := m.current(); a != nil && (first || a.Name != m.tailAgent || a.Seq != m.tailSeq) {
		cmds = append(cmds, m.loadTail())
	}
	return tea.Batch(cmds...)
}

// loadTail re-reads the selected agent's session log, one read at a time.
func (m *Model) loadTail() tea.Cmd {
	a := m.current()
	if a == nil {
		return nil
	}
	if a.Seq == 0 {
		m.tail, m.tailAgent, m.tailSeq, m.tailErr = nil, a.Name, 0, nil
		return nil
	}
	if m.tailLoading {
		m.tailRe = true
		return nil
	}
	m.tailLoading = true
	src, name, seq := m.src, a.Name, a.Seq
	n := max(tailLines, m.height)
	return m.jobs.cmd(m.ctx, func(ctx context.Context) tea.Msg {
		lines, err := src.Tail(ctx, name, seq, n)
		return tailMsg{agent: name, seq: seq, lines: lines, err: err}
	})
}

func (m *Model) gotTail(msg tailMsg) tea.Cmd {
	m.tailLoading = false
	if a := m.current(); a != nil && a.Name == msg.agent {
		m.tail, m.tailAgent, m.tailSeq, m.tailErr = msg.lines, msg.agent, msg.seq, msg.err
	}
	if m.tailRe {
		m.tailRe = false
		return m.loadTail()
	}
	if a := m.current(); a != nil && (a.Name != m.tailAgent || a.Seq != m.tailSeq) {
		return m.loadTail() // the selection or the session moved on meanwhile
	}
	return nil
}
