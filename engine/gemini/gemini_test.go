package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/engine/gemini/geminitest"
)

const testKey = "test-key-5f2b9c0d"

// env is a fake environment for Options.Getenv.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

var quiet = slog.New(slog.DiscardHandler)

// fastRetry keeps retry tests quick; the backoff itself is the SDK's.
var fastRetry = &Retry{Attempts: 3, InitialDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

func newModel(t *testing.T, srv *geminitest.Server) *Model {
	t.Helper()
	m, err := New(Options{Model: "gemini-test", Getenv: env(EnvGeminiKey, testKey, EnvBaseURL, srv.URL), Retry: fastRetry, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userTurn(text string) engine.Turn {
	return engine.Turn{Role: engine.RoleUser, Parts: []engine.Part{{Text: text}}}
}

func TestMissingKeyNamesBothVariables(t *testing.T) {
	_, err := New(Options{Model: "gemini-test", Getenv: env()})
	if !errors.Is(err, ErrNoAPIKey) {
		t.Fatalf("err = %v, want ErrNoAPIKey", err)
	}
	for _, name := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}

	e := NewEngine("gemini", Options{Getenv: env()})
	perr := e.Preflight(context.Background())
	if !errors.Is(perr, ErrNoAPIKey) {
		t.Fatalf("Preflight = %v, want ErrNoAPIKey", perr)
	}
	res := e.Run(context.Background(), &engine.Session{Agent: "alice"})
	if res.Outcome != engine.Failed || !errors.Is(res.Err, ErrNoAPIKey) {
		t.Fatalf("Run = %+v, want Failed with ErrNoAPIKey", res)
	}
}

func TestKeyFromEitherVariable(t *testing.T) {
	for _, name := range []string{EnvGeminiKey, EnvGoogleKey} {
		t.Run(name, func(t *testing.T) {
			srv := geminitest.New(t, geminitest.Text("hi"))
			m, err := New(Options{Model: "gemini-test", Getenv: env(name, testKey, EnvBaseURL, srv.URL)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("hello")}}); err != nil {
				t.Fatal(err)
			}
			if got := srv.Requests()[0].APIKey; got != testKey {
				t.Fatalf("key sent = %q, want the one from %s", got, name)
			}
		})
	}
}

func TestVertexNeedsNoKey(t *testing.T) {
	// The SDK reads Vertex's project and location from the process
	// environment; make sure none leaks in from the machine.
	for _, k := range []string{"GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(k, "")
	}
	_, err := New(Options{Getenv: env(EnvVertex, "true"), BaseURL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatalf("Vertex AI with a gateway: %v", err)
	}
}

func TestBadBaseURL(t *testing.T) {
	_, err := New(Options{Getenv: env(EnvGeminiKey, testKey), BaseURL: "localhost:8080"})
	if err == nil || !strings.Contains(err.Error(), "bad base URL") {
		t.Fatalf("err = %v, want a bad base URL error", err)
	}
}

func TestBaseURLConfigWinsOverEnv(t *testing.T) {
	srv := geminitest.New(t, geminitest.Text("from config"))
	// The environment points at a closed port: using it would fail.
	m, err := New(Options{Model: "gemini-test", BaseURL: srv.URL, Retry: &Retry{Attempts: 1},
		Getenv: env(EnvGeminiKey, testKey, EnvBaseURL, "http://127.0.0.1:1")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Turn.Parts[0].Text; got != "from config" {
		t.Fatalf("text = %q", got)
	}
}

func TestRequestWireFormat(t *testing.T) {
	srv := geminitest.New(t, geminitest.Text("hello back"))
	m, err := New(Options{Getenv: env(EnvGeminiKey, testKey, EnvBaseURL, srv.URL), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tools := []engine.ToolSpec{{Name: "bash", Description: "run a command", Parameters: map[string]any{
		"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []any{"command"},
	}}}
	resp, err := m.Generate(context.Background(), engine.Request{Model: "gemini-2.5-flash", System: "You are alice.",
		Turns: []engine.Turn{userTurn("Begin.")}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Errorf("path = %s, want the request's model", r.Path)
	}
	if r.System() != "You are alice." {
		t.Errorf("system = %q", r.System())
	}
	if len(r.Contents) != 1 || r.Contents[0].Role != "user" || r.Contents[0].Parts[0].Text != "Begin." {
		t.Errorf("contents = %+v", r.Contents)
	}
	if len(r.Tools) != 1 || len(r.Tools[0].FunctionDeclarations) != 1 {
		t.Fatalf("tools = %+v", r.Tools)
	}
	d := r.Tools[0].FunctionDeclarations[0]
	if d.Name != "bash" || d.ParametersJSONSchema == nil {
		t.Errorf("declaration = %+v, want bash with parametersJsonSchema", d)
	}
	if strings.Contains(string(r.Body), "ontinuation") {
		t.Errorf("continuation settings leaked into the request: %s", r.Body)
	}
	if resp.Turn.Role != engine.RoleModel || len(resp.Turn.Parts) != 1 || resp.Turn.Parts[0].Text != "hello back" {
		t.Errorf("turn = %+v", resp.Turn)
	}
	if want := (engine.Usage{InputTokens: 10, OutputTokens: 5}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

func TestEngineModelOverridesSession(t *testing.T) {
	srv := geminitest.New(t, geminitest.Text("ok"))
	if _, err := newModel(t, srv).Generate(context.Background(), engine.Request{Model: "gemini-2.5-flash", Turns: []engine.Turn{userTurn("x")}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Model; got != "gemini-test" {
		t.Fatalf("model = %s, want the engine's gemini-test", got)
	}
}

func TestNoModelName(t *testing.T) {
	srv := geminitest.New(t)
	m, err := New(Options{Getenv: env(EnvGeminiKey, testKey, EnvBaseURL, srv.URL), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}}); err == nil || !strings.Contains(err.Error(), "no model name") {
		t.Fatalf("err = %v", err)
	}
	if len(srv.Requests()) != 0 {
		t.Fatal("a request went out without a model")
	}
}

func TestFromConfig(t *testing.T) {
	o := FromConfig(config.Engine{Name: "flash", Kind: "gemini", Model: "gemini-2.5-pro", BaseURL: "http://gw.example/"})
	if o.Model != "gemini-2.5-pro" || o.BaseURL != "http://gw.example/" {
		t.Fatalf("options = %+v", o)
	}
}

func TestUsageCountsThoughtsAsOutput(t *testing.T) {
	reply := geminitest.Text("ok")
	body := reply.Body.(geminitest.Response)
	body.UsageMetadata = &geminitest.UsageMetadata{PromptTokenCount: 100, CandidatesTokenCount: 7, ThoughtsTokenCount: 30}
	srv := geminitest.New(t, geminitest.Reply{Body: body})
	resp, err := newModel(t, srv).Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (engine.Usage{InputTokens: 100, OutputTokens: 37}); resp.Usage != want {
		t.Fatalf("usage = %+v, want %+v", resp.Usage, want)
	}
}

func TestRetries503Then200(t *testing.T) {
	srv := geminitest.New(t, geminitest.Error(http.StatusServiceUnavailable, "overloaded"), geminitest.Text("after retry"))
	resp, err := newModel(t, srv).Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}})
	if err != nil {
		t.Fatalf("a 503 then a 200 must succeed: %v", err)
	}
	if got := resp.Turn.Parts[0].Text; got != "after retry" {
		t.Fatalf("text = %q", got)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("requests = %d, want 2", n)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	srv := geminitest.New(t)
	for range 5 {
		srv.Push(geminitest.Error(http.StatusServiceUnavailable, "overloaded"))
	}
	_, err := newModel(t, srv).Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}})
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want the 503 as a genai.APIError", err)
	}
	if n := len(srv.Requests()); n != fastRetry.Attempts {
		t.Fatalf("requests = %d, want %d", n, fastRetry.Attempts)
	}
}

func TestClientErrorNotRetried(t *testing.T) {
	srv := geminitest.New(t, geminitest.Error(http.StatusBadRequest, "bad request"), geminitest.Text("never"))
	_, err := newModel(t, srv).Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}})
	if err == nil {
		t.Fatal("a 400 must fail")
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("requests = %d, want 1", n)
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	// A server that echoes the key back must not get it into our errors.
	srv := geminitest.New(t, geminitest.Error(http.StatusBadRequest, "API key "+testKey+" not valid. Please pass a valid API key."))
	_, err := newModel(t, srv).Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}})
	if err == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("error leaks the key: %v", err)
	}
	if !strings.Contains(err.Error(), "[REDACTED]") || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("error lost its message: %v", err)
	}
}

