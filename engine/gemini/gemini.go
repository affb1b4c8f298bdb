// Package gemini is the engine.Model for Google's Gemini models, over
// google.golang.org/genai with function calling. The agent loop
// (engine.Loop) drives it; NewEngine returns the whole engine.
//
// Decisions, most of them forced by the SDK (DESIGN §11):
//
//   - The key comes from GEMINI_API_KEY, then GOOGLE_API_KEY (the order the
//     DESIGN lists them; the SDK itself would prefer GOOGLE_API_KEY). A
//     missing key is ErrNoAPIKey, raised by New and so by Preflight, before
//     any session. With GOOGLE_GENAI_USE_VERTEXAI (or
//     GOOGLE_GENAI_USE_ENTERPRISE) true, Vertex AI is configured entirely by
//     the SDK's own variables (GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION,
//     application default credentials, GOOGLE_VERTEX_BASE_URL) and no key is
//     demanded.
//   - The model is the engine table's model when set, else the session's.
//   - The base URL is the config's base_url, else GOOGLE_GEMINI_BASE_URL,
//     else the SDK's default. It is passed to the SDK explicitly, so the
//     lookup function in Options decides, not the process environment.
//   - Retries are on and bounded: the SDK retries nothing unless
//     HTTPOptions.RetryOptions is set. DefaultRetry makes 5 attempts in all
//     on 408, 429 and 5xx, with exponential backoff.
//   - One request per turn: AutomaticContinuation is off (it would send
//     extra, billed requests), and the Go SDK has no automatic function
//     calling. Requests are unary, not streamed.
//   - Model turns go back verbatim: every response part is kept in
//     engine.Part.Raw as the *genai.Part the SDK decoded and is sent back
//     unchanged, so thought signatures survive (Gemini 3 rejects calls whose
//     signatures were dropped).
//   - Parts are read directly; resp.Text() is never called (it logs
//     warnings when other parts are present).
//   - Tool results go back as functionResponse parts in a user turn, with
//     {"output": ...} or {"error": ...}. Calls that came without an id get a
//     synthetic one for the loop; it is mapped back to the model's (empty)
//     id when the result is sent. Consecutive user turns (tool results, then
//     an interjected message) are merged into one content.
//   - Usage: input = promptTokenCount + toolUsePromptTokenCount minus
//     cachedContentTokenCount, which is the cache read; output =
//     candidatesTokenCount + thoughtsTokenCount (thoughts are billed as
//     output). Gemini has no cache-write charge.
//   - A cancelled request returns an error wrapping context.Cause(ctx): the
//     SDK's own error would not match errors.Is(err, context.Canceled) once
//     a cause was given.
//   - The API key never reaches an error or a log line: the SDK prints its
//     whole ClientConfig (key included) in some errors, so every error from
//     it passes through redaction.
package gemini

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
)

// Environment variables read through Options.Getenv.
const (
	EnvGeminiKey  = "GEMINI_API_KEY"
	EnvGoogleKey  = "GOOGLE_API_KEY"
	EnvBaseURL    = "GOOGLE_GEMINI_BASE_URL"
	EnvVertex     = "GOOGLE_GENAI_USE_VERTEXAI"
	EnvEnterprise = "GOOGLE_GENAI_USE_ENTERPRISE"
)

// ErrNoAPIKey means neither GEMINI_API_KEY nor GOOGLE_API_KEY is set.
var ErrNoAPIKey = errors.New("gemini: no API key: set GEMINI_API_KEY or GOOGLE_API_KEY " +
	"(get a key at https://aistudio.google.com/apikey), or set GOOGLE_GENAI_USE_VERTEXAI=true to use Vertex AI")

// Retry bounds the SDK's retries of one request.
type Retry struct {
	Attempts     int           // in all, the first included; 1 means no retry
	InitialDelay time.Duration // before the first retry; doubles each time
	MaxDelay     time.Duration // cap of one delay
}

