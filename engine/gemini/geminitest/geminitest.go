// Package geminitest is a fake Gemini API for tests: an httptest server
// speaking the REST wire format of POST /v1beta/models/<model>:generateContent.
// It serves scripted replies in order (or from a handler), records every
// request, and can hold a request open until the client gives up, so
// cancellation can be tested without sleeping.
//
// Point a client at it with GOOGLE_GEMINI_BASE_URL=<Server.URL> (or
// base_url in swarm.toml) and any non-empty GEMINI_API_KEY.
//
// The wire types here are written from the REST documentation, not taken
// from the SDK, so tests check what actually goes over the wire.
package geminitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Content is one entry of "contents" (or the systemInstruction).
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

// Part is one part of a content.
type Part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"` // base64, as on the wire
	FunctionCall     *FunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
}

// FunctionCall is the model asking for a tool.
type FunctionCall struct {
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
}

// FunctionResponse is a tool's result sent back.
type FunctionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response,omitempty"`
}

// Tool is one entry of "tools".
type Tool struct {
	FunctionDeclarations []FunctionDeclaration `json:"functionDeclarations,omitempty"`
}

// FunctionDeclaration declares a tool to the model.
type FunctionDeclaration struct {
	Name                 string `json:"name"`
	Description          string `json:"description,omitempty"`
	Parameters           any    `json:"parameters,omitempty"`
	ParametersJSONSchema any    `json:"parametersJsonSchema,omitempty"`
}

// GenerateContentRequest is the request body.
type GenerateContentRequest struct {
	Contents          []Content      `json:"contents"`
	SystemInstruction *Content       `json:"systemInstruction,omitempty"`
	Tools             []Tool         `json:"tools,omitempty"`
	ToolConfig        map[string]any `json:"toolConfig,omitempty"`
	GenerationConfig  map[string]any `json:"generationConfig,omitempty"`
}

// Response is a generateContent response body.
type Response struct {
	Candidates     []Candidate     `json:"candidates"`
	UsageMetadata  *UsageMetadata  `json:"usageMetadata,omitempty"`
	PromptFeedback *PromptFeedback `json:"promptFeedback,omitempty"`
	ModelVersion   string          `json:"modelVersion,omitempty"`
}

// Candidate is one answer.
type Candidate struct {
	Content       Content `json:"content"`
	FinishReason  string  `json:"finishReason,omitempty"`
	FinishMessage string  `json:"finishMessage,omitempty"`
}

// UsageMetadata is token usage.
type UsageMetadata struct {
	PromptTokenCount     int `json:"promptTokenCount,omitempty"`
	CandidatesTokenCount int `json:"candidatesTokenCount,omitempty"`
	ThoughtsTokenCount   int `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount,omitempty"`
}

// PromptFeedback says why a prompt was blocked.
type PromptFeedback struct {
	BlockReason string `json:"blockReason,omitempty"`
}

// DefaultUsage is the usage the reply helpers report.
var DefaultUsage = UsageMetadata{PromptTokenCount: 10, CandidatesTokenCount: 5, TotalTokenCount: 15}

// Reply is what the server answers to one request.
type Reply struct {
	Status int // 0 means 200
	// Body is marshalled to JSON; a string or []byte is sent as it is.
	Body any
	// Hold keeps the request open until the client cancels it (or the
	// server closes). The request is sent on Server.Held first.
	Hold bool
}

// Model answers with a model turn made of parts, finish reason STOP and
// DefaultUsage.
func Model(parts ...Part) Reply {
	u := DefaultUsage
	return Reply{Body: Response{
		Candidates:    []Candidate{{Content: Content{Role: "model", Parts: parts}, FinishReason: "STOP"}},
		UsageMetadata: &u,
	}}
}

// Text answers with a final text turn.
func Text(s string) Reply { return Model(Part{Text: s}) }

