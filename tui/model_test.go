package tui

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/message"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var base = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func seqp(n int64) *int64 { return &n }

// fakeSource serves canned data and records what the view asks for.
type fakeSource struct {
	mu        sync.Mutex
	snap      Snapshot
	snapshots int
	tails     map[string][]string // "agent/seq"
	tailReads []string
	prompts   map[string][]Section
	sent      []string // "to|body|urgent"
	pauses    []string // "pause agent" / "resume agent"
	decided   []string // "action id"
	sendErr   error
	nextID    int64
	events    chan lifecycle.Notice
}

func (f *fakeSource) Next(ctx context.Context) (lifecycle.Notice, error) {
	select {
	case ev, ok := <-f.events:
		if !ok {
			return lifecycle.Notice{}, io.EOF
		}
		return ev, nil
	case <-ctx.Done():
		return lifecycle.Notice{}, context.Cause(ctx)
	}
}

func (f *fakeSource) Snapshot(ctx context.Context) (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshots++
	s := f.snap
	s.Agents = slices.Clone(s.Agents)
	return s, nil
}

func (f *fakeSource) Tail(ctx context.Context, agent string, seq int64, lines int) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fmt.Sprintf("%s/%d", agent, seq)
	f.tailReads = append(f.tailReads, key)
	return f.tails[key], nil
}

func (f *fakeSource) Prompt(ctx context.Context, agent string, seq int64) ([]Section, error) {
	return f.prompts[fmt.Sprintf("%s/%d", agent, seq)], nil
}

func (f *fakeSource) Send(ctx context.Context, to, body string, urgent bool) (message.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sendErr != nil {
		return message.Message{}, f.sendErr
	}
	f.sent = append(f.sent, fmt.Sprintf("%s|%s|%v", to, body, urgent))
	f.nextID++
	m := message.Message{ID: f.nextID, From: "operator", To: to, Kind: message.KindMessage, Urgency: message.Normal,
		Body: body, State: message.Queued, CreatedAt: base}
	if urgent {
		m.Urgency = message.Urgent
	}
	return m, nil
}

func (f *fakeSource) SetPaused(ctx context.Context, agent string, paused bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	verb := "resume"
	if paused {
		verb = "pause"
	}
	f.pauses = append(f.pauses, verb+" "+agent)
	return nil
}

func (f *fakeSource) Decide(ctx context.Context, id int64, action escalation.Event) (escalation.Escalation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decided = append(f.decided, fmt.Sprintf("%s %d", action, id))
	for i, e := range f.snap.Escalations {
		if e.ID == id {
			if action == escalation.Ack {
				e.State = escalation.Acked
				f.snap.Escalations[i] = e
			} else {
				f.snap.Escalations = slices.Delete(f.snap.Escalations, i, i+1)
			}
			return e, nil
		}
	}
	return escalation.Escalation{}, fmt.Errorf("no escalation %d", id)
}

