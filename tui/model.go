package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/message"
)

const (
	// mailKeep is how many of the latest messages the view holds.
	mailKeep = 50
	// tailLines is how many log lines a tail read asks for.
	tailLines = 200
	// tailEvery re-reads the selected agent's log while it is Running.
	tailEvery = time.Second
	// noteFor keeps a notable event (an interrupt, a pause, an error) in
	// the agent's row even when tool calls follow right after it.
	noteFor = 10 * time.Second
	// interruptBody is the urgent mail the i key sends.
	interruptBody = "interrupted by operator"
)

type screen int

const (
	screenMain screen = iota
	screenHelp
	screenPrompt
	screenInput
)

// Messages the model gets besides bubbletea's own.
type (
	eventMsg    struct{ ev lifecycle.Notice }
	endMsg      struct{ err error }
	snapshotMsg struct {
		snap Snapshot
		err  error
	}
	tailMsg struct {
		agent string
		seq   int64
		lines []string
		err   error
	}
	promptMsg struct {
		agent    string
		seq      int64
		sections []Section
		err      error
	}
	sentMsg struct {
		msg       message.Message
		interrupt bool
		err       error
	}
	pausedMsg struct {
		agent  string
		paused bool
		err    error
	}
	decidedMsg struct {
		action escalation.Event
		esc    escalation.Escalation
		err    error
	}
	tickMsg struct{ gen int }
)

type note struct {
	text string
	at   time.Time
}

// Model is the live view's state. It is a bubbletea model; Run drives it.
type Model struct {
	ctx  context.Context
	src  Source
	opts Options
	now  func() time.Time
	jobs *jobs
	// sleep waits d and reports whether the timer fired (false when ctx
	// ended first). Tests replace it to see the timers asked for.
	sleep func(ctx context.Context, d time.Duration) bool

	width, height int
	screen        screen

	loaded           bool
	agents           []Agent
	escalations      []escalation.Escalation
	workflows        []string          // live work items, one line each
	merges           []string          // the merge queue's live candidates, one line each
	escSel           int               // the selected escalation
	mail             []message.Message // oldest first
	tokens, sessions int64
	budget           string // the swarm's, Snapshot.Budget
	team             string // the team launch, Snapshot.Team
	selected         int
	notes            map[string]note
	pausing          map[string]bool // pause asked for, not Paused yet

	reloading, reloadAgain bool

	tail                []string
	tailAgent           string
	tailSeq             int64
	tailErr             error
	tailLoading, tailRe bool

	prompt        []Section
	promptAgent   string
	promptSeq     int64
	promptErr     error
	promptLoading bool
	section       int
	scroll        int

	input       []rune
	inputTo     string
	inputUrgent bool

	flash    string
	flashBad bool
	// confirm is a question waiting for y (anything else is no): q and i
	// ask before they stop the swarm or interrupt a session.
	confirm  *confirmation
	stopping bool
	ended    error // why the source's stream ended; nil while it runs

	tickGen    int
	tickAt     time.Time
	tickCancel context.CancelFunc
}

// New returns the view's model. ctx bounds every read and action it makes.
func New(ctx context.Context, src Source, opts Options) *Model {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Model{
		ctx:     ctx,
		src:     src,
		opts:    opts,
		now:     now,
		jobs:    &jobs{},
		sleep:   sleepCtx,
		notes:   map[string]note{},
		pausing: map[string]bool{},
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Init loads the first snapshot.
func (m *Model) Init() tea.Cmd { return m.reload() }

// Update applies one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	if tick := m.reschedule(); tick != nil {
		cmd = tea.Batch(cmd, tick)
	}
	return m, cmd
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.PasteMsg:
		if m.screen == screenInput {
			m.input = append(m.input, []rune(strings.ReplaceAll(msg.Content, "\n", " "))...)
		}
	case eventMsg:
		return m.apply(msg.ev)
	case endMsg:
		m.ended = msg.err
		return tea.Quit
	case snapshotMsg:
		return m.gotSnapshot(msg)
	case tailMsg:
		return m.gotTail(msg)
	case promptMsg:
		if msg.agent == m.promptAgent && msg.seq == m.promptSeq {
			m.promptLoading = false
			m.prompt, m.promptErr = msg.sections, msg.err
		}
	case sentMsg:
		m.gotSent(msg)
	case pausedMsg:
		m.gotPaused(msg)
	case decidedMsg:
		if msg.err != nil {
			m.setFlash(fmt.Sprintf("cannot %s: %v", msg.action, msg.err), true)
		} else {
			m.setFlash(fmt.Sprintf("escalation %d %s", msg.esc.ID, decidedText(msg.action)), false)
		}
		return m.reload()
	case tickMsg:
		if msg.gen != m.tickGen {
			return nil // a timer replaced by an earlier one
		}
		m.tickCancel = nil
		if a := m.current(); a != nil && a.State == lifecycle.Running && m.screen != screenPrompt {
			return m.loadTail()
		}
	}
	return nil
}

