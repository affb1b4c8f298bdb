package tui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/swarmhq/swarm/lifecycle"
)

// reschedule arms the one timer the view needs: when an age label on
// screen would change, a note expires, or (while the selected agent runs)
// the log is due for a re-read. It keeps an earlier timer that is already
// armed.
func (m *Model) reschedule() tea.Cmd {
	d, ok := m.wakeIn(m.now())
	if !ok || m.ended != nil {
		m.stopTimer()
		return nil
	}
	at := m.now().Add(d)
	if m.tickCancel != nil && !m.tickAt.After(at) {
		return nil
	}
	m.stopTimer()
	m.tickGen++
	gen := m.tickGen
	ctx, cancel := context.WithCancel(m.ctx)
	m.tickCancel, m.tickAt = cancel, at
	sleep := m.sleep
	return m.jobs.cmd(ctx, func(ctx context.Context) tea.Msg {
		if !sleep(ctx, d) {
			return nil
		}
		return tickMsg{gen: gen}
	})
}

func (m *Model) stopTimer() {
	if m.tickCancel != nil {
		m.tickCancel()
		m.tickCancel = nil
	}
}

// wakeIn is how long until the screen would look different without any
// notice; false when it never would.
func (m *Model) wakeIn(now time.Time) (time.Duration, bool) {
	best, ok := time.Duration(0), false
	take := func(d time.Duration) {
		d = max(d, 10*time.Millisecond)
		if !ok || d < best {
			best, ok = d, true
		}
	}
	if m.screen == screenPrompt || m.screen == screenHelp {
		return 0, false // neither shows ages; leaving them redraws
	}
	for _, a := range m.agents {
		if a.State != lifecycle.Stopped && !a.StateSince.IsZero() {
			take(untilAgeChanges(now.Sub(a.StateSince)))
		}
		if n, found := m.notes[a.Name]; found && now.Sub(n.at) < noteFor {
			take(n.at.Add(noteFor).Sub(now))
		}
	}
	for _, mm := range m.mail {
		take(untilAgeChanges(now.Sub(mm.CreatedAt)))
	}
	if a := m.current(); a != nil && a.State == lifecycle.Running {
		take(tailEvery)
	}
	return best, ok
}