// DefaultRetry is used when Options.Retry is nil: 5 attempts, about 15 s of
// backoff at most.
var DefaultRetry = Retry{Attempts: 5, InitialDelay: time.Second, MaxDelay: 8 * time.Second}

// Options configure a Model.
type Options struct {
	// Model, when set, overrides the session's model (Request.Model), as
	// an [engine.NAME] table's model does in swarm.toml.
	Model string
	// BaseURL is the config's base_url. It wins over GOOGLE_GEMINI_BASE_URL.
	BaseURL string
	// APIKey, when set, is used instead of the environment.
	APIKey string
	// APIKeyFile (api_key_file), when set and APIKey is not, is read with
	// config.ReadKeyFile for the key, instead of the environment.
	APIKeyFile string
	// Getenv looks up environment variables; nil means os.Getenv.
	Getenv func(string) string
	// HTTPClient carries the requests; nil means a fresh default client.
	// It is not modified.
	HTTPClient *http.Client
	// Retry bounds retries; nil means DefaultRetry.
	Retry *Retry
	// Logger gets one line per failed HTTP attempt and per response at
	// debug level; nil means slog.Default().
	Logger *slog.Logger
}

// FromConfig converts an [engine.NAME] table (or the built-in gemini).
func FromConfig(e config.Engine) Options {
	return Options{Model: e.Model, BaseURL: e.BaseURL, APIKeyFile: e.APIKeyFile}
}

// Model is an engine.Model over the Gemini API.
type Model struct {
	client *genai.Client
	model  string
	key    string // only for redaction
	log    *slog.Logger
}

var _ engine.Model = (*Model)(nil)

// New makes a Model. It fails with ErrNoAPIKey when no key is set (and
// Vertex AI is not selected), and on a malformed base URL. It makes no
// network call.
func New(opts Options) (*Model, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	retry := DefaultRetry
	if opts.Retry != nil {
		retry = *opts.Retry
	}
	if opts.APIKey == "" && opts.APIKeyFile != "" {
		key, err := config.ReadKeyFile(opts.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("gemini: api_key_file: %w", err)
		}
		opts.APIKey = key
	}
	cc := genai.ClientConfig{
		HTTPClient: loggingClient(opts.HTTPClient, logger),
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      opts.BaseURL,
			RetryOptions: retryOptions(retry),
		},
	}
	if useVertex(getenv) {
		// Project, location and credentials come from the SDK's own
		// variables; an explicit key selects Vertex express mode.
		cc.Backend = genai.BackendVertexAI
		cc.APIKey = opts.APIKey
		// The SDK builds an authenticated client only when given none.
		cc.HTTPClient = opts.HTTPClient
	} else {
		cc.Backend = genai.BackendGeminiAPI
		cc.APIKey = firstNonEmpty(opts.APIKey, getenv(EnvGeminiKey), getenv(EnvGoogleKey))
		if cc.APIKey == "" {
			return nil, ErrNoAPIKey
		}
		if cc.HTTPOptions.BaseURL == "" {
			cc.HTTPOptions.BaseURL = getenv(EnvBaseURL)
		}
	}
	if b := cc.HTTPOptions.BaseURL; b != "" {
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("gemini: bad base URL %q (from base_url or %s): want http(s)://host[/path]", b, EnvBaseURL)
		}
	}
	key := cc.APIKey
	client, err := genai.NewClient(context.Background(), &cc)
	if err != nil {
		// The SDK's message includes the whole ClientConfig, key and all:
		// keep only its first sentence, redacted, never the original error.
		msg := err.Error()
		if i := strings.Index(msg, ". ClientConfig:"); i >= 0 {
			msg = msg[:i]
		}
		hint := ""
		if useVertex(getenv) {
			hint = "; for Vertex AI set GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION (or unset GOOGLE_GENAI_USE_VERTEXAI and use an API key)"
		}
		return nil, errors.New("gemini: " + redact(msg, key) + hint)
	}
	return &Model{client: client, model: opts.Model, key: key, log: logger}, nil
}