func TestCancelMidRequestReturnsCause(t *testing.T) {
	srv := geminitest.New(t, geminitest.Hold())
	m := newModel(t, srv)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cause := errors.New("urgent mail")
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, engine.Request{Turns: []engine.Turn{userTurn("x")}})
		done <- err
	}()
	<-srv.Held() // the request is at the server
	cancel(cause)
	err := <-done
	if !errors.Is(err, cause) {
		t.Fatalf("err = %v, want it to wrap the cause", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("requests = %d: a cancelled request must not be retried", n)
	}
}

func TestEmptyAndBlockedResponses(t *testing.T) {
	cases := []struct {
		name    string
		reply   geminitest.Reply
		wantErr string
	}{
		{"blocked prompt", geminitest.Reply{Body: geminitest.Response{PromptFeedback: &geminitest.PromptFeedback{BlockReason: "SAFETY"}}}, "blocked (SAFETY)"},
		{"no candidates", geminitest.Reply{Body: `{"candidates":[]}`}, "no candidates"},
		{"safety stop", geminitest.Reply{Body: `{"candidates":[{"content":{"role":"model"},"finishReason":"SAFETY"}]}`}, "stopped with SAFETY"},
		{"malformed call", geminitest.Reply{Body: `{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL"}]}`}, "stopped with MALFORMED_FUNCTION_CALL"},
		{"empty stop is an answer", geminitest.Reply{Body: `{"candidates":[{"content":{"role":"model"},"finishReason":"STOP"}]}`}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := geminitest.New(t, c.reply)
			resp, err := newModel(t, srv).Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}})
			if c.wantErr == "" {
				if err != nil || len(resp.Turn.Parts) != 0 {
					t.Fatalf("resp = %+v, err = %v; want an empty answer", resp, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
		})
	}
}

