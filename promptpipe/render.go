package promptpipe

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/protocol"
)

// Caps on gathered text, so one huge file or status cannot crowd out the
// rest of the prompt.
const (
	maxProjectInstructions = 32 << 10
	maxStatusLines         = 40
	maxTitle               = 200
)

// Render builds the prompt from its inputs. It is pure and deterministic:
// the same inputs give the same text. cfg supplies MessageCap (0: no cap),
// TaskLimit and IncludeEpics; now dates the messages and the interrupt.
func Render(pc PromptContext, src Sources, cfg config.Prompt, now time.Time) Prompt {
	var p Prompt
	add := func(n int, body string) {
		p.Sections = append(p.Sections, Section{Number: n, Title: Titles[n], Body: strings.TrimRight(body, "\n")})
	}
	add(SecIdentity, identity(pc))
	add(SecAgentRole, agentRole(pc))
	add(SecModeInstructions, ModeInstructionsFor(pc.Spec(), pc.Vector(), pc.Beads, pc.CLI))
	if pc.Workflow != nil {
		add(SecWorkflowContext, workflowContext(*pc.Workflow))
	}
	if strings.TrimSpace(src.ProjectInstructions) != "" {
		add(SecProjectInstructions, projectInstructions(src.ProjectInstructions))
	}
	add(SecCoreMandates, coreMandates(pc))
	add(SecDoingTasks, doingTasks)
	add(SecToolUsagePolicy, toolUsagePolicyFor(pc.CLI))
	add(SecSwarmWorkflow, swarmWorkflow)
	add(SecToneStyle, toneStyle)
	add(SecEnvironment, environment(src.Env, now)+integration(pc.Integration)+reservations(pc.Agent, pc.Reservations, now))
	if len(pc.Messages) > 0 {
		add(SecMessages, messages(pc, cfg.MessageCap, now))
	}
	body, listed := tasks(pc, src.Tasks, cfg)
	if plan := taskPlan(pc, src); plan != "" {
		body = strings.TrimRight(body, "\n")
		if body != "" {
			body += "\n\n"
		}
		body += plan
	}
	if body != "" {
		add(SecTasks, body)
		p.TaskIDs = listed
	}
	add(SecSessionContext, sessionContext(pc, cfg.MessageCap, now))

	var b strings.Builder
	for i, s := range p.Sections {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("## " + s.Title + "\n" + s.Body + "\n")
	}
	p.Text = b.String()
	p.TokensEstimate = EstimateTokens(p.Text)
	return p
}

// EstimateTokens is the size rule the prompt budget uses: characters / 4.
func EstimateTokens(s string) int { return utf8.RuneCountInString(s) / 4 }

func identity(pc PromptContext) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s, an LLM coding agent in a swarm: a team of agents that work in one git repository at the same time, each in its own worktree on its own branch, coordinated by the swarm runtime.\n", pc.Agent)
	if len(pc.Teammates) == 0 {
		b.WriteString("You have no teammates in this swarm. ")
	} else {
		fmt.Fprintf(&b, "Your teammates: %s", strings.Join(pc.Teammates, ", "))
		if pc.MoreTeammates > 0 {
			fmt.Fprintf(&b, ", and %d more (`swarm status` lists every agent; $SWARM_AGENTS names them)", pc.MoreTeammates)
		}
		b.WriteString(". ")
	}
	b.WriteString("The human who runs the swarm is `operator`.")
	return b.String()
}

func agentRole(pc PromptContext) string {
	if strings.TrimSpace(pc.Role) == "" {
		return "No role is configured for you. Work from your mail and tasks; if you have neither, ask `operator` what to do."
	}
	return nest(strings.TrimSpace(pc.Role))
}

func workflowContext(w WorkflowContext) string {
	var b strings.Builder
	if w.Workflow != "" {
		fmt.Fprintf(&b, "Workflow %s (%s), run by the swarm supervisor: it routes, counts and times every step; you do this stage's work and end it with one of the commands below.\n", oneLine(w.Workflow), oneLine(w.Kind))
	}
	fmt.Fprintf(&b, "You are at workflow stage: %s.\n", oneLine(w.Stage))
	if w.Item != "" {
		fmt.Fprintf(&b, "Item: %s: %s\n", oneLine(w.Item), oneLine(w.Title))
	}
	if w.Risk != "" {
		fmt.Fprintf(&b, "Risk: %s\n", oneLine(w.Risk))
	}
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		b.WriteString(title + ":\n")
		for _, it := range items {
			b.WriteString("- " + oneLine(it) + "\n")
		}
	}
	list("Acceptance criteria", w.Criteria)
	if len(w.Inputs) > 0 {
		// Verbatim: a reviewer's issue or QA's feedback keeps its lines.
		b.WriteString("Inputs (verbatim):\n")
		for _, in := range w.Inputs {
			b.WriteString("- " + strings.ReplaceAll(strings.TrimRight(nest(in), "\n"), "\n", "\n  ") + "\n")
		}
	}
	list("Constraints", w.Constraints)
	if len(w.Commands) > 0 {
		b.WriteString("End the stage with exactly one of:\n")
		for _, c := range w.Commands {
			b.WriteString("    " + c + "\n")
		}
	}
	return b.String()
}

