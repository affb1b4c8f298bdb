package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/termsafe"
)

// Styles. Basic ANSI colours, so the terminal's theme decides the shades.
var (
	stHeader = lipgloss.NewStyle().Bold(true).Reverse(true)
	stTitle  = lipgloss.NewStyle().Bold(true)
	stDim    = lipgloss.NewStyle().Faint(true)
	stBold   = lipgloss.NewStyle().Bold(true)
	stUrgent = lipgloss.NewStyle().Foreground(lipgloss.Red).Bold(true)
	stNote   = lipgloss.NewStyle().Foreground(lipgloss.Yellow)
	stBad    = lipgloss.NewStyle().Foreground(lipgloss.Red)
	stInput  = lipgloss.NewStyle().Foreground(lipgloss.Cyan).Bold(true)

	stateStyles = map[string]lipgloss.Style{
		"running":      lipgloss.NewStyle().Foreground(lipgloss.Green).Bold(true),
		"interrupting": lipgloss.NewStyle().Foreground(lipgloss.Red).Bold(true),
		"idle":         lipgloss.NewStyle().Foreground(lipgloss.Blue),
		"cooling":      lipgloss.NewStyle().Foreground(lipgloss.Yellow),
		"stopped":      lipgloss.NewStyle().Foreground(lipgloss.BrightBlack),
		"paused":       lipgloss.NewStyle().Foreground(lipgloss.Magenta),
		"busy":         lipgloss.NewStyle().Foreground(lipgloss.Cyan),
	}
)

// stateKind groups the lifecycle states by what they mean to the operator;
// each kind has its colour.
func stateKind(state lifecycle.State) string {
	switch state {
	case lifecycle.Running:
		return "running"
	case lifecycle.Interrupting:
		return "interrupting"
	case lifecycle.Idle:
		return "idle"
	case lifecycle.CoolingDown:
		return "cooling"
	case lifecycle.Stopped, "":
		return "stopped"
	case lifecycle.Paused, lifecycle.Held, lifecycle.Waiting:
		return "paused"
	}
	return "busy" // Initializing, BuildingPrompt, Spawning, SessionComplete
}

// footerKind is stateKind for the footer's counts, where Held (waiting
// on the operator's decision) and Waiting (on the team launch) are not
// "paused": only the operator's pause is.
func footerKind(state lifecycle.State) string {
	switch state {
	case lifecycle.Held:
		return "held"
	case lifecycle.Waiting:
		return "waiting"
	}
	return stateKind(state)
}

// View draws the screen.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = m.opts.Title
	return v
}

func (m *Model) render() string {
	w, h := m.width, m.height
	if w == 0 || h == 0 {
		return ""
	}
	if w < 40 || h < 12 {
		return fit("swarm: the terminal is too small (40x12 at least)", w)
	}
	var lines []string
	switch m.screen {
	case screenHelp:
		lines = m.helpLines(w, h)
	case screenPrompt:
		lines = m.promptLines(w, h)
	default:
		lines = m.mainLines(w, h)
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines[:h], "\n")
}

func (m *Model) header(w int, right string) string {
	title := m.opts.Title
	if title == "" {
		title = "swarm"
	}
	if m.stopping {
		title += " · stopping"
	}
	left := " " + title
	gap := w - ansi.StringWidth(left) - ansi.StringWidth(right) - 1
	if gap < 1 {
		return stHeader.Render(pad(left, w))
	}
	return stHeader.Render(left + strings.Repeat(" ", gap) + right + " ")
}

// rule is a pane title followed by a line to the edge.
func rule(title, extra string, w int) string {
	s := stTitle.Render(title)
	if extra != "" {
		s += " " + stDim.Render(extra)
	}
	rest := w - ansi.StringWidth(s) - 1
	if rest > 0 {
		s += " " + stDim.Render(strings.Repeat("─", rest))
	}
	return fit(s, w)
}