// TestRawRoundTrip: a model turn carrying thought signatures (on a thought
// and on a call) goes back byte for byte, and the tool result goes back as
// a functionResponse part answering the call.
func TestRawRoundTrip(t *testing.T) {
	const sigThought = "c2lnbmF0dXJlLW9mLWEtdGhvdWdodA=="
	const sigCall = "Q2lRQmpaODgvc2lnbmF0dXJlK29uL2EvY2FsbA=="
	srv := geminitest.New(t,
		geminitest.Model(
			geminitest.Part{Text: "I should list the files.", Thought: true, ThoughtSignature: sigThought},
			geminitest.Part{FunctionCall: &geminitest.FunctionCall{Name: "list_files", Args: map[string]any{"path": "."}}, ThoughtSignature: sigCall},
		),
		geminitest.Text("done"),
	)
	m := newModel(t, srv)
	turns := []engine.Turn{userTurn("Begin.")}
	resp, err := m.Generate(context.Background(), engine.Request{Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	parts := resp.Turn.Parts
	if len(parts) != 2 || !parts[0].IsThought || parts[1].Call == nil || parts[1].Call.Name != "list_files" {
		t.Fatalf("parts = %+v", parts)
	}
	if parts[1].Call.ID == "" {
		t.Fatal("a call without an id must get one for the loop")
	}
	if _, ok := parts[1].Raw.(*genai.Part); !ok {
		t.Fatalf("Raw = %T, want *genai.Part", parts[1].Raw)
	}
	call := parts[1].Call
	turns = append(turns, resp.Turn,
		engine.Turn{Role: engine.RoleUser, Parts: []engine.Part{{Result: &engine.ToolResult{CallID: call.ID, Name: call.Name, Output: "README.md\n"}}}},
		userTurn("[URGENT] From lead: also update the docs"))
	if _, err := m.Generate(context.Background(), engine.Request{Turns: turns}); err != nil {
		t.Fatal(err)
	}

	r := srv.Requests()[1]
	// user, model, user (the tool result and the interjection merged).
	if len(r.Contents) != 3 {
		t.Fatalf("contents = %s", r.Body)
	}
	model := r.Contents[1]
	if model.Role != "model" || len(model.Parts) != 2 {
		t.Fatalf("model turn = %+v", model)
	}
	if model.Parts[0].ThoughtSignature != sigThought || !model.Parts[0].Thought || model.Parts[0].Text != "I should list the files." {
		t.Errorf("thought part changed: %+v", model.Parts[0])
	}
	if model.Parts[1].ThoughtSignature != sigCall || model.Parts[1].FunctionCall == nil || model.Parts[1].FunctionCall.Name != "list_files" {
		t.Errorf("call part changed: %+v", model.Parts[1])
	}
	// The raw JSON carries the signatures verbatim too.
	for _, sig := range []string{sigThought, sigCall} {
		if !strings.Contains(string(r.Body), `"thoughtSignature":"`+sig+`"`) {
			t.Errorf("request body lacks signature %s", sig)
		}
	}
	user := r.Contents[2]
	if user.Role != "user" || len(user.Parts) != 2 {
		t.Fatalf("user turn = %+v", user)
	}
	fr := user.Parts[0].FunctionResponse
	if fr == nil || fr.Name != "list_files" || fr.ID != "" || fr.Response["output"] != "README.md\n" {
		t.Errorf("functionResponse = %+v, want list_files with output and no id (the call had none)", fr)
	}
	if user.Parts[1].Text != "[URGENT] From lead: also update the docs" {
		t.Errorf("interjection = %+v", user.Parts[1])
	}
}

func TestToolErrorAndCallIDsGoBack(t *testing.T) {
	srv := geminitest.New(t, geminitest.Text("ok"))
	m := newModel(t, srv)
	// A call that came with an id, and parts without Raw (another model's
	// turn, say) are encoded from their fields.
	turns := []engine.Turn{
		userTurn("Begin."),
		{Role: engine.RoleModel, Parts: []engine.Part{{Call: &engine.ToolCall{ID: "abc", Name: "bash", Args: map[string]any{"command": "false"}}}}},
		{Role: engine.RoleUser, Parts: []engine.Part{{Result: &engine.ToolResult{CallID: "abc", Name: "bash", Output: "partial", Error: "exit status 1"}}}},
	}
	if _, err := m.Generate(context.Background(), engine.Request{Turns: turns}); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	fc := r.Contents[1].Parts[0].FunctionCall
	if fc == nil || fc.ID != "abc" || fc.Args["command"] != "false" {
		t.Errorf("functionCall = %+v", fc)
	}
	fr := r.FunctionResponses()
	if len(fr) != 1 || fr[0].ID != "abc" || fr[0].Response["error"] != "exit status 1" || fr[0].Response["output"] != "partial" {
		t.Errorf("functionResponse = %+v", fr)
	}
}

func TestGeneratedIDsAreUnique(t *testing.T) {
	srv := geminitest.New(t, geminitest.Model(
		geminitest.Part{FunctionCall: &geminitest.FunctionCall{Name: "read_file", Args: map[string]any{"path": "a"}}},
		geminitest.Part{FunctionCall: &geminitest.FunctionCall{Name: "read_file", Args: map[string]any{"path": "b"}}},
	))
	resp, err := newModel(t, srv).Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("x")}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := resp.Turn.Parts[0].Call, resp.Turn.Parts[1].Call
	if a == nil || b == nil || a.ID == b.ID {
		t.Fatalf("calls = %+v, %+v: want distinct ids", a, b)
	}
	if got, _ := json.Marshal(b.Args); string(got) != `{"path":"b"}` {
		t.Fatalf("args = %s", got)
	}
}

func TestVertexWithoutProjectSaysWhatToSet(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	t.Setenv("GOOGLE_CLOUD_LOCATION", "")
	_, err := New(Options{Getenv: env(EnvVertex, "true")})
	if err == nil {
		t.Fatal("Vertex AI with no project or location was accepted")
	}
	if strings.Contains(err.Error(), "ClientConfig") || !strings.Contains(err.Error(), "GOOGLE_CLOUD_PROJECT") {
		t.Fatalf("error = %v", err)
	}
}

// api_key_file: the key is read from the file, wins over the environment,
// and a bad file is reported by Preflight without showing its contents.
func TestKeyFromFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "gemini.key")
	if err := os.WriteFile(keyFile, []byte("  "+testKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := geminitest.New(t, geminitest.Text("hi"))
	o := FromConfig(config.Engine{Name: "gemini", Kind: "gemini", APIKeyFile: keyFile})
	if o.APIKeyFile != keyFile {
		t.Fatalf("FromConfig dropped api_key_file: %+v", o)
	}
	o.Model, o.Getenv = "gemini-test", env(EnvGeminiKey, "the-environment's-key", EnvBaseURL, srv.URL)
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), engine.Request{Turns: []engine.Turn{userTurn("hello")}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].APIKey; got != testKey {
		t.Fatalf("key sent = %q, want the file's", got)
	}

	loose := filepath.Join(dir, "loose.key")
	if err := os.WriteFile(loose, []byte("secret-in-a-loose-file"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := NewEngine("gemini", Options{APIKeyFile: loose, Getenv: env()})
	perr := e.Preflight(context.Background())
	if perr == nil || !strings.Contains(perr.Error(), loose) || strings.Contains(perr.Error(), "secret-in-a-loose-file") {
		t.Fatalf("Preflight with a group-readable key file = %v", perr)
	}
}
