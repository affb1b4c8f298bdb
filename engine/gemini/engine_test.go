package gemini_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/gittest"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/engine/gemini"
	"github.com/swarmhq/swarm/engine/gemini/geminitest"
	"github.com/swarmhq/swarm/mode"
)

const testKey = "test-key-93c1d7e4"

// gitWorktree makes a repository with one commit and a linked worktree on
// swarm/<agent>, the way sessions run, and returns the worktree.
func gitWorktree(t *testing.T, agent string) string {
	t.Helper()
	_, wt := gittest.Worktree(t, agent, nil)
	return wt
}

type sent struct {
	to, body string
	urgent   bool
}

// messenger records what the agent sends.
type messenger struct {
	mu   sync.Mutex
	sent []sent
}

func (m *messenger) Send(_ context.Context, to, body string, urgent bool, _ int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, sent{to, body, urgent})
	return int64(len(m.sent)), nil
}

func newSession(t *testing.T, log *bytes.Buffer) (*engine.Session, *messenger) {
	wt := gitWorktree(t, "alice")
	msgr := &messenger{}
	s := &engine.Session{
		Agent: "alice", ID: "alice-1", Seq: 1, Root: filepath.Dir(filepath.Dir(filepath.Dir(wt))),
		DB: "/nonexistent/swarm.db", Agents: []string{"alice", "bob"}, Worktree: wt, Branch: "swarm/alice",
		Prompt: "You are alice.", Mode: mode.Code, Model: "gemini-2.5-flash", Messenger: msgr,
	}
	if log != nil { // not a typed nil in the interface
		s.Log = log
	}
	// The supervisor's environment carries the key; tools must not see it.
	s.Env = engine.SessionEnv(append(os.Environ(), "GEMINI_API_KEY="+testKey), s)
	return s, msgr
}

