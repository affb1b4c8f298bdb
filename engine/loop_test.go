package engine

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mode"
)

func TestLoopFinalAnswer(t *testing.T) {
	wt := gitWorktree(t, "alice")
	var log bytes.Buffer
	s := newSession(wt, &log)
	m := &fakeModel{reply: sequence(textTurn("All done."))}
	l := &Loop{EngineName: "fake", Model: m}
	if l.Name() != "fake" {
		t.Errorf("Name = %q", l.Name())
	}
	res := l.Run(context.Background(), s)
	if res.Outcome != Success || res.Err != nil || res.Turns != 1 {
		t.Fatalf("result = %+v, want success after 1 turn", res)
	}
	if res.Usage != (Usage{InputTokens: 10, OutputTokens: 3}) {
		t.Errorf("usage = %+v", res.Usage)
	}
	req := m.reqs[0]
	if req.System != "You are alice." || req.Model != "fake-model" || req.Session != s {
		t.Errorf("request = system %q model %q", req.System, req.Model)
	}
	if len(req.Turns) != 1 || req.Turns[0].Role != RoleUser || req.Turns[0].Parts[0].Text != StartText {
		t.Errorf("first turns = %+v, want one user turn with StartText", req.Turns)
	}
	if got := specNames(req.Tools); !slices.Equal(got, mode.Code.Tools(false)) {
		t.Errorf("tools offered = %v, want %v", got, mode.Code.Tools(false))
	}
	for _, want := range []string{"=== session 1 of alice · engine fake · mode code", "All done.", "=== end: success · 1 turns · tokens 10 in, 3 out"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

func TestLoopToolRoundTrip(t *testing.T) {
	wt := gitWorktree(t, "alice")
	var log bytes.Buffer
	s := newSession(wt, &log)
	var activity []string
	s.OnActivity = func(a string) { activity = append(activity, a) }
	m := &fakeModel{reply: sequence(
		callTurn(call("write_file", map[string]any{"path": "notes/plan.md", "content": "step <one> && two\n"})),
		callTurn(call("read_file", map[string]any{"path": "notes/plan.md"}), call("bash", map[string]any{"command": "cat notes/plan.md | wc -l"})),
		textTurn("Wrote the plan."),
	)}
	res := (&Loop{EngineName: "fake", Model: m}).Run(context.Background(), s)
	if res.Outcome != Success || res.Turns != 3 {
		t.Fatalf("result = %+v", res)
	}
	if res.Usage != (Usage{InputTokens: 30, OutputTokens: 7}) {
		t.Errorf("usage = %+v, want the sum of three turns", res.Usage)
	}
	if got := readFile(t, filepath.Join(wt, "notes", "plan.md")); got != "step <one> && two\n" {
		t.Errorf("file = %q", got)
	}
	r2 := resultsOf(t, m, 2)
	if len(r2) != 1 || r2[0].Name != "write_file" || r2[0].CallID != "c1" || r2[0].Error != "" {
		t.Errorf("results after turn 1 = %+v", r2)
	}
	r3 := resultsOf(t, m, 3)
	if len(r3) != 2 || r3[0].Output != "step <one> && two\n" || r3[1].Name != "bash" || !strings.Contains(r3[1].Output, "1\n[exit status 0]") {
		t.Errorf("results after turn 2 = %+v", r3)
	}
	if want := []string{"model: thinking", "write_file: notes/plan.md", "model: thinking", "read_file: notes/plan.md", "bash: cat notes/plan.md | wc -l", "model: thinking"}; !slices.Equal(activity, want) {
		t.Errorf("activity = %q\nwant %q", activity, want)
	}
	// The log shows the call's arguments as the model wrote them, not
	// HTML-escaped (\u003c, \u0026).
	for _, want := range []string{`→ write_file {"content":"step <one> && two\n","path":"notes/plan.md"}`, "← bash", "[exit status 0]"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

func TestLoopMaxTurns(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.MaxTurns = 3
	m := &fakeModel{reply: func(int, Request) (Response, error) {
		return callTurn(call("list_files", nil)), nil
	}}
	res := (&Loop{Model: m}).Run(context.Background(), s)
	if res.Outcome != Failed || !errors.Is(res.Err, ErrMaxTurns) || res.Turns != 3 || len(m.reqs) != 3 {
		t.Fatalf("result = %+v after %d requests, want Failed with ErrMaxTurns after 3", res, len(m.reqs))
	}
}

func TestLoopDefaultMaxTurns(t *testing.T) {
	wt := gitWorktree(t, "alice")
	m := &fakeModel{reply: func(int, Request) (Response, error) {
		return callTurn(call("list_files", nil)), nil
	}}
	res := (&Loop{Model: m}).Run(context.Background(), newSession(wt, nil))
	if res.Outcome != Failed || res.Turns != DefaultMaxTurns {
		t.Fatalf("result = %+v, want Failed after %d turns", res, DefaultMaxTurns)
	}
}

// blockingModel waits for the context like a slow model request.
type blockingModel struct{ started chan struct{} }

func (m *blockingModel) Generate(ctx context.Context, _ Request) (Response, error) {
	if m.started != nil {
		close(m.started)
	}
	<-ctx.Done()
	return Response{Usage: Usage{InputTokens: 5}}, context.Cause(ctx)
}

func TestLoopTimeout(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.Timeout = time.Millisecond
	res := (&Loop{Model: &blockingModel{}}).Run(context.Background(), s)
	if res.Outcome != Timeout || !errors.Is(res.Err, ErrSessionTimeout) || !errors.Is(res.Err, context.DeadlineExceeded) || res.Cause != nil {
		t.Fatalf("result = %+v, want Timeout with ErrSessionTimeout", res)
	}
	if res.Usage.InputTokens != 5 {
		t.Errorf("usage of the cut-off request lost: %+v", res.Usage)
	}
}

var errUrgent = errors.New("urgent mail")

func TestLoopCancelDuringModel(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.Timeout = time.Hour // a timeout must not turn a cancel into a Timeout
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	m := &blockingModel{started: make(chan struct{})}
	done := make(chan Result)
	go func() { done <- (&Loop{Model: m}).Run(ctx, s) }()
	<-m.started
	cancel(errUrgent)
	res := <-done
	if res.Outcome != Cancelled || !errors.Is(res.Cause, errUrgent) || res.Err != nil {
		t.Fatalf("result = %+v, want Cancelled with the urgent cause", res)
	}
}

func TestLoopCancelKillsBash(t *testing.T) {
	wt := gitWorktree(t, "alice")
	var log bytes.Buffer
	s := newSession(wt, &log)
	pgids := make(chan int, 1)
	s.OnProcess = func(pgid int) { pgids <- pgid }
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// A background grandchild holding the output pipe, and a foreground
	// one: both must be gone when Run returns.
	m := &fakeModel{reply: sequence(callTurn(call("bash", map[string]any{"command": "sleep 60 & sleep 60; wait"})))}
	done := make(chan Result)
	go func() { done <- (&Loop{Model: m}).Run(ctx, s) }()
	pgid := <-pgids
	cancel(errUrgent)
	res := <-done
	if res.Outcome != Cancelled || !errors.Is(res.Cause, errUrgent) {
		t.Fatalf("result = %+v, want Cancelled with the urgent cause", res)
	}
	if errors.Is(res.Cause, context.Canceled) {
		t.Errorf("cause %v is context.Canceled; the urgent cause was lost", res.Cause)
	}
	if len(m.reqs) != 1 {
		t.Errorf("model asked %d times after the cancel", len(m.reqs))
	}
	if !groupGone(pgid) {
		t.Errorf("process group %d still has live processes", pgid)
	}
	if !strings.Contains(log.String(), "end: cancelled") || !strings.Contains(log.String(), "cause: urgent mail") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestLoopModelError(t *testing.T) {
	wt := gitWorktree(t, "alice")
	boom := errors.New("503 from the API")
	m := &fakeModel{reply: func(int, Request) (Response, error) { return Response{}, boom }}
	res := (&Loop{Model: m}).Run(context.Background(), newSession(wt, nil))
	if res.Outcome != Failed || !errors.Is(res.Err, boom) {
		t.Fatalf("result = %+v", res)
	}
}

func TestLoopRefusesBadSession(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.Mode = ""
	res := (&Loop{Model: &fakeModel{reply: sequence()}}).Run(context.Background(), s)
	if res.Outcome != Failed || !strings.Contains(res.Err.Error(), "mode") {
		t.Errorf("no mode: %+v", res)
	}
	s = newSession(filepath.Join(wt, "missing"), nil)
	res = (&Loop{Model: &fakeModel{reply: sequence()}}).Run(context.Background(), s)
	if res.Outcome != Failed || !strings.Contains(res.Err.Error(), "worktree") {
		t.Errorf("missing worktree: %+v", res)
	}
	res = (&Loop{}).Run(context.Background(), newSession(wt, nil))
	if res.Outcome != Failed {
		t.Errorf("no model: %+v", res)
	}
}

func TestLoopInterject(t *testing.T) {
	wt := gitWorktree(t, "alice")
	var log bytes.Buffer
	s := newSession(wt, &log)
	calls := 0
	s.Interject = func(context.Context) []string {
		calls++
		if calls == 1 {
			return []string{"[URGENT] From operator: also update the docs"}
		}
		return nil
	}
	m := &fakeModel{reply: sequence(
		callTurn(call("bash", map[string]any{"command": "echo working"})),
		callTurn(call("list_files", nil)),
	)}
	res := (&Loop{Model: m}).Run(context.Background(), s)
	if res.Outcome != Success || res.Turns != 3 {
		t.Fatalf("result = %+v", res)
	}
	// Request 2: start, model, results, interjection.
	turns := m.reqs[1].Turns
	if len(turns) != 4 {
		t.Fatalf("request 2 has %d turns, want 4: %+v", len(turns), turns)
	}
	last := turns[3]
	if last.Role != RoleUser || len(last.Parts) != 1 || last.Parts[0].Text != "[URGENT] From operator: also update the docs" {
		t.Errorf("last turn = %+v, want the urgent text as a user turn", last)
	}
	if turns[2].Parts[0].Result == nil {
		t.Errorf("turn 3 = %+v, want the tool results", turns[2])
	}
	// Nothing more was interjected, so request 3 ends with the results.
	if n := len(m.reqs[2].Turns); n != 6 || m.reqs[2].Turns[5].Parts[0].Result == nil {
		t.Errorf("request 3 turns = %+v", m.reqs[2].Turns)
	}
	if calls != 2 {
		t.Errorf("Interject called %d times, want once per tool boundary (2)", calls)
	}
	if !strings.Contains(log.String(), "[interjected at the tool boundary]\n  [URGENT] From operator: also update the docs") {
		t.Errorf("log lacks the interjection:\n%s", log.String())
	}
}

func TestModeGating(t *testing.T) {
	wt := gitWorktree(t, "alice")
	for _, tc := range []struct {
		mode  mode.Mode
		tasks bool
		want  []string
	}{
		{mode.Review, true, []string{"read_file", "list_files", "grep", "send_message", "send_protocol", "ack", "escalate", "swarm"}},
		{mode.Delegate, false, []string{"read_file", "list_files", "grep", "send_message", "send_protocol", "ack", "escalate", "swarm"}},
		{mode.Delegate, true, []string{"read_file", "list_files", "grep", "send_message", "send_protocol", "ack", "escalate", "swarm", "bd_claim", "bd_close", "bd_show"}},
		{mode.Code, false, []string{"bash", "read_file", "write_file", "edit_file", "list_files", "grep", "send_message", "send_protocol", "ack", "escalate", "swarm"}},
		{mode.Code, true, mode.AllTools},
	} {
		s := newSession(wt, nil)
		s.Mode = tc.mode
		if tc.tasks {
			s.Tasks = &fakeBoard{}
		}
		m := &fakeModel{reply: sequence(
			callTurn(call("write_file", map[string]any{"path": "x.txt", "content": "x"}), call("bash", map[string]any{"command": "touch y.txt"})),
		)}
		res := (&Loop{Model: m}).Run(context.Background(), s)
		if res.Outcome != Success {
			t.Fatalf("%s: result %+v", tc.mode, res)
		}
		if got := specNames(m.reqs[0].Tools); !slices.Equal(got, tc.want) {
			t.Errorf("%s (tasks %v): offered %v, want %v", tc.mode, tc.tasks, got, tc.want)
		}
		if tc.mode == mode.Code {
			continue
		}
		for _, r := range resultsOf(t, m, 2) {
			if !strings.Contains(r.Error, "not allowed in "+string(tc.mode)+" mode") {
				t.Errorf("%s: %s result %+v, want a refusal", tc.mode, r.Name, r)
			}
		}
		for _, f := range []string{"x.txt", "y.txt"} {
			if fileExists(filepath.Join(wt, f)) {
				t.Errorf("%s: %s was created", tc.mode, f)
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil) // code mode, no task board
	if r := runTool(t, s, "bd_claim", map[string]any{"id": "bd-1"}); !strings.Contains(r.Error, "bd (beads) is not installed") {
		t.Errorf("bd_claim without bd: %+v", r)
	}
	if r := runTool(t, s, "rm_rf", nil); !strings.Contains(r.Error, `unknown tool "rm_rf"`) || !strings.Contains(r.Error, "Available tools: bash,") {
		t.Errorf("unknown tool: %+v", r)
	}
	if r := runTool(t, s, "read_file", map[string]any{"path": "README.md", "lines": 3}); !strings.Contains(r.Error, `unknown argument(s) "lines"`) {
		t.Errorf("unknown argument: %+v", r)
	}
	if r := runTool(t, s, "read_file", map[string]any{}); !strings.Contains(r.Error, `missing required argument "path"`) {
		t.Errorf("missing argument: %+v", r)
	}
}

func TestLoopReportsUsagePerTurn(t *testing.T) {
	wt := gitWorktree(t, "alice")
	var log bytes.Buffer
	s := newSession(wt, &log)
	var steps []Usage
	s.OnUsage = func(u Usage) { steps = append(steps, u) }
	m := &fakeModel{reply: sequence(callTurn(call("list_files", map[string]any{})), textTurn("All done."))}
	res := (&Loop{EngineName: "fake", Model: m}).Run(context.Background(), s)
	if res.Outcome != Success {
		t.Fatalf("result = %+v", res)
	}
	want := []Usage{{InputTokens: 10, OutputTokens: 2}, {InputTokens: 10, OutputTokens: 3}}
	if !slices.Equal(steps, want) || res.Usage != want[0].Add(want[1]) {
		t.Fatalf("OnUsage got %+v, result %+v; want %+v", steps, res.Usage, want)
	}
}