func useVertex(getenv func(string) string) bool {
	// Same precedence as the SDK: the enterprise variable wins when set.
	if v := getenv(EnvEnterprise); v != "" {
		return truthy(v)
	}
	return truthy(getenv(EnvVertex))
}

func truthy(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "1" || v == "true"
}

func retryOptions(r Retry) *genai.HTTPRetryOptions {
	attempts := int32(max(r.Attempts, 1))
	initial := r.InitialDelay.Seconds()
	maxDelay := r.MaxDelay.Seconds()
	if maxDelay < initial {
		maxDelay = initial
	}
	expBase := 2.0
	// Jitter of up to one initial delay (the SDK's default adds up to a
	// whole second, whatever the delay).
	jitter := initial
	return &genai.HTTPRetryOptions{
		Attempts:     &attempts,
		InitialDelay: &initial,
		MaxDelay:     &maxDelay,
		ExpBase:      &expBase,
		Jitter:       &jitter,
	}
}

// Generate asks Gemini for the next turn: one generateContent request
// (retried on transient errors), no continuation.
func (m *Model) Generate(ctx context.Context, req engine.Request) (engine.Response, error) {
	model := firstNonEmpty(m.model, req.Model)
	if model == "" {
		return engine.Response{}, errors.New("gemini: no model name: set model in [defaults], the agent or the engine table")
	}
	contents := toContents(req.Turns)
	cfg := &genai.GenerateContentConfig{AutomaticContinuation: new(false)}
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: req.System}}}
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if t.Parameters != nil {
				d.ParametersJsonSchema = t.Parameters
			}
			decls = append(decls, d)
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	resp, err := m.client.Models.GenerateContent(ctx, model, contents, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return engine.Response{}, fmt.Errorf("gemini %s: request cancelled: %w", model, context.Cause(ctx))
		}
		return engine.Response{}, &redactedError{msg: fmt.Sprintf("gemini %s: %s", model, redact(err.Error(), m.key)), err: err}
	}
	out, finish, err := fromResponse(resp, len(req.Turns))
	if err != nil {
		return engine.Response{}, fmt.Errorf("gemini %s: %w", model, err)
	}
	m.log.Debug("gemini response", "model", model, "finish_reason", finish, "parts", len(out.Turn.Parts),
		"input_tokens", out.Usage.InputTokens, "output_tokens", out.Usage.OutputTokens)
	return out, nil
}

// toContents turns the conversation into Gemini contents. Parts that came
// from Gemini go back as they were (Raw); others are encoded from their
// fields.
func toContents(turns []engine.Turn) []*genai.Content {
	// The loop knows calls by the ids fromResponse gave them; a call Gemini
	// sent without an id must be answered without one.
	type call struct{ id, name string }
	calls := map[string]call{}
	for _, t := range turns {
		for _, p := range t.Parts {
			if p.Call == nil {
				continue
			}
			c := call{id: p.Call.ID, name: p.Call.Name}
			if raw, ok := p.Raw.(*genai.Part); ok && raw != nil && raw.FunctionCall != nil {
				c = call{id: raw.FunctionCall.ID, name: raw.FunctionCall.Name}
			}
			calls[p.Call.ID] = c
		}
	}
	var out []*genai.Content
	for _, t := range turns {
		role := t.Role
		if role != engine.RoleModel {
			role = engine.RoleUser
		}
		var parts []*genai.Part
		for _, p := range t.Parts {
			if raw, ok := p.Raw.(*genai.Part); ok && raw != nil {
				parts = append(parts, raw)
				continue
			}
			switch {
			case p.Call != nil:
				parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: p.Call.ID, Name: p.Call.Name, Args: p.Call.Args}})
			case p.Result != nil:
				r := p.Result
				fr := &genai.FunctionResponse{ID: r.CallID, Name: r.Name, Response: resultPayload(r)}
				if c, ok := calls[r.CallID]; ok {
					fr.ID = c.id
					if fr.Name == "" {
						fr.Name = c.name
					}
				}
				parts = append(parts, &genai.Part{FunctionResponse: fr})
			case p.Text != "":
				parts = append(parts, &genai.Part{Text: p.Text, Thought: p.IsThought})
			}
			// An empty part with nothing to say is dropped: the API
			// rejects empty parts.
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out); n > 0 && role == engine.RoleUser && out[n-1].Role == engine.RoleUser {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			continue
		}
		out = append(out, &genai.Content{Role: role, Parts: parts})
	}
	return out
}