func newEngine(t *testing.T, srv *geminitest.Server) *gemini.Engine {
	t.Helper()
	getenv := func(k string) string {
		switch k {
		case gemini.EnvGeminiKey:
			return testKey
		case gemini.EnvBaseURL:
			return srv.URL
		}
		return ""
	}
	e := gemini.NewEngine("gemini", gemini.Options{Getenv: getenv,
		Retry:  &gemini.Retry{Attempts: 2, InitialDelay: time.Millisecond},
		Logger: slog.New(slog.DiscardHandler)})
	if err := e.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestThreeTurnSession: write a file, send a message, answer. Real
// worktree, real tools, the fake API on the wire.
func TestThreeTurnSession(t *testing.T) {
	srv := geminitest.New(t,
		geminitest.Call("write_file", map[string]any{"path": "docs/notes.md", "content": "# Notes\n"}),
		geminitest.Call("send_message", map[string]any{"to": "bob", "body": "notes are in docs/notes.md"}),
		geminitest.Text("Wrote the notes and told bob."),
	)
	var log bytes.Buffer
	s, msgr := newSession(t, &log)
	res := newEngine(t, srv).Run(context.Background(), s)
	if res.Outcome != engine.Success || res.Turns != 3 {
		t.Fatalf("result = %+v\nlog:\n%s", res, log.String())
	}
	if want := (engine.Usage{InputTokens: 30, OutputTokens: 15}); res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	got, err := os.ReadFile(filepath.Join(s.Worktree, "docs", "notes.md"))
	if err != nil || string(got) != "# Notes\n" {
		t.Errorf("docs/notes.md = %q, %v", got, err)
	}
	if want := []sent{{"bob", "notes are in docs/notes.md", false}}; !slices.Equal(msgr.sent, want) {
		t.Errorf("sent = %+v, want %+v", msgr.sent, want)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("requests = %d, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.Model != "gemini-2.5-flash" || r.System() != "You are alice." || r.APIKey != testKey {
			t.Errorf("request %d: model %q system %q key sent %v", i+1, r.Model, r.System(), r.APIKey == testKey)
		}
		if len(r.Tools) != 1 || len(r.Tools[0].FunctionDeclarations) == 0 {
			t.Errorf("request %d offers no tools", i+1)
		}
	}
	// Each request after a call answers it with a functionResponse, and
	// the conversation alternates user/model.
	for i, name := range []string{"write_file", "send_message"} {
		r := reqs[i+1]
		fr := r.FunctionResponses()
		if len(fr) != i+1 || fr[i].Name != name || fr[i].Response["error"] != nil {
			t.Errorf("request %d functionResponses = %+v, want %s answered", i+2, fr, name)
		}
		var roles []string
		for _, c := range r.Contents {
			roles = append(roles, c.Role)
		}
		want := []string{"user"}
		for range i + 1 {
			want = append(want, "model", "user")
		}
		if !slices.Equal(roles, want) {
			t.Errorf("request %d roles = %v, want %v", i+2, roles, want)
		}
	}
	if strings.Contains(log.String(), testKey) {
		t.Error("the session log contains the API key")
	}
}

// TestInterjectAtToolBoundary (issue 7): with interrupt = "boundary" the
// supervisor's urgent mail joins the conversation after the tool call, and
// the next request carries it as user text.
func TestInterjectAtToolBoundary(t *testing.T) {
	const urgent = "[URGENT] From lead: also update the docs"
	srv := geminitest.New(t,
		geminitest.Call("bash", map[string]any{"command": "echo working"}),
		geminitest.Text("ok, docs too"),
	)
	s, _ := newSession(t, nil)
	var calls int
	s.Interject = func(context.Context) []string {
		calls++
		if calls == 1 {
			return []string{urgent}
		}
		return nil
	}
	res := newEngine(t, srv).Run(context.Background(), s)
	if res.Outcome != engine.Success {
		t.Fatalf("result = %+v", res)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	if slices.Contains(reqs[0].Texts(), urgent) {
		t.Error("the urgent text was in the first request, before the tool boundary")
	}
	if !slices.Contains(reqs[1].Texts(), urgent) {
		t.Fatalf("request after the tool call lacks the urgent text; texts = %q", reqs[1].Texts())
	}
	fr := reqs[1].FunctionResponses()
	if len(fr) != 1 || fr[0].Name != "bash" || !strings.Contains(fr[0].Response["output"].(string), "working") {
		t.Errorf("functionResponses = %+v", fr)
	}
	last := reqs[1].Contents[len(reqs[1].Contents)-1]
	if last.Role != "user" || last.Parts[len(last.Parts)-1].Text != urgent {
		t.Errorf("last content = %+v, want the user turn ending with the urgent text", last)
	}
}

// TestToolsDoNotSeeTheKey: the bash tool's environment is scrubbed even
// though the session environment carries GEMINI_API_KEY.
func TestToolsDoNotSeeTheKey(t *testing.T) {
	srv := geminitest.New(t,
		geminitest.Call("bash", map[string]any{"command": "env"}),
		geminitest.Text("done"),
	)
	s, _ := newSession(t, nil)
	if res := newEngine(t, srv).Run(context.Background(), s); res.Outcome != engine.Success {
		t.Fatalf("result = %+v", res)
	}
	out, _ := srv.Requests()[1].FunctionResponses()[0].Response["output"].(string)
	if !strings.Contains(out, "SWARM_AGENT=alice") {
		t.Fatalf("env output lacks SWARM_AGENT:\n%s", out)
	}
	if strings.Contains(out, testKey) || strings.Contains(out, "GEMINI_API_KEY") {
		t.Fatalf("bash saw the key:\n%s", out)
	}
}

// TestSessionCancelledMidRequest: the urgent interrupt's cause comes back
// as Result.Cause while a request is in flight.
func TestSessionCancelledMidRequest(t *testing.T) {
	srv := geminitest.New(t, geminitest.Hold())
	s, _ := newSession(t, nil)
	e := newEngine(t, srv)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cause := errors.New("urgent mail from lead")
	done := make(chan engine.Result, 1)
	go func() { done <- e.Run(ctx, s) }()
	<-srv.Held()
	cancel(cause)
	res := <-done
	if res.Outcome != engine.Cancelled || !errors.Is(res.Cause, cause) {
		t.Fatalf("result = %+v, want Cancelled with the cause", res)
	}
}

func TestModelErrorFailsSession(t *testing.T) {
	srv := geminitest.New(t, geminitest.Error(404, "models/nope is not found"))
	s, _ := newSession(t, nil)
	res := newEngine(t, srv).Run(context.Background(), s)
	if res.Outcome != engine.Failed || res.Err == nil || !strings.Contains(res.Err.Error(), "not found") {
		t.Fatalf("result = %+v, want Failed with the API's message", res)
	}
}