func (m *Model) mainLines(w, h int) []string {
	now := m.now()
	quit := "q stop the swarm"
	if m.opts.Stop == nil {
		quit = "q leave (the swarm keeps running)"
	}
	out := []string{m.header(w, "? help · "+quit)}
	body := h - 3 // header, status line, footer

	// Escalations waiting for the operator, above everything else.
	if len(m.escalations) > 0 {
		lines := m.escalationLines(w, min(len(m.escalations), 3, max(body/4, 1)), now)
		out = append(out, rule("Escalations", fmt.Sprintf("(%d) · e next · a ack · r resume · x abort", len(m.escalations)), w))
		out = append(out, lines...)
		body -= 1 + len(lines)
	}

	// Workflows' live items: a few lines, the rest counted.
	if len(m.workflows) > 0 {
		rows := min(len(m.workflows), 4, max(body/5, 1))
		out = append(out, rule("Workflows", fmt.Sprintf("(%d lines) · swarm workflow status", len(m.workflows)), w))
		for _, line := range m.workflows[:rows] {
			out = append(out, fit(oneLine(line), w))
		}
		body -= 1 + rows
	}

	// The merge queue: a few lines, the rest counted.
	if len(m.merges) > 0 {
		rows := min(len(m.merges), 3, max(body/6, 1))
		out = append(out, rule("Merge queue", fmt.Sprintf("(%d lines) · swarm merges", len(m.merges)), w))
		for _, line := range m.merges[:rows] {
			out = append(out, fit(oneLine(line), w))
		}
		body -= 1 + rows
	}

	// Agents: as many rows as fit in half the body, scrolled to the
	// selection.
	n := max(len(m.agents), 1)
	agentRows := min(n, max(body/2-2, 1))
	out = append(out, rule("Agents", fmt.Sprintf("(%d)", len(m.agents)), w))
	out = append(out, m.agentLines(w, agentRows, now)...)

	rest := body - 2 - agentRows
	mailRows := min(max(len(m.mail), 1), 8, max(rest/2-1, 1))
	urgent := 0
	for _, mm := range m.mail {
		if mm.IsUrgent() && mm.State == message.Queued {
			urgent++
		}
	}
	extra := ""
	if len(m.mail) > 0 {
		extra = fmt.Sprintf("(latest %d)", min(len(m.mail), mailRows))
	}
	if urgent > 0 {
		extra += fmt.Sprintf(" · %d urgent queued", urgent)
	}
	out = append(out, rule("Mail", extra, w))
	out = append(out, m.mailLines(w, mailRows, now)...)

	tailRows := max(rest-mailRows-2, 1)
	out = append(out, m.tailTitle(w))
	out = append(out, m.tailLines(w, tailRows)...)
	for len(out) < h-2 {
		out = append(out, "")
	}
	out = out[:h-2]
	return append(out, m.statusLine(w), m.footer(w))
}

// Column widths of the agents table.
const (
	colState   = 20
	colSession = 8
	colTime    = 6
	colMail    = 6
	colUrgent  = 8
)

func (m *Model) nameWidth() int {
	nw := 5
	for _, a := range m.agents {
		nw = max(nw, ansi.StringWidth(a.Name))
	}
	return min(nw, 20)
}

func (m *Model) agentLines(w, rows int, now time.Time) []string {
	nw := m.nameWidth()
	head := "  " + pad("AGENT", nw) + "  " + pad("STATE", colState) + padLeft("SESSION", colSession) + padLeft("TIME", colTime) +
		padLeft("MAIL", colMail) + padLeft("URGENT", colUrgent) + "  LAST"
	out := []string{stDim.Render(fit(head, w))}
	if len(m.agents) == 0 {
		msg := "loading…"
		if m.loaded {
			msg = "no agents"
		}
		return append(out, stDim.Render(fit("  "+msg, w)))
	}
	off := max(m.selected-rows+1, 0)
	for i := off; i < len(m.agents) && i < off+rows; i++ {
		a := m.agents[i]
		mark := "  "
		name := pad(a.Name, nw)
		if i == m.selected {
			mark, name = stBold.Render("▸ "), stBold.Render(name)
		}
		state := "● " + a.State
		if m.pausing[a.Name] {
			state += " (pausing)"
		}
		seq, age := "-", "-"
		if a.Seq > 0 {
			seq = "#" + strconv.FormatInt(a.Seq, 10)
		}
		if a.State != lifecycle.Stopped && !a.StateSince.IsZero() {
			age = text.Age(now.Sub(a.StateSince))
		}
		mail, urgent := "-", padLeft("-", colUrgent)
		if a.Pending > 0 {
			mail = strconv.Itoa(a.Pending)
		}
		if a.Urgent > 0 {
			urgent = stUrgent.Render(padLeft(strconv.Itoa(a.Urgent), colUrgent))
		}
		line := mark + name + "  " + stateStyles[stateKind(a.State)].Render(pad(string(state), colState)) +
			padLeft(seq, colSession) + padLeft(age, colTime) + padLeft(mail, colMail) + urgent + "  "
		lastW := w - ansi.StringWidth(line)
		if a.Budget != "" {
			b := "budget " + a.Budget
			if a.Activity != "" || (a.Report != "" && a.State != lifecycle.Running) || m.noted(a.Name, now) {
				b += " · "
			}
			line += fit(b, lastW)
			lastW = w - ansi.StringWidth(line)
		}
		if n, ok := m.notes[a.Name]; ok && now.Sub(n.at) < noteFor {
			line += stNote.Render(fit("⚡ "+n.text, lastW))
		} else if a.Report != "" && a.State != lifecycle.Running {
			line += fit("report "+oneLine(a.Report), lastW)
		} else {
			line += fit(oneLine(a.Activity), lastW)
		}
		out = append(out, line)
	}
	return out
}