func projectInstructions(text string) string {
	text = strings.TrimSpace(text)
	note := ""
	if len(text) > maxProjectInstructions {
		text = cutBytes(text, maxProjectInstructions)
		note = "\n[AGENTS.md is longer; read the file for the rest.]"
	}
	return "From AGENTS.md at the repository root. Where it conflicts with the Core Mandates, the mandates win.\n\n" + nest(text) + note
}

func environment(env EnvironmentInfo, now time.Time) string {
	var b strings.Builder
	platform := env.Platform
	if env.OSVersion != "" {
		platform += ", OS version " + env.OSVersion
	}
	fmt.Fprintf(&b, "Platform: %s\n", platform)
	if env.Shell != "" {
		fmt.Fprintf(&b, "Shell: %s\n", env.Shell)
	}
	if env.Cwd != "" {
		fmt.Fprintf(&b, "Working directory: %s\n", env.Cwd)
	}
	date := env.Date
	if date.IsZero() {
		date = now
	}
	fmt.Fprintf(&b, "Date: %s\n", date.Format("Monday 2006-01-02 15:04 MST"))
	if env.HasGitStatus {
		if env.GitStatus == "" {
			b.WriteString("Git status: clean\n")
		} else {
			b.WriteString("Git status (`git status --short`):\n")
			lines := strings.Split(env.GitStatus, "\n")
			for i, l := range lines {
				if i == maxStatusLines {
					fmt.Fprintf(&b, "  … and %d more (run `git status`)\n", len(lines)-i)
					break
				}
				b.WriteString("  " + l + "\n")
			}
		}
	}
	if env.HasCommits {
		if len(env.RecentCommits) == 0 {
			b.WriteString("Recent commits: none yet\n")
		} else {
			b.WriteString("Recent commits:\n")
			for _, c := range env.RecentCommits {
				b.WriteString("  " + oneLine(c) + "\n")
			}
		}
	}
	return b.String()
}