func newFake() *fakeSource {
	return &fakeSource{
		nextID: 10,
		snap: Snapshot{
			Agents: []Agent{
				{Name: "backend", State: "Running", Seq: 3, StateSince: base.Add(-12 * time.Second), Pending: 2, Urgent: 1,
					Activity: "bash: go test ./...", Tokens: 12000},
				{Name: "frontend", State: "Idle", Seq: 5, StateSince: base.Add(-4*time.Minute - 10*time.Second),
					Activity: "read_file: src/app.tsx", Tokens: 20567},
				{Name: "reviewer", State: "CoolingDown", Seq: 2, StateSince: base.Add(-30 * time.Second), Tokens: 2000, Budget: "2,000/5,000 in 24h"},
				{Name: "docs", State: "Stopped"},
			},
			Mail: []message.Message{
				{ID: 1, From: "operator", To: "backend", Urgency: message.Normal, Body: "the /users endpoint returns 500\nstack trace follows",
					State: message.Done, SessionSeq: seqp(2), CreatedAt: base.Add(-10 * time.Minute)},
				{ID: 2, From: "frontend", To: "backend", Urgency: message.Normal, Body: "the login page is ready",
					State: message.Delivered, SessionSeq: seqp(3), CreatedAt: base.Add(-2 * time.Minute)},
				{ID: 3, From: "backend", To: "operator", Urgency: message.Normal, Body: "the API is done",
					State: message.Queued, CreatedAt: base.Add(-65 * time.Second)},
				{ID: 4, From: "operator", To: "backend", Urgency: message.Urgent, Body: "stop: the migration is wrong",
					State: message.Queued, CreatedAt: base.Add(-5 * time.Second)},
			},
			Tokens:   34567,
			Sessions: 10,
			Budget:   "34,567/100,000 in 24h",
		},
		tails: map[string][]string{
			"backend/3": {
				"session 3 of backend",
				"> bash: go test ./...",
				"ok  \tgithub.com/acme/api\t0.412s",
				"\x1b[31mFAIL\x1b[0m github.com/acme/api/users",
			},
			"frontend/5": {"session 5 of frontend", "> read_file: src/app.tsx"},
		},
		prompts: map[string][]Section{
			"backend/3": {
				{Number: 1, Title: "Identity", Body: "You are backend, one of 4 agents in the swarm.\nYour teammates: frontend, reviewer, docs."},
				{Number: 2, Title: "Agent Role", Body: "You own the HTTP API in ./api."},
				{Number: 12, Title: "Messages from teammates", Body: strings.Repeat("[URGENT] From operator (5s ago):\nstop: the migration is wrong\n\n", 12)},
			},
		},
	}
}

// harness drives a model as bubbletea would, but synchronously: every
// command runs at once and its message goes back into Update. Timers never
// fire on their own; the durations asked for are recorded.
type harness struct {
	t      *testing.T
	m      *Model
	src    *fakeSource
	now    time.Time
	sleeps []time.Duration
	quit   bool
	stops  int
}

func newHarness(t *testing.T, src *fakeSource, up bool) *harness {
	t.Helper()
	h := &harness{t: t, src: src, now: base}
	opts := Options{Title: "swarm up · /src/acme · pid 4242", Now: func() time.Time { return h.now }}
	if up {
		opts.Stop = func() { h.stops++ }
	} else {
		opts.Title = "swarm watch · /src/acme · pid 4242"
	}
	h.m = New(t.Context(), src, opts)
	h.m.sleep = func(ctx context.Context, d time.Duration) bool {
		h.sleeps = append(h.sleeps, d)
		return false
	}
	h.run(h.m.Init())
	h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	return h
}

func (h *harness) send(msgs ...tea.Msg) {
	for _, msg := range msgs {
		_, cmd := h.m.Update(msg)
		h.run(cmd)
	}
}

func (h *harness) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
	case tea.QuitMsg:
		h.quit = true
	default:
		h.send(msg)
	}
}

// transition sends a transition notice, after changing the fake store as
// the supervisor does before it notifies.
func (h *harness) transition(agent string, from, to lifecycle.State, cause string, seq int64) {
	h.src.mu.Lock()
	for i := range h.src.snap.Agents {
		if a := &h.src.snap.Agents[i]; a.Name == agent {
			a.State, a.Seq, a.StateSince = to, seq, h.now
		}
	}
	h.src.mu.Unlock()
	h.send(eventMsg{lifecycle.Notice{At: h.now, Agent: agent, Kind: "transition", From: from, To: to, Cause: cause, Seq: seq}})
}