// noted reports whether the agent's row shows a fresh note.
func (m *Model) noted(agent string, now time.Time) bool {
	n, ok := m.notes[agent]
	return ok && now.Sub(n.at) < noteFor
}

// escalationLines shows up to rows escalations, scrolled to the selected
// one.
func (m *Model) escalationLines(w, rows int, now time.Time) []string {
	off := max(m.escSel-rows+1, 0)
	var out []string
	for i := off; i < len(m.escalations) && len(out) < rows; i++ {
		e := m.escalations[i]
		mark := "  "
		if i == m.escSel {
			mark = stBold.Render("▸ ")
		}
		about := ""
		if a := e.About(); a != "" {
			about = " " + a
		}
		state := ""
		if e.State == escalation.Acked {
			state = " acked"
		}
		line := fmt.Sprintf("#%d %s %s%s%s %s: %s", e.ID, e.Severity, e.Kind, about, state, text.Age(now.Sub(e.CreatedAt)), oneLine(e.Summary))
		style := stNote
		if e.Severity == escalation.Critical {
			style = stUrgent
		}
		out = append(out, mark+style.Render(fit(line, w-2)))
	}
	return out
}

func (m *Model) mailLines(w, rows int, now time.Time) []string {
	if len(m.mail) == 0 {
		return []string{stDim.Render(fit("  no mail yet", w))}
	}
	var out []string
	for i := len(m.mail) - 1; i >= 0 && len(out) < rows; i-- {
		mm := m.mail[i]
		state := string(mm.State)
		if mm.State == message.Delivered && mm.SessionSeq != nil {
			state = fmt.Sprintf("in #%d", *mm.SessionSeq)
		}
		route := mm.From + " → " + mm.To
		body := oneLine(mm.Body)
		if mm.IsUrgent() {
			body = "[URGENT] " + body
		}
		line := "  " + pad("#"+strconv.FormatInt(mm.ID, 10), 6) + padLeft(text.Age(now.Sub(mm.CreatedAt)), 4) + "  " +
			pad(route, 26) + "  " + pad(state, 9) + "  " + body
		line = fit(line, w)
		if mm.IsUrgent() {
			line = stUrgent.Render(line)
		}
		out = append(out, line)
	}
	return out
}

func (m *Model) tailTitle(w int) string {
	a := m.current()
	if a == nil {
		return rule("Session log", "", w)
	}
	if a.Seq == 0 {
		return rule("Session log", a.Name, w)
	}
	return rule("Session log", fmt.Sprintf("%s · session %d · .swarm/logs/%s/%d.log", a.Name, a.Seq, a.Name, a.Seq), w)
}

