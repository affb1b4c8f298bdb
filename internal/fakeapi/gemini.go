package fakeapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// NewGemini is the Gemini API as gemini-cli calls it with an API key:
// POST /v1beta/models/<model>:streamGenerateContent?alt=sse, answered
// with one server-sent event (a functionCall or text, and the
// usageMetadata); generateContent gets the same answer as one JSON
// document (a request for JSON gets "{}"-shaped text), and countTokens a
// count. Point gemini-cli at it with GOOGLE_GEMINI_BASE_URL and the
// gemini-api-key auth type in its settings.
func NewGemini(t testing.TB) *Server {
	return newServer(t, "gemini", serveGemini)
}

func serveGemini(s *Server, w http.ResponseWriter, r *http.Request, body []byte) Request {
	_, modelOp, _ := strings.Cut(r.URL.Path, "/models/")
	model, op, _ := strings.Cut(modelOp, ":")
	if r.Method != http.MethodPost || model == "" {
		notFound(w)
		return Request{Status: http.StatusNotFound}
	}
	out := Request{Model: model, Status: http.StatusOK}
	if op == "countTokens" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"totalTokens": 100}`))
		return out
	}
	if op != "streamGenerateContent" && op != "generateContent" {
		notFound(w)
		out.Status = http.StatusNotFound
		return out
	}
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseMimeType string `json:"responseMimeType"`
		} `json:"generationConfig"`
	}
	_ = json.Unmarshal(body, &req)
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			out.Tools = append(out.Tools, f.Name)
		}
	}
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if len(p.FunctionResponse) > 0 {
				out.Result = true
				var fr struct {
					Response struct {
						Error json.RawMessage `json:"error"`
					} `json:"response"`
				}
				if json.Unmarshal(p.FunctionResponse, &fr) == nil && len(fr.Response.Error) > 0 {
					out.ResultError = string(fr.Response.Error)
				}
			}
		}
	}
	out.Agent = "?"
	if m := agentRE.FindSubmatch(body); m != nil {
		out.Agent = string(m[1])
	}
	if !out.Result {
		out.Called = callTool(out.Tools)
	}

	var part map[string]any
	outTokens := Output
	switch {
	case out.Called != "":
		part = map[string]any{"functionCall": map[string]any{"name": out.Called, "args": message(out.Agent)}}
		outTokens = OutputCall
	case req.GenerationConfig.ResponseMimeType == "application/json":
		// gemini-cli's own helper calls (the next-speaker check, the
		// model router) ask for JSON: the user speaks next, on the
		// default model.
		part = map[string]any{"text": `{"reasoning":"fake","next_speaker":"user","model_choice":"flash","complexity_reasoning":"fake","complexity_score":1}`}
	default:
		part = map[string]any{"text": "done"}
	}
	answer := map[string]any{
		"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP",
			"content": map[string]any{"role": "model", "parts": []any{part}}}},
		"usageMetadata": map[string]any{"promptTokenCount": Input, "cachedContentTokenCount": Cached,
			"candidatesTokenCount": outTokens, "totalTokenCount": Input + outTokens},
		"modelVersion": model,
		"responseId":   "resp_fake",
	}
	if op == "generateContent" {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(answer)
		_, _ = w.Write(b)
		return out
	}
	sse(w)("", answer)
	return out
}