// Call answers with one function call.
func Call(name string, args map[string]any) Reply {
	return Model(Part{FunctionCall: &FunctionCall{Name: name, Args: args}})
}

// Error answers with a Google API error.
func Error(status int, msg string) Reply {
	return Reply{Status: status, Body: map[string]any{"error": map[string]any{
		"code": status, "message": msg, "status": http.StatusText(status),
	}}}
}

// Hold answers nothing: the request stays open until the client cancels.
func Hold() Reply { return Reply{Hold: true} }

// Request is one request the server received.
type Request struct {
	N      int    // 1, 2, ... in arrival order
	Method string // POST
	Path   string
	Query  string
	Model  string // from the path: models/<Model>:<Action>
	Action string // generateContent
	APIKey string // the x-goog-api-key header (or key= query)
	Body   []byte
	GenerateContentRequest
}

// Texts returns the text parts of every content, in order.
func (r *Request) Texts() []string {
	var out []string
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			if p.Text != "" {
				out = append(out, p.Text)
			}
		}
	}
	return out
}

// FunctionResponses returns every functionResponse part, in order.
func (r *Request) FunctionResponses() []FunctionResponse {
	var out []FunctionResponse
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				out = append(out, *p.FunctionResponse)
			}
		}
	}
	return out
}

// System returns the system instruction's text.
func (r *Request) System() string {
	if r.SystemInstruction == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range r.SystemInstruction.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Server is the fake Gemini API.
type Server struct {
	URL string

	srv  *httptest.Server
	done chan struct{}
	held chan *Request

	mu      sync.Mutex
	replies []Reply
	handler func(*Request) Reply
	reqs    []*Request
}

// New starts a server that answers with replies in order. It is closed
// when the test ends. A request with no reply left gets a 400 (not
// retried) saying so.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{done: make(chan struct{}), held: make(chan *Request, 64), replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close releases held requests and stops the server. It is safe to call
// more than once.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// Push queues more replies.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// HandleFunc answers every request from fn instead of the queue; fn may be
// called concurrently. Useful when several agents share one server.
func (s *Server) HandleFunc(fn func(*Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = fn
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// Held delivers each request as a Hold reply starts holding it.
func (s *Server) Held() <-chan *Request { return s.held }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body,
		APIKey: r.Header.Get("x-goog-api-key")}
	if req.APIKey == "" {
		req.APIKey = r.URL.Query().Get("key")
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if ok {
		req.Model, req.Action, ok = strings.Cut(rest, ":")
	}
	if !ok || r.Method != http.MethodPost {
		writeJSON(w, Error(http.StatusNotFound, fmt.Sprintf("geminitest: no route for %s %s", r.Method, r.URL.Path)))
		return
	}
	if req.Action != "generateContent" {
		writeJSON(w, Error(http.StatusNotImplemented, "geminitest: only generateContent is served, not "+req.Action))
		return
	}
	if err := json.Unmarshal(body, &req.GenerateContentRequest); err != nil {
		writeJSON(w, Error(http.StatusBadRequest, "geminitest: bad request body: "+err.Error()))
		return
	}

	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	req.N = len(s.reqs)
	var reply Reply
	switch {
	case s.handler != nil:
		h := s.handler
		s.mu.Unlock()
		reply = h(req)
		s.mu.Lock()
	case len(s.replies) > 0:
		reply, s.replies = s.replies[0], s.replies[1:]
	default:
		reply = Error(http.StatusBadRequest, fmt.Sprintf("geminitest: no scripted reply for request %d", req.N))
	}
	s.mu.Unlock()

	if reply.Hold {
		select {
		case s.held <- req:
		default: // nobody listening and the buffer is full: hold anyway
		}
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	writeJSON(w, reply)
}

func writeJSON(w http.ResponseWriter, r Reply) {
	var data []byte
	switch b := r.Body.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		data, err = json.Marshal(b)
		if err != nil {
			http.Error(w, "geminitest: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}