func (m *Model) tailLines(w, rows int) []string {
	a := m.current()
	switch {
	case a == nil:
		return nil
	case a.Seq == 0:
		return []string{stDim.Render(fit("  "+a.Name+" has not run a session yet", w))}
	case m.tailErr != nil:
		return []string{stBad.Render(fit("  cannot read the log: "+m.tailErr.Error(), w))}
	case m.tailAgent != a.Name || (m.tailSeq != a.Seq && len(m.tail) == 0):
		return []string{stDim.Render(fit("  loading…", w))}
	case len(m.tail) == 0:
		return []string{stDim.Render(fit("  the log is empty so far", w))}
	}
	lines := m.tail[max(len(m.tail)-rows, 0):]
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fit("  "+sanitize(l), w)
	}
	return out
}

func (m *Model) statusLine(w int) string {
	switch {
	case m.screen == screenInput:
		label := "message to " + m.inputTo + " › "
		if m.inputUrgent {
			label = "URGENT to " + m.inputTo + " › "
		}
		text := string(m.input) + "█"
		// Keep the end of a long input in view.
		text = ansi.TruncateLeft(text, max(ansi.StringWidth(text)-(w-ansi.StringWidth(label)-1), 0), "…")
		return stInput.Render(label) + text
	case m.confirm != nil:
		return stInput.Render(fit(m.confirm.question, w))
	case m.flash != "" && m.flashBad:
		return stBad.Render(fit(m.flash, w))
	case m.flash != "":
		return fit(m.flash, w)
	}
	if len(m.escalations) > 0 {
		return stDim.Render(fit("↑↓ select · enter prompt · m message · u urgent · i interrupt · p pause/resume · e/a/r/x escalations · ? help", w))
	}
	return stDim.Render(fit("↑↓ select · enter prompt · m message · u urgent · i interrupt · p pause/resume · ? help", w))
}