func resultPayload(r *engine.ToolResult) map[string]any {
	if r.Error == "" {
		return map[string]any{"output": r.Output}
	}
	m := map[string]any{"error": r.Error}
	if r.Output != "" {
		m["output"] = r.Output
	}
	return m
}

// fromResponse reads the first candidate's parts directly. turn numbers the
// synthetic call ids.
func fromResponse(resp *genai.GenerateContentResponse, turn int) (engine.Response, genai.FinishReason, error) {
	var out engine.Response
	if u := resp.UsageMetadata; u != nil {
		cached := int64(u.CachedContentTokenCount)
		out.Usage = engine.Usage{
			InputTokens:  max(int64(u.PromptTokenCount)+int64(u.ToolUsePromptTokenCount)-cached, 0),
			OutputTokens: int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
			CacheRead:    cached,
		}
	}
	if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		if f := resp.PromptFeedback; f != nil && f.BlockReason != "" {
			return out, "", fmt.Errorf("the prompt was blocked (%s): %s", f.BlockReason, f.BlockReasonMessage)
		}
		return out, "", errors.New("the response has no candidates")
	}
	c := resp.Candidates[0]
	out.Turn.Role = engine.RoleModel
	if c.Content != nil {
		for i, gp := range c.Content.Parts {
			if gp == nil {
				continue
			}
			p := engine.Part{Raw: gp, IsThought: gp.Thought, Text: gp.Text}
			if fc := gp.FunctionCall; fc != nil {
				id := fc.ID
				if id == "" {
					id = fmt.Sprintf("call-%d-%d", turn, i)
				}
				args := fc.Args
				if args == nil {
					args = map[string]any{}
				}
				p.Call = &engine.ToolCall{ID: id, Name: fc.Name, Args: args}
			}
			out.Turn.Parts = append(out.Turn.Parts, p)
		}
	}
	if len(out.Turn.Parts) == 0 {
		switch c.FinishReason {
		case "", genai.FinishReasonStop, genai.FinishReasonUnspecified:
			// An empty final answer is still an answer.
		default:
			msg := c.FinishMessage
			if msg == "" {
				msg = "no content"
			}
			return out, c.FinishReason, fmt.Errorf("the model stopped with %s: %s", c.FinishReason, msg)
		}
	}
	return out, c.FinishReason, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// redact removes the key from s.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[REDACTED]")
}

// redactedError shows a redacted message while still unwrapping to the
// SDK's error, so callers can errors.As it into a genai.APIError.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// loggingClient returns a copy of c whose transport logs failed attempts,
// so retries show in the log. Headers (the key) are never logged.
func loggingClient(c *http.Client, log *slog.Logger) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = &logTransport{base: base, log: log}
	return &cp
}

type logTransport struct {
	base http.RoundTripper
	log  *slog.Logger
}

func (t *logTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	switch {
	case err != nil && r.Context().Err() == nil:
		t.log.Warn("gemini request failed", "path", r.URL.Path, "err", err)
	case err == nil && resp.StatusCode >= 300:
		t.log.Warn("gemini request failed", "path", r.URL.Path, "status", resp.StatusCode)
	}
	return resp, err
}
