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