func (m *Model) footer(w int) string {
	counts := map[string]int{}
	for _, a := range m.agents {
		counts[footerKind(a.State)]++
	}
	var parts []string
	if m.team != "" {
		parts = append(parts, m.team)
	}
	parts = append(parts,
		"tokens "+thousands(m.tokens),
		"sessions "+strconv.FormatInt(m.sessions, 10),
	)
	if m.budget != "" {
		parts = append(parts, "swarm budget "+m.budget)
	}
	for _, k := range []string{"running", "interrupting", "busy", "idle", "cooling", "paused", "held", "waiting", "stopped"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	return stDim.Render(fit(" "+strings.Join(parts, " · "), w))
}

func (m *Model) helpLines(w, h int) []string {
	quit := "stop the swarm gracefully, after asking (Ctrl-C: at once; q again: leave)"
	if m.opts.Stop == nil {
		quit = "leave the view; the swarm keeps running"
	}
	keys := [][2]string{
		{"↑/↓, k/j", "select an agent"},
		{"enter", "the selected agent's current prompt, section by section"},
		{"m", "write a message to the selected agent"},
		{"u", "write an urgent message: it interrupts the running session"},
		{"i", `interrupt the selected agent: asks, then urgent mail "` + interruptBody + `"`},
		{"p", "pause the selected agent after its running session, or resume it"},
		{"e", "select the next open escalation"},
		{"a, r, x", "ack, resume or abort the selected escalation (asks y/n)"},
		{"q", quit},
		{"?", "this help"},
		{"", ""},
		{"in the prompt", "←/→ section · ↑/↓ scroll · pgup/pgdn page · esc back"},
		{"in a message", "enter send · esc cancel · ctrl+u clear"},
	}
	out := []string{m.header(w, "any key: back"), ""}
	for _, k := range keys {
		out = append(out, fit("  "+stBold.Render(pad(k[0], 16))+"  "+k[1], w))
	}
	out = append(out, "", stDim.Render(fit("  States: ", w)))
	for _, s := range []struct {
		state lifecycle.State
		text  string
	}{
		{lifecycle.Running, "a session is running"},
		{lifecycle.Interrupting, "urgent mail is cancelling the session"},
		{lifecycle.Idle, "no work: waiting for mail, tasks or a nudge"},
		{lifecycle.CoolingDown, "waiting after a failed session"},
		{lifecycle.Paused, "paused by the operator"},
		{lifecycle.Held, "held by an open escalation until the operator decides"},
		{lifecycle.Stopped, "not running"},
		{lifecycle.BuildingPrompt, "between sessions (also Initializing, Spawning, SessionComplete)"},
	} {
		out = append(out, fit("  "+stateStyles[stateKind(s.state)].Render(pad("● "+string(s.state), 18))+s.text, w))
	}
	return out
}

func (m *Model) promptLines(w, h int) []string {
	title := fmt.Sprintf("prompt of %s", m.promptAgent)
	if m.promptSeq > 0 {
		title += fmt.Sprintf(" · session %d", m.promptSeq)
	}
	out := []string{m.header(w, "←/→ section · ↑/↓ scroll · esc back"), rule(title, "", w)}
	rows := h - 3
	switch {
	case m.promptSeq == 0:
		return append(out, fit("  "+m.promptAgent+" has not run a session yet: no prompt is stored", w))
	case m.promptErr != nil:
		return append(out, stBad.Render(fit("  cannot read the prompt: "+m.promptErr.Error(), w)))
	case m.promptLoading:
		return append(out, stDim.Render(fit("  loading…", w)))
	case len(m.prompt) == 0:
		return append(out, fit("  the stored prompt is empty", w))
	}
	sec := min(max(m.section, 0), len(m.prompt)-1)

	// Left: the sections, scrolled to the current one. Right: its body.
	iw := min(30, w/3)
	bw := w - iw - 3
	index := make([]string, 0, len(m.prompt))
	for i, s := range m.prompt {
		label := s.Title
		if s.Number > 0 {
			label = fmt.Sprintf("%2d %s", s.Number, s.Title)
		}
		if i == sec {
			index = append(index, stBold.Render(pad("▸ "+label, iw)))
		} else {
			index = append(index, pad("  "+label, iw))
		}
	}
	if off := sec - rows + 1; off > 0 {
		index = index[off:]
	}
	body := strings.Split(ansi.Wrap(sanitize(strings.TrimRight(m.prompt[sec].Body, "\n")), bw, ""), "\n")
	scroll := min(m.scroll, max(len(body)-(rows-1), 0))
	body = body[scroll:]
	where := fmt.Sprintf("section %d of %d", sec+1, len(m.prompt))
	if len(body) > rows-1 || scroll > 0 {
		where += fmt.Sprintf(" · lines %d-%d of %d", scroll+1, scroll+min(len(body), rows-1), scroll+len(body))
	}
	head := m.prompt[sec].Title
	right := append([]string{stTitle.Render(fit(head, bw)) + stDim.Render(fit(" · "+where, bw-ansi.StringWidth(head)))}, body...)
	for i := 0; i < rows; i++ {
		l, r := pad("", iw), ""
		if i < len(index) {
			l = index[i]
		}
		if i < len(right) {
			r = fit(right[i], bw)
		}
		out = append(out, l+" "+stDim.Render("│")+" "+r)
	}
	return out
}

// untilAgeChanges is how long until text.Age(d) shows something else.
func untilAgeChanges(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	unit := time.Second
	switch {
	case d >= 24*time.Hour:
		unit = 24 * time.Hour
	case d >= time.Hour:
		unit = time.Hour
	case d >= time.Minute:
		unit = time.Minute
	}
	return unit - d%unit
}

// thousands formats n with separators: 12,345.
func thousands(n int64) string { return humanize.Comma(n) }

// sanitize neutralises what would break the layout or act on the
// terminal: logs of exec agents and message bodies can hold anything.
// Complete escape sequences (colours, clear-screen, OSC 52 clipboard
// writes) are dropped; any control left is rendered visibly (termsafe).
// Tabs become spaces so columns stay put.
func sanitize(s string) string {
	return strings.ReplaceAll(termsafe.String(ansi.Strip(s)), "\t", " ")
}

// oneLine is the first line of s, sanitized.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	first, _, more := strings.Cut(s, "\n")
	first = sanitize(first)
	if more {
		first += " …"
	}
	return first
}

// fit cuts s to w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// pad fits s to exactly w cells.
func pad(s string, w int) string {
	s = fit(s, w)
	if n := w - ansi.StringWidth(s); n > 0 {
		s += strings.Repeat(" ", n)
	}
	return s
}

// padLeft fits s to exactly w cells, right-aligned.
func padLeft(s string, w int) string {
	s = fit(s, w)
	if n := w - ansi.StringWidth(s); n > 0 {
		s = strings.Repeat(" ", n) + s
	}
	return s
}