// apply folds a notice into the model at once; the snapshot re-read that
// follows corrects the derived numbers.
func (m *Model) apply(ev lifecycle.Notice) tea.Cmd {
	var cmds []tea.Cmd
	a := m.agent(ev.Agent)
	switch ev.Kind {
	case lifecycle.NoticeTransition:
		if a != nil {
			// A self-transition (urgent mail joining the session) keeps
			// the time in state.
			if a.State != ev.To || ev.From != ev.To {
				a.StateSince = ev.At
			}
			a.State = ev.To
			if ev.Seq > 0 {
				a.Seq = ev.Seq
			}
		}
		if text := notable(ev); text != "" {
			m.notes[ev.Agent] = note{text: text, at: ev.At}
		}
		if ev.To == lifecycle.Paused || ev.From == lifecycle.Paused || ev.To == lifecycle.Stopped {
			delete(m.pausing, ev.Agent)
		}
		cmds = append(cmds, m.reload())
	case lifecycle.NoticeActivity:
		if a != nil {
			a.Activity = ev.Text
		}
	case lifecycle.NoticeMessage:
		if ev.Message != nil {
			m.addMail(*ev.Message)
		}
		cmds = append(cmds, m.reload())
	case lifecycle.NoticeInfo:
		if ev.Text != "" {
			m.notes[ev.Agent] = note{text: ev.Text, at: ev.At}
		}
		cmds = append(cmds, m.reload())
	case lifecycle.NoticeEscalation:
		if ev.Agent != "" && ev.Text != "" {
			m.notes[ev.Agent] = note{text: ev.Text, at: ev.At}
		}
		cmds = append(cmds, m.reload())
	}
	if c := m.current(); c != nil && c.Name == ev.Agent && ev.Kind != "message" {
		cmds = append(cmds, m.loadTail())
	}
	return tea.Batch(cmds...)
}

// notable says what of a transition stays in the agent's row for a while.
func notable(ev lifecycle.Notice) string {
	cause := ""
	if ev.Cause != "" {
		cause = ": " + ev.Cause
	}
	switch {
	case ev.To == lifecycle.Interrupting:
		return "interrupted" + cause
	case ev.From == lifecycle.Running && ev.To == lifecycle.Running:
		return "urgent mail joined the session"
	case ev.To == lifecycle.Held:
		return "held" + strings.TrimPrefix(cause, ": held")
	case ev.From == lifecycle.Held:
		return "released" + cause
	case ev.To == lifecycle.Paused:
		return "paused"
	case ev.From == lifecycle.Paused:
		return "resumed"
	case ev.To == lifecycle.CoolingDown:
		return "session failed" + cause
	case ev.To == lifecycle.Stopped && ev.Cause != "shutdown":
		return "stopped" + cause
	case ev.Cause == "recovered":
		return "recovered after a crash"
	}
	return ""
}

func (m *Model) addMail(msg message.Message) {
	i, found := slices.BinarySearchFunc(m.mail, msg.ID, func(x message.Message, id int64) int {
		return cmpInt(x.ID, id)
	})
	if found {
		m.mail[i] = msg
		return
	}
	m.mail = slices.Insert(m.mail, i, msg)
	if len(m.mail) > mailKeep {
		m.mail = m.mail[len(m.mail)-mailKeep:]
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