// sortMail orders mail the way the prompt shows it: urgent first, then
// oldest (by time, then id).
func sortMail(ms []message.Message) []message.Message {
	ms = slices.Clone(ms)
	slices.SortStableFunc(ms, func(a, b message.Message) int {
		if a.IsUrgent() != b.IsUrgent() {
			if a.IsUrgent() {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return ms
}

func messages(pc PromptContext, limit int, now time.Time) string {
	var b strings.Builder
	for i, m := range sortMail(pc.Messages) {
		if i > 0 {
			b.WriteString("\n")
		}
		if m.IsUrgent() {
			b.WriteString("[URGENT] ")
		}
		fmt.Fprintf(&b, "#%d From %s (%s ago):\n", m.ID, m.From, HumanAge(now.Sub(m.CreatedAt)))
		if m.Shown > 0 {
			b.WriteString("(Shown before, to a session that did not finish: check what you already did about it.)\n")
		}
		if text, ok := protocolMail(m, limit, pc.Agent, now); ok {
			b.WriteString(text)
			continue
		}
		b.WriteString(capBody(m.Body, limit, m.ID, pc.Agent) + "\n")
	}
	return b.String()
}

// protocolMail renders a protocol message (DESIGN §9.2) with
// protocol.RenderPrompt: type, msg_id, task and sender, the payload as
// compact JSON exactly as stored, and what is expected by when. A payload
// over the cap is cut like a body, keeping what is expected.
func protocolMail(m message.Message, limit int, agent string, now time.Time) (string, bool) {
	if m.Kind != message.KindProtocol {
		return "", false
	}
	env, err := protocol.Parse(m.Payload)
	if err != nil || env.MsgID == "" {
		return "", false // not an envelope: shown as its body
	}
	if limit > 0 && len(env.Payload) > limit {
		cut := cutBytes(string(env.Payload), limit)
		env.Payload = []byte(fmt.Sprintf("%s [… cut: %d more bytes. Read the whole payload of message #%d with `swarm inbox %s --json`.]", cut, len(env.Payload)-len(cut), m.ID, agent))
	}
	var ack protocol.AckState
	if a := m.Ack; a != nil {
		if a.DueAt != nil {
			ack.Deadline = *a.DueAt
		}
		ack.Acked = a.State == message.AckAcked
	}
	return protocol.RenderPrompt(env, ack, now), true
}

// capBody cuts a body longer than limit bytes (0: no limit) at a rune
// boundary and says how to read the rest.
func capBody(body string, limit int, id int64, agent string) string {
	body = strings.TrimRight(body, "\n")
	if limit <= 0 || len(body) <= limit {
		return nest(body)
	}
	cut := cutBytes(body, limit)
	return fmt.Sprintf("%s\n[… cut: %d more bytes. Read all of message #%d with `swarm inbox %s --json`.]", nest(cut), len(body)-len(cut), id, agent)
}

// tasks renders the ready list and returns the ids it lists. Empty when
// there is nothing to list.
func tasks(pc PromptContext, all []beads.Issue, cfg config.Prompt) (string, []string) {
	var ready []beads.Issue
	for _, t := range all {
		if t.IsEpic() && !cfg.IncludeEpics {
			continue
		}
		ready = append(ready, t)
	}
	if len(ready) == 0 {
		return "", nil
	}
	// bd's order among equal priorities changes between runs.
	slices.SortStableFunc(ready, func(a, b beads.Issue) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.ID, b.ID))
	})
	limit := min(max(cfg.TaskLimit, 0), len(ready))
	var b strings.Builder
	b.WriteString("Open tasks with nothing blocking them, most urgent first (P0 is the highest priority):\n")
	ids := make([]string, 0, limit)
	for _, t := range ready[:limit] {
		fmt.Fprintf(&b, "- %s: [%s] P%d %s: %s\n", t.ID, t.Status, t.Priority, t.IssueType, title(t.Title))
		ids = append(ids, t.ID)
	}
	if more := len(ready) - limit; more > 0 {
		fmt.Fprintf(&b, "and %d more (`bd ready` lists them all).\n", more)
	}
	switch {
	case !pc.Beads || !pc.Vector().AllowsTool(mode.BDClaim, pc.Beads):
		b.WriteString("Your mode does not claim tasks: they are listed so you know what the team is working on.\n")
	case pc.Mode.Kind() == mode.Coordinate:
		b.WriteString("Hand these out: name the task id in each assignment, so its owner claims it.\n")
	default:
		fmt.Fprintf(&b, "Before you start a task, claim it with %s so nobody else takes it; close it with %s, giving a reason, once it is done. %s shows a task's details.\n",
			mode.BDClaim, mode.BDClose, mode.BDShow)
	}
	return b.String(), ids
}

func title(s string) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) > maxTitle {
		s = string([]rune(s)[:maxTitle-1]) + "…"
	}
	return s
}

