package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/gittest"

	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/proc"
)

// gitWorktree makes a repository with one commit and a linked worktree on
// branch swarm/<agent>, the way sessions run, and returns the worktree.
func gitWorktree(t *testing.T, agent string) string {
	t.Helper()
	_, wt := gittest.Worktree(t, agent, map[string]string{
		"README.md":   "hello\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
	})
	return wt
}

func writeFile(t *testing.T, path, content string) { gittest.WriteFile(t, path, content) }

func readFile(t *testing.T, path string) string { return gittest.ReadFile(t, path) }

// newSession is a code-mode session for agent "alice" in wt.
func newSession(wt string, log *bytes.Buffer) *Session {
	s := &Session{
		Agent: "alice", ID: "alice-1", Seq: 1, Root: filepath.Dir(filepath.Dir(filepath.Dir(wt))),
		DB: "/nonexistent/swarm.db", Agents: []string{"alice", "bob"}, Worktree: wt, Branch: "swarm/alice",
		Prompt: "You are alice.", Mode: mode.Code, Model: "fake-model",
	}
	if log != nil {
		s.Log = log
	}
	s.Env = SessionEnv(os.Environ(), s)
	return s
}

// fakeModel replies with the turns a test scripts, and records requests.
type fakeModel struct {
	reply func(n int, req Request) (Response, error) // n counts calls from 1
	reqs  []Request
}

func (m *fakeModel) Generate(ctx context.Context, req Request) (Response, error) {
	// Keep a copy: the loop appends to the slice it passed.
	req.Turns = append([]Turn(nil), req.Turns...)
	m.reqs = append(m.reqs, req)
	return m.reply(len(m.reqs), req)
}

// toolTurns returns a model turn making the given calls.
func callTurn(calls ...ToolCall) Response {
	var parts []Part
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("c%d", i+1)
		}
		parts = append(parts, Part{Call: &calls[i]})
	}
	return Response{Turn: Turn{Role: RoleModel, Parts: parts}, Usage: Usage{InputTokens: 10, OutputTokens: 2}}
}

func textTurn(text string) Response {
	return Response{Turn: Turn{Role: RoleModel, Parts: []Part{{Text: text}}}, Usage: Usage{InputTokens: 10, OutputTokens: 3}}
}

// sequence replies with the responses in order, then with a final text.
func sequence(rs ...Response) func(int, Request) (Response, error) {
	return func(n int, _ Request) (Response, error) {
		if n <= len(rs) {
			return rs[n-1], nil
		}
		return textTurn("done"), nil
	}
}

func call(name string, args map[string]any) ToolCall { return ToolCall{Name: name, Args: args} }

// resultsOf returns the tool results the model saw in request n (from 1).
func resultsOf(t *testing.T, m *fakeModel, n int) []ToolResult {
	t.Helper()
	if len(m.reqs) < n {
		t.Fatalf("model got %d requests, want at least %d", len(m.reqs), n)
	}
	turns := m.reqs[n-1].Turns
	start := len(turns)
	for start > 0 && turns[start-1].Role != RoleModel {
		start--
	}
	var out []ToolResult
	for _, turn := range turns[start:] {
		for _, p := range turn.Parts {
			if p.Result != nil {
				out = append(out, *p.Result)
			}
		}
	}
	return out
}

// runTool runs one call through a session's toolbox.
func runTool(t *testing.T, s *Session, name string, args map[string]any) ToolResult {
	t.Helper()
	tb, err := newToolbox(s)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.close()
	return tb.run(context.Background(), ToolCall{ID: "x", Name: name, Args: args})
}

func specNames(specs []ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// groupGone reports whether no live process of group pgid is left. A
// SIGKILL takes effect asynchronously, so it waits (bounded) for the
// kernel to finish it before answering no.
func groupGone(pgid int) bool {
	for range 500 {
		if groupGoneNow(pgid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// groupGoneNow looks once. On Linux it reads /proc and ignores zombies,
// which are dead and only wait for their new parent to reap them.
func groupGoneNow(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return !proc.GroupAlive(pgid)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 3 {
			continue
		}
		if pg, _ := strconv.Atoi(f[2]); pg == pgid && f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
}

// fakeMessenger records sends as the agent it was made for.
type fakeMessenger struct {
	mu   sync.Mutex
	from string
	sent []sent
	err  error
}

type sent struct {
	From, To, Body string
	Urgent         bool
	ReplyTo        int64
}

func (m *fakeMessenger) Send(_ context.Context, to, body string, urgent bool, replyTo int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return 0, m.err
	}
	m.sent = append(m.sent, sent{From: m.from, To: to, Body: body, Urgent: urgent, ReplyTo: replyTo})
	return int64(100 + len(m.sent)), nil
}

// fakeBoard is a task board where bob already holds bd-2.
type fakeBoard struct {
	calls []string
}

func (b *fakeBoard) Claim(_ context.Context, id string) (json.RawMessage, error) {
	b.calls = append(b.calls, "claim "+id)
	if id == "bd-2" {
		// What the beads adapter returns for bd's exit 1 with text on stderr.
		return nil, &proc.ExitError{Name: "bd", ExitCode: 1, Stderr: "Error: issue bd-2 is already claimed by bob\n"}
	}
	return json.RawMessage(`[{"id":"` + id + `","status":"in_progress","assignee":"alice"}]`), nil
}

func (b *fakeBoard) Close(_ context.Context, id, reason string) (json.RawMessage, error) {
	b.calls = append(b.calls, "close "+id+" "+reason)
	return json.RawMessage(`[{"id":"` + id + `","status":"closed"}]`), nil
}

func (b *fakeBoard) Show(_ context.Context, id string) (json.RawMessage, error) {
	b.calls = append(b.calls, "show "+id)
	if id == "bd-404" {
		return nil, errors.New("bd exited with status 1: no issue found matching \"bd-404\"")
	}
	return json.RawMessage(`[{"id":"` + id + `","title":"Add the users endpoint"}]`), nil
}

// toolCall is one call of a tool with its arguments.
type toolCall struct {
	tool string
	args map[string]any
}

// fileToolCalls calls every file tool on path, the way the sandbox tables
// try each escape against all of them.
func fileToolCalls(path string) []toolCall {
	return []toolCall{
		{"read_file", map[string]any{"path": path}},
		{"write_file", map[string]any{"path": path, "content": "pwned"}},
		{"edit_file", map[string]any{"path": path, "old": "secret", "new": "pwned"}},
		{"list_files", map[string]any{"path": path}},
		{"grep", map[string]any{"pattern": "secret", "path": path}},
	}
}