func key(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

func (h *harness) keys(ks ...string) {
	for _, k := range ks {
		h.send(key(k))
	}
}

func (h *harness) typeText(s string) {
	for _, r := range s {
		h.send(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// screen is the view as text, colours stripped.
func (h *harness) screen() string { return ansi.Strip(h.m.View().Content) }

// row is the screen line that starts with an agent's name.
func (h *harness) row(agent string) string {
	for _, l := range strings.Split(h.screen(), "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "▸")); len(f) > 0 && f[0] == agent {
			return l
		}
	}
	h.t.Fatalf("no row for %s in\n%s", agent, h.screen())
	return ""
}

// hasFields reports whether a line of s holds want, whitespace aside.
func hasFields(s, want string) bool {
	want = strings.Join(strings.Fields(want), " ")
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.Join(strings.Fields(l), " "), want) {
			return true
		}
	}
	return false
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tui -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test ./tui -update rewrites it)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

func TestMainViewGolden(t *testing.T) {
	h := newHarness(t, newFake(), true)
	got := h.screen()
	if n := strings.Count(got, "\n") + 1; n != 30 {
		t.Fatalf("the view has %d lines, want 30", n)
	}
	for i, l := range strings.Split(got, "\n") {
		if w := ansi.StringWidth(l); w > 100 {
			t.Errorf("line %d is %d cells wide: %q", i, w, l)
		}
	}
	golden(t, "main", got)

	h2 := newHarness(t, newFake(), false)
	golden(t, "main_watch", h2.screen())
}

func TestStatesAreColouredByKind(t *testing.T) {
	h := newHarness(t, newFake(), true)
	raw := strings.Split(h.m.View().Content, "\n")
	want := map[string]string{
		"backend":  "\x1b[1;32m● Running",   // green
		"frontend": "\x1b[34m● Idle",        // blue
		"reviewer": "\x1b[33m● CoolingDown", // yellow
		"docs":     "\x1b[90m● Stopped",     // grey
	}
	for agent, sgr := range want {
		found := false
		for _, l := range raw {
			if strings.Contains(ansi.Strip(l), agent+" ") && strings.Contains(l, sgr) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s's state is not drawn as %q", agent, sgr)
		}
	}
	// The urgent mail is highlighted.
	for _, l := range raw {
		if strings.Contains(l, "[URGENT] stop: the migration") && !strings.HasPrefix(l, "\x1b[1;31m") {
			t.Errorf("urgent mail not highlighted: %q", l)
		}
	}
}

func TestSelectionMovesAndFollowsTheLog(t *testing.T) {
	src := newFake()
	h := newHarness(t, src, true)
	if !strings.Contains(h.row("backend"), "▸ backend") {
		t.Fatal("backend is not selected at first")
	}
	h.keys("j")
	if !strings.Contains(h.row("frontend"), "▸ frontend") || strings.Contains(h.row("backend"), "▸") {
		t.Fatalf("j did not select frontend:\n%s", h.screen())
	}
	if !strings.Contains(h.screen(), "Session log frontend · session 5") || !strings.Contains(h.screen(), "> read_file: src/app.tsx") {
		t.Fatalf("the tail does not follow the selection:\n%s", h.screen())
	}
	h.keys("down", "down", "down", "down") // past the end: stays on the last
	if !strings.Contains(h.row("docs"), "▸ docs") {
		t.Fatal("down did not stop at the last agent")
	}
	if !strings.Contains(h.screen(), "docs has not run a session yet") {
		t.Fatalf("docs' tail:\n%s", h.screen())
	}
	h.keys("k", "up", "up", "up", "up")
	if !strings.Contains(h.row("backend"), "▸ backend") {
		t.Fatal("up did not stop at the first agent")
	}
	if got := src.tailReads; !slices.Equal(got, []string{"backend/3", "frontend/5", "reviewer/2", "reviewer/2", "frontend/5", "backend/3"}) {
		t.Fatalf("tail reads = %v", got)
	}
	// The escape sequences of a log line are dropped, not drawn.
	if !strings.Contains(h.m.View().Content, "  FAIL github.com/acme/api/users") {
		t.Fatal("the log's escape sequences reached the screen")
	}
}

func TestEnterShowsThePromptSectionBySection(t *testing.T) {
	h := newHarness(t, newFake(), true)
	h.keys("enter")
	golden(t, "prompt", h.screen())
	h.keys("right")
	if !strings.Contains(h.screen(), "▸  2 Agent Role") || !strings.Contains(h.screen(), "You own the HTTP API") {
		t.Fatalf("right did not go to section 2:\n%s", h.screen())
	}
	h.keys("right", "right") // past the last: stays
	s := h.screen()
	if !strings.Contains(s, "section 3 of 3 · lines 1-") {
		t.Fatalf("section 3:\n%s", s)
	}
	h.keys("j", "j")
	if !strings.Contains(h.screen(), "section 3 of 3 · lines 3-") {
		t.Fatalf("j did not scroll:\n%s", h.screen())
	}
	h.keys("G")
	if !strings.Contains(h.screen(), "lines 10-35 of 35") {
		t.Fatalf("G did not scroll to the end:\n%s", h.screen())
	}
	h.keys("left")
	if !strings.Contains(h.screen(), "▸  2 Agent Role") {
		t.Fatal("left did not go back a section")
	}
	h.keys("esc")
	if !strings.Contains(h.screen(), "▸ backend") {
		t.Fatal("esc did not go back to the agents")
	}
	// An agent without sessions has no prompt to show.
	h.keys("G", "enter")
	if !strings.Contains(h.screen(), "docs has not run a session yet: no prompt is stored") {
		t.Fatalf("prompt of docs:\n%s", h.screen())
	}
	if h.quit || h.stops != 0 {
		t.Fatal("q in the prompt view must not stop anything")
	}
}

func TestMessageKeys(t *testing.T) {
	src := newFake()
	h := newHarness(t, src, true)
	h.keys("m")
	h.typeText("hello worlds")
	h.keys("backspace")
	golden(t, "input", h.screen())
	h.keys("enter")
	h.keys("j", "u")
	h.typeText("stop now")
	h.keys("enter")
	h.keys("m")
	h.typeText("never mind")
	h.keys("esc")
	h.keys("m", "enter") // empty: nothing sent
	h.keys("k", "i", "y")
	want := []string{"backend|hello world|false", "frontend|stop now|true", "backend|interrupted by operator|true"}
	if !slices.Equal(src.sent, want) {
		t.Fatalf("sent %q, want %q", src.sent, want)
	}
	s := h.screen()
	if !strings.Contains(s, `interrupting backend: urgent #13 "interrupted by operator"`) {
		t.Fatalf("no confirmation of the interrupt:\n%s", s)
	}
	// Mail sent from the view shows at once, before the supervisor's notice.
	if !hasFields(s, "#13 0s operator → backend queued [URGENT] interrupted by operator") || !hasFields(s, "#12 0s operator → frontend") {
		t.Fatalf("sent mail not in the mail pane:\n%s", s)
	}
	src.sendErr = errors.New("unknown recipient")
	h.keys("m")
	h.typeText("x")
	h.keys("enter")
	if !strings.Contains(h.screen(), "not sent: unknown recipient") {
		t.Fatalf("send error not shown:\n%s", h.screen())
	}
	if h.quit {
		t.Fatal("typing q into a message must not quit")
	}
}

func TestPauseKeyToggles(t *testing.T) {
	src := newFake()
	h := newHarness(t, src, true)
	h.keys("p")
	if !strings.Contains(h.row("backend"), "Running (pausing)") || !strings.Contains(h.screen(), "pausing backend once its running session ends") {
		t.Fatalf("p on a running agent:\n%s", h.screen())
	}
	h.keys("p") // changed our mind before the session ended
	if strings.Contains(h.row("backend"), "pausing") {
		t.Fatal("p again did not cancel the pause")
	}
	h.keys("p")
	h.transition("backend", "Running", "SessionComplete", "", 3)
	h.transition("backend", "SessionComplete", "Paused", "paused by operator", 3)
	if r := h.row("backend"); !strings.Contains(r, "● Paused") || strings.Contains(r, "pausing") || !strings.Contains(r, "⚡ paused") {
		t.Fatalf("after the Paused transition: %q", r)
	}
	h.keys("p")
	if want := []string{"pause backend", "resume backend", "pause backend", "resume backend"}; !slices.Equal(src.pauses, want) {
		t.Fatalf("pauses = %v, want %v", src.pauses, want)
	}
}

func TestQuitStopsTheSwarmUnderUp(t *testing.T) {
	h := newHarness(t, newFake(), true)
	h.keys("q")
	if h.quit || h.stops != 0 || !strings.Contains(h.screen(), "stop the swarm? [y/N]") {
		t.Fatalf("q did not ask first: quit=%v stops=%d\n%s", h.quit, h.stops, h.screen())
	}
	h.keys("y")
	if h.quit || h.stops != 1 {
		t.Fatalf("first q: quit=%v stops=%d; want the swarm stopped and the view kept", h.quit, h.stops)
	}
	if !strings.Contains(h.screen(), "· stopping") || !strings.Contains(h.screen(), "stopping gracefully") {
		t.Fatalf("no sign of stopping:\n%s", h.screen())
	}
	// The agents stop; the stream ends; the view goes.
	h.transition("backend", "Running", "Stopped", "shutdown", 3)
	if h.quit {
		t.Fatal("quit before the stream ended")
	}
	h.send(endMsg{err: io.EOF})
	if !h.quit || !errors.Is(h.m.ended, io.EOF) {
		t.Fatalf("end of stream: quit=%v ended=%v", h.quit, h.m.ended)
	}

	// A second q (or ctrl+c) leaves at once.
	h2 := newHarness(t, newFake(), true)
	h2.keys("ctrl+c", "q")
	if !h2.quit || h2.stops != 1 {
		t.Fatalf("q twice: quit=%v stops=%d", h2.quit, h2.stops)
	}
}

// q and i ask first; any answer but y leaves the swarm as it was.
func TestQuitAndInterruptAskFirst(t *testing.T) {
	src := newFake()
	h := newHarness(t, src, true)
	for _, no := range []string{"n", "esc", "enter", "q"} {
		h.keys("q", no)
		if h.quit || h.stops != 0 || !strings.Contains(h.screen(), "not stopped: the swarm keeps running") {
			t.Fatalf("q then %s: quit=%v stops=%d\n%s", no, h.quit, h.stops, h.screen())
		}
	}
	h.keys("i")
	if !strings.Contains(h.screen(), `interrupt backend (urgent mail "interrupted by operator")? [y/N]`) {
		t.Fatalf("i did not ask:\n%s", h.screen())
	}
	h.keys("N")
	if len(src.sent) != 0 || !strings.Contains(h.screen(), "nothing sent: backend was not interrupted") {
		t.Fatalf("i then N sent %v:\n%s", src.sent, h.screen())
	}
	// The question takes the next key whatever it is: j answers no and
	// does not move the selection.
	h.keys("i", "j")
	if len(src.sent) != 0 || !strings.Contains(h.row("backend"), "▸") {
		t.Fatalf("i then j: sent %v\n%s", src.sent, h.screen())
	}
	h.keys("j", "i", "Y")
	if want := []string{"frontend|interrupted by operator|true"}; !slices.Equal(src.sent, want) {
		t.Fatalf("sent %v, want %v", src.sent, want)
	}
	// Ctrl-C needs no answer: it stops at once, even with a question up.
	h.keys("q", "ctrl+c")
	if h.stops != 1 {
		t.Fatalf("ctrl+c at the question: stops=%d", h.stops)
	}
}

func TestQuitLeavesWatch(t *testing.T) {
	h := newHarness(t, newFake(), false)
	h.keys("q")
	if !h.quit || h.stops != 0 {
		t.Fatalf("q under watch: quit=%v stops=%d", h.quit, h.stops)
	}
}

func TestHelp(t *testing.T) {
	h := newHarness(t, newFake(), true)
	h.keys("?")
	golden(t, "help", h.screen())
	h.keys("q") // any key goes back, q too
	if h.quit || h.stops != 0 || !strings.Contains(h.screen(), "▸ backend") {
		t.Fatalf("leaving help: quit=%v stops=%d\n%s", h.quit, h.stops, h.screen())
	}
}

func TestNoticesShowAtOnce(t *testing.T) {
	src := newFake()
	h := newHarness(t, src, true)
	urgent := message.Message{ID: 5, From: "operator", To: "backend", Urgency: message.Urgent, Body: "x", State: message.Queued, CreatedAt: base}
	h.send(eventMsg{lifecycle.Notice{At: base, Agent: "backend", Kind: "message", Message: &urgent}})
	h.transition("backend", "Running", "Interrupting", "urgent mail #5 from operator", 3)
	r := h.row("backend")
	if !strings.Contains(r, "● Interrupting") || !strings.Contains(r, "0s") || !strings.Contains(r, "⚡ interrupted: urgent mail #5 from") {
		t.Fatalf("backend after the interrupt: %q", r)
	}
	if !hasFields(h.screen(), "Mail (latest 5) · 2 urgent queued") || !hasFields(h.screen(), "#5 0s operator → backend queued [URGENT] x") {
		t.Fatalf("the urgent mail is not on top of the mail pane:\n%s", h.screen())
	}
	// The next session's tool calls do not hide the interrupt at once...
	h.transition("backend", "Interrupting", "BuildingPrompt", "", 3)
	h.transition("backend", "Spawning", "Running", "", 4)
	h.send(eventMsg{lifecycle.Notice{At: base, Agent: "backend", Kind: "activity", Text: "bash: sleep 30", Seq: 4}})
	if r := h.row("backend"); !strings.Contains(r, "⚡ interrupted") || !strings.Contains(r, "#4") {
		t.Fatalf("the interrupt vanished at once: %q", r)
	}
	// ...but after a while the row shows the activity again.
	h.now = base.Add(noteFor)
	h.send(tickMsg{gen: h.m.tickGen})
	if r := h.row("backend"); !strings.Contains(r, "bash: sleep 30") || strings.Contains(r, "⚡") {
		t.Fatalf("after %s: %q", noteFor, r)
	}
}

func TestNoticesCoalesceSnapshotReads(t *testing.T) {
	src := newFake()
	h := newHarness(t, src, true)
	before := src.snapshots
	// Three notices arrive before the first re-read answers.
	var cmds []tea.Cmd
	for _, to := range []lifecycle.State{lifecycle.SessionComplete, lifecycle.Idle, lifecycle.BuildingPrompt} {
		_, cmd := h.m.Update(eventMsg{lifecycle.Notice{At: base, Agent: "frontend", Kind: "transition", To: to, Seq: 5}})
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		h.run(c)
	}
	if got := src.snapshots - before; got != 2 {
		t.Fatalf("%d snapshot reads for 3 quick notices, want 2 (one, then one for the rest)", got)
	}
}

func TestTimersOnlyForWhatChanges(t *testing.T) {
	// A running agent selected: its log is re-read every second.
	h := newHarness(t, newFake(), true)
	if got := h.sleeps[len(h.sleeps)-1]; got != time.Second {
		t.Fatalf("timer with backend running = %v, want 1s", got)
	}

	// Everyone idle for 90 minutes, old mail: the next label change is the
	// "1h" of the idle agents, 30 minutes away.
	src := newFake()
	for i := range src.snap.Agents {
		src.snap.Agents[i].State, src.snap.Agents[i].StateSince = "Idle", base.Add(-90*time.Minute)
	}
	src.snap.Mail = src.snap.Mail[:1]
	src.snap.Mail[0].CreatedAt = base.Add(-50 * time.Hour)
	h = newHarness(t, src, true)
	if got := h.sleeps[len(h.sleeps)-1]; got != 30*time.Minute {
		t.Fatalf("timer with everyone idle = %v, want 30m", got)
	}
	n := len(h.sleeps)
	h.keys("j", "k") // redraws, but the armed timer still holds
	if len(h.sleeps) != n {
		t.Fatalf("keys armed new timers: %v", h.sleeps[n:])
	}

	// Everything stopped and no mail: nothing changes by itself, so no
	// timer at all.
	src = newFake()
	for i := range src.snap.Agents {
		src.snap.Agents[i].State = "Stopped"
	}
	src.snap.Mail = nil
	h = newHarness(t, src, true)
	if len(h.sleeps) != 0 {
		t.Fatalf("timers with nothing to change: %v", h.sleeps)
	}
}

func TestAgeLabels(t *testing.T) {
	for _, c := range []struct {
		d     time.Duration
		label string
		next  time.Duration
	}{
		{0, "0s", time.Second},
		{1500 * time.Millisecond, "1s", 500 * time.Millisecond},
		{59 * time.Second, "59s", time.Second},
		{61 * time.Second, "1m", 59 * time.Second},
		{90 * time.Minute, "1h", 30 * time.Minute},
		{49 * time.Hour, "2d", 23 * time.Hour},
	} {
		if got := text.Age(c.d); got != c.label {
			t.Errorf("text.Age(%v) = %q, want %q", c.d, got, c.label)
		}
		if got := untilAgeChanges(c.d); got != c.next {
			t.Errorf("untilAgeChanges(%v) = %v, want %v", c.d, got, c.next)
		}
		if text.Age(c.d) == text.Age(c.d+untilAgeChanges(c.d)) {
			t.Errorf("the label of %v does not change after untilAgeChanges", c.d)
		}
	}
}

func TestTinyTerminal(t *testing.T) {
	h := newHarness(t, newFake(), true)
	h.send(tea.WindowSizeMsg{Width: 30, Height: 8})
	if s := h.screen(); !strings.HasPrefix(s, "swarm: the terminal is too") || strings.Contains(s, "backend") {
		t.Fatalf("tiny terminal:\n%q", s)
	}
}

// TestRunEndsWithTheStream runs the real program loop on a pipe: Run
// returns ErrSourceEnded when the stream ends, after its goroutines.
func TestRunEndsWithTheStream(t *testing.T) {
	src := newFake()
	src.events = make(chan lifecycle.Notice, 1)
	src.events <- lifecycle.Notice{At: base, Agent: "backend", Kind: "activity", Text: "bash: ls"}
	close(src.events)
	in, w := io.Pipe()
	defer w.Close()
	err := Run(t.Context(), src, Options{Input: in, Output: io.Discard, Now: func() time.Time { return base }})
	if !errors.Is(err, ErrSourceEnded) {
		t.Fatalf("Run = %v, want ErrSourceEnded", err)
	}
}

// TestRunEndsWithItsContext: cancelling Run's context leaves the view.
func TestRunEndsWithItsContext(t *testing.T) {
	src := newFake()
	src.events = make(chan lifecycle.Notice)
	in, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, src, Options{Input: in, Output: io.Discard}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestEscalationsAboveTheAgents: open escalations show above the agents,
// e selects, and a, r and x act on the selected one after a y.
func TestEscalationsAboveTheAgents(t *testing.T) {
	src := newFake()
	backend := "backend"
	src.snap.Escalations = []escalation.Escalation{
		{ID: 7, Kind: escalation.KindBranchViolation, Severity: escalation.Critical, State: escalation.Open, Hold: true, Agent: &backend,
			Summary: "session 3 of backend broke the base-branch guard", CreatedAt: base.Add(-2 * time.Minute)},
		{ID: 5, Kind: escalation.KindAgent, Severity: escalation.Warning, State: escalation.Acked,
			Summary: "need a decision on the schema\nmore", CreatedAt: base.Add(-time.Hour)},
	}
	h := newHarness(t, src, true)
	scr := h.screen()
	for _, want := range []string{
		"Escalations (2) · e next · a ack · r resume · x abort",
		"▸ #7 critical branch_violation backend (held) 2m: session 3 of backend broke the base-branch guard",
		"#5 warning agent acked 1h: need a decision on the schema …",
	} {
		if !hasFields(scr, want) {
			t.Errorf("no %q in\n%s", want, scr)
		}
	}
	if n := strings.Count(scr, "\n") + 1; n != 30 {
		t.Fatalf("the view has %d lines, want 30", n)
	}
	// A question first; anything but y cancels.
	h.keys("r")
	if !strings.Contains(h.screen(), "resume escalation 7 (session 3 of backend broke the base-branch guard)? [y/N]") {
		t.Fatalf("no question:\n%s", h.screen())
	}
	h.keys("n")
	if len(src.decided) != 0 || !strings.Contains(h.screen(), "cancelled: nothing was decided") {
		t.Fatalf("decided %v after n", src.decided)
	}
	h.keys("e", "a", "y")
	if strings.Join(src.decided, ",") != "ack 5" {
		t.Fatalf("decided %v", src.decided)
	}
	h.keys("e", "x", "y")
	if strings.Join(src.decided, ",") != "ack 5,abort 7" || !strings.Contains(h.screen(), "escalation 7 resolved: abort") {
		t.Fatalf("decided %v\n%s", src.decided, h.screen())
	}
	if strings.Contains(h.screen(), "#7 critical") {
		t.Fatalf("the resolved escalation is still shown:\n%s", h.screen())
	}
	// A Held transition stays in the agent's row.
	h.transition("backend", lifecycle.Running, lifecycle.Held, "held: escalation 9", 3)
	if !strings.Contains(h.row("backend"), "held: escalation 9") {
		t.Fatalf("row = %q", h.row("backend"))
	}
	// The footer counts it as held, not as paused.
	if scr := h.screen(); !strings.Contains(scr, "1 held") || strings.Contains(scr, "paused") {
		t.Fatalf("the footer does not count backend as held:\n%s", scr)
	}
}

// An agent that is not running shows its last report in the LAST column;
// a running one shows what it is doing.
func TestLastReportInTheAgentsTable(t *testing.T) {
	src := newFake()
	src.snap.Agents[0].Report = "progress T-2: still going"
	src.snap.Agents[1].Report = "complete T-1: login page done\nwith tests\x1b[31m"
	h := newHarness(t, src, true)
	scr := h.screen()
	if !hasFields(scr, "frontend ● Idle #5 4m - - report complete T-1: login page done …") {
		t.Errorf("no report for the idle frontend in\n%s", scr)
	}
	if strings.Contains(scr, "still going") || !strings.Contains(scr, "bash: go test ./...") {
		t.Errorf("the running backend should show its activity:\n%s", scr)
	}
}

// Live work items show above the agents (DESIGN §9.3), made safe.
func TestWorkflowsAboveTheAgents(t *testing.T) {
	src := newFake()
	src.snap.Workflows = []string{
		"workflow qa (dev-qa): QA, next tester",
		"  qa F-1: QA, tester's turn · login page\x1b[2J",
		"  review T-42: in_review, critic's turn, 2 rejection(s) · Add --dry-run",
	}
	h := newHarness(t, src, true)
	scr := h.screen()
	for _, want := range []string{
		"Workflows (3 lines) · swarm workflow status",
		"workflow qa (dev-qa): QA, next tester",
		"qa F-1: QA, tester's turn · login page",
		"review T-42: in_review, critic's turn, 2 rejection(s) · Add --dry-run",
	} {
		if !hasFields(scr, want) {
			t.Errorf("no %q in\n%s", want, scr)
		}
	}
	if strings.Contains(scr, "\x1b[2J") {
		t.Errorf("an escape sequence reached the screen")
	}
	if n := strings.Count(scr, "\n") + 1; n != 30 {
		t.Fatalf("the view has %d lines, want 30", n)
	}
}

// The merge queue's live candidates show above the agents (DESIGN §14),
// made safe, with the checkout's behind line.
func TestMergeQueueAboveTheAgents(t *testing.T) {
	src := newFake()
	src.snap.Merges = []string{
		"#3 alpha 1a2b3c4d testing (swarm land by operator)",
		"#4 bravo 5e6f7a8b queued (item T-1)\x1b[2J",
		"checkout behind main by 2: git switch main (your uncommitted changes come along)",
	}
	h := newHarness(t, src, true)
	scr := h.screen()
	for _, want := range []string{
		"Merge queue (3 lines) · swarm merges",
		"#3 alpha 1a2b3c4d testing (swarm land by operator)",
		"#4 bravo 5e6f7a8b queued (item T-1)",
		"checkout behind main by 2: git switch main",
	} {
		if !hasFields(scr, want) {
			t.Errorf("no %q in\n%s", want, scr)
		}
	}
	if strings.Contains(scr, "\x1b[2J") {
		t.Errorf("an escape sequence reached the screen")
	}
	if n := strings.Count(scr, "\n") + 1; n != 30 {
		t.Fatalf("the view has %d lines, want 30", n)
	}
}