func sessionContext(pc PromptContext, limit int, now time.Time) string {
	var b strings.Builder
	if pc.SessionID == "" {
		b.WriteString("Session ID: none yet (this is a preview)\n")
	} else {
		fmt.Fprintf(&b, "Session ID: %s ($SWARM_SESSION_ID)\n", pc.SessionID)
	}
	fmt.Fprintf(&b, "Session number: %d ($SWARM_SESSION_SEQ). ", pc.SessionSeq)
	if pc.SessionSeq == 1 {
		b.WriteString("This is your first session.\n")
	} else {
		b.WriteString("You remember nothing of earlier sessions; their work is in your branch's commits and your mail, so check `git log` before redoing anything.\n")
	}
	fmt.Fprintf(&b, "Branch: %s\n", pc.branch())
	fmt.Fprintf(&b, "Worktree: %s\n", pc.Worktree)
	if pc.DBPath != "" {
		fmt.Fprintf(&b, "Mailbox database: %s ($SWARM_DB); use `swarm` commands, never edit it.\n", pc.DBPath)
	}
	if ic := pc.Interrupt; ic != nil {
		b.WriteString("\n### Interrupt Context\n")
		prev := "Your previous session"
		if pc.SessionSeq > 1 {
			prev = fmt.Sprintf("Your previous session (%d)", pc.SessionSeq-1)
		}
		reason := ic.Reason
		if reason == "" {
			reason = "urgent message"
		}
		fmt.Fprintf(&b, "%s was interrupted %s ago (%s) and stopped mid-step.\n", prev, HumanAge(now.Sub(ic.When)), oneLine(reason))
		if ic.MessageID != 0 || ic.Body != "" {
			fmt.Fprintf(&b, "The cause, message #%d from %s:\n%s\n", ic.MessageID, ic.From, capBody(ic.Body, limit, ic.MessageID, pc.Agent))
			b.WriteString("Deal with it first; it is also under Messages from teammates if it is still waiting. ")
		}
		b.WriteString("Check `git status` and `git diff` for half-done edits before you go on.\n")
	}
	if len(pc.Decisions) > 0 {
		b.WriteString("\n### Operator Decision\n")
		ds := slices.Clone(pc.Decisions)
		slices.SortFunc(ds, func(x, y OperatorDecision) int { return cmp.Compare(x.Escalation, y.Escalation) })
		for i, d := range ds {
			if i > 0 {
				b.WriteString("\n")
			}
			summary := oneLine(d.Summary)
			if len(summary) > 300 {
				summary = cutBytes(summary, 300) + "…"
			}
			fmt.Fprintf(&b, "The operator decided escalation #%d (%s: %s) %s ago: %s. %s\n", d.Escalation, d.Kind,
				summary, HumanAge(now.Sub(d.When)), d.Decision, decisionHint(d.Decision))
			if note := strings.TrimSpace(d.Note); note != "" {
				if limit > 0 && len(note) > limit {
					note = cutBytes(note, limit) + " […]"
				}
				fmt.Fprintf(&b, "Their note:\n%s\n", nest(note))
			}
		}
	}
	return b.String()
}

// decisionHint says what a decision asks of the agent.
func decisionHint(d string) string {
	switch d {
	case "resume":
		return "Carry on with that work, following their note."
	case "approve":
		return "Approved: go ahead with what you asked."
	case "abort":
		return "Drop that work: do not redo it, and tell whoever asked for it."
	case "reject":
		return "Rejected: do not do what you asked."
	}
	return ""
}

func (pc PromptContext) branch() string {
	if pc.Branch != "" {
		return pc.Branch
	}
	return "swarm/" + pc.Agent
}

// HumanAge renders an age the way the prompt shows it: 12s, 2m, 3h, 2d.
// A negative age (clock skew) is 0s.
func HumanAge(d time.Duration) string { return text.Age(d) }

// nest moves Markdown headings down two levels outside code fences, so an
// embedded document's "## Foo" cannot read as one of the prompt's own
// sections.
func nest(s string) string {
	if !strings.Contains(s, "#") {
		return s
	}
	lines := strings.Split(s, "\n")
	fence := ""
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		// Four spaces of indent make a code block, not a heading.
		if len(l)-len(t) < 4 && isHeading(t) {
			lines[i] = "##" + t
		}
	}
	return strings.Join(lines, "\n")
}

func isHeading(l string) bool {
	n := 0
	for n < len(l) && l[n] == '#' {
		n++
	}
	return n >= 1 && n <= 6 && (n == len(l) || l[n] == ' ' || l[n] == '\t')
}

// oneLine folds whitespace, newlines included, into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cutBytes returns at most n bytes of s, ending at a rune boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maxReservations is how many file reservations Environment lists.
const maxReservations = 20

// reservations is Environment's list of live file reservations: the
// teammates' first, which the agent must keep clear of (an exclusive one
// warns the operator if its files are committed), then the agent's own,
// to release when done.
func reservations(self string, rs []Reservation, now time.Time) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("File reservations (`swarm reservations`; leave a teammate's exclusive ones alone, or ask first):\n")
	var lines []string
	var mine []string
	for _, r := range rs {
		how := ""
		if r.Exclusive {
			how = " exclusively"
		}
		if !r.Until.IsZero() {
			how += " until " + clockTime(r.Until, now)
		}
		if r.Reason != "" {
			how += ": " + oneLine(r.Reason)
		}
		if r.Agent == self {
			mine = append(mine, fmt.Sprintf("  you hold %s%s (`swarm release` when done)", r.Glob, how))
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s holds %s%s", r.Agent, r.Glob, how))
	}
	lines = append(lines, mine...)
	for i, l := range lines {
		if i == maxReservations {
			fmt.Fprintf(&b, "  … and %d more\n", len(lines)-i)
			break
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// clockTime is t as 15:04 in now's zone, with the date when it is another
// day.
func clockTime(t, now time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04")
	}
	return t.Format("2006-01-02 15:04")
}
