// Package fakeapi serves local fakes of the model APIs the real agent CLIs
// call, for tests: OpenAI's Responses API as codex streams it, and
// Gemini's streamGenerateContent as gemini-cli streams it. A fake answers
// the first request that offers the swarm's send_message MCP tool with a
// call to it, and every other request with the text "done"; each answer
// reports fixed token counts (Usage), so a test can check what a CLI
// reported and swarm stored. Requests are told apart by the agent named
// in the swarm's prompt ("You are <agent>, an LLM coding agent"), and
// every request is kept for the test to inspect and print (Log).
package fakeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Usage is what every answer reports: input tokens (cached included, as
// both APIs count them), of which cached, and output tokens (OutputCall
// for an answer that calls the tool).
const (
	Input      = 100
	Cached     = 30
	OutputCall = 7
	Output     = 5
)

// Tool is the MCP tool the fakes call: every CLI names it with the
// server's name ("swarm") and its own separators, so a tool is taken for
// it when its name ends with Tool and names the server.
const Tool = "send_message"

// Request is one request a fake got.
type Request struct {
	API    string // "openai" | "gemini"
	Method string
	Path   string
	Agent  string   // from the swarm's prompt; "?" when none
	Model  string   // the model asked for
	Tools  []string // the function tools offered, by name
	Called string   // the tool the answer called, or ""
	Result bool     // the request carried a tool's result
	// ResultError is the error the CLI reported as the tool's result
	// (gemini-cli: functionResponse.response.error), or "".
	ResultError string
	Status      int    // the answer's HTTP status
	Body        []byte // the request's body, as sent
}

func (r Request) String() string {
	s := fmt.Sprintf("%s %s %s agent=%s model=%s tools=%d", r.API, r.Method, r.Path, r.Agent, r.Model, len(r.Tools))
	if mcp := swarmTools(r.Tools); len(mcp) > 0 {
		s += " mcp=" + strings.Join(mcp, ",")
	}
	if r.Result {
		s += " tool_result"
	}
	if r.ResultError != "" {
		s += "(error)"
	}
	if r.Called != "" {
		s += " -> call " + r.Called
	} else if r.Status == http.StatusOK {
		s += " -> text"
	} else {
		s += fmt.Sprintf(" -> %d", r.Status)
	}
	return s
}

// swarmTools are the tools of the swarm's MCP server among tools.
func swarmTools(tools []string) []string {
	var out []string
	for _, t := range tools {
		if strings.Contains(t, "swarm") {
			out = append(out, t)
		}
	}
	return out
}

// Server is one fake API.
type Server struct {
	*httptest.Server
	api  string
	mu   sync.Mutex
	reqs []Request
}

// agentRE finds the agent in its prompt's first line (section 1).
var agentRE = regexp.MustCompile(`You are ([a-z][a-z0-9-]*), an LLM coding agent in a swarm`)

func newServer(t testing.TB, api string, serve func(*Server, http.ResponseWriter, *http.Request, []byte) Request) *Server {
	s := &Server{api: api}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := serve(s, w, r, body)
		req.API, req.Method, req.Path, req.Body = api, r.Method, r.URL.Path, body
		if req.Agent == "" {
			req.Agent = "?"
			if m := agentRE.FindSubmatch(body); m != nil {
				req.Agent = string(m[1])
			}
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

// Requests are all requests so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// From are the requests whose prompt named agent.
func (s *Server) From(agent string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Agent == agent {
			out = append(out, r)
		}
	}
	return out
}

// Log is the requests, one a line: the evidence of what a CLI called.
func (s *Server) Log() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// callTool is the swarm's send_message among tools, or "".
func callTool(tools []string) string {
	for _, t := range tools {
		if strings.HasSuffix(t, Tool) && strings.Contains(t, "swarm") {
			return t
		}
	}
	return ""
}

// message is what the fake's call sends: to the operator, naming the
// agent, so a test can find it in the mailbox.
func message(agent string) map[string]any {
	return map[string]any{"to": "operator", "body": "hello from " + agent + " through MCP"}
}

func sse(w http.ResponseWriter) func(event string, data any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	return func(event string, data any) {
		b, _ := json.Marshal(data)
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"error":{"code":404,"message":"not served by the fake","status":"NOT_FOUND"}}`)
}
