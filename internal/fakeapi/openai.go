package fakeapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// NewOpenAI is OpenAI's Responses API as codex streams it (POST
// /v1/responses with stream: true): server-sent events response.created,
// response.output_item.done with a function_call or a message, and
// response.completed with the usage. Point codex at it with a model
// provider whose base_url is URL + "/v1" and wire_api = "responses".
func NewOpenAI(t testing.TB) *Server {
	return newServer(t, "openai", serveOpenAI)
}

func serveOpenAI(s *Server, w http.ResponseWriter, r *http.Request, body []byte) Request {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		notFound(w)
		return Request{Status: http.StatusNotFound}
	}
	var req struct {
		Model string            `json:"model"`
		Tools []json.RawMessage `json:"tools"`
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	out := Request{Model: req.Model, Status: http.StatusOK}
	for _, raw := range req.Tools {
		out.Tools = append(out.Tools, openAIToolNames(raw, "")...)
	}
	for _, it := range req.Input {
		if it.Type == "function_call_output" {
			out.Result = true
		}
	}
	agent := "?"
	if m := agentRE.FindSubmatch(body); m != nil {
		agent = string(m[1])
	}
	out.Agent = agent
	if !out.Result {
		out.Called = callTool(out.Tools)
	}

	event := sse(w)
	event("response.created", map[string]any{"type": "response.created", "sequence_number": 0,
		"response": map[string]any{"id": "resp_fake", "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}})
	var item map[string]any
	outTokens := Output
	if out.Called != "" {
		args, _ := json.Marshal(message(agent))
		item = map[string]any{"type": "function_call", "id": "fc_fake", "call_id": "call_fake", "status": "completed",
			"name": out.Called, "arguments": string(args)}
		// codex offers MCP tools in a namespace (mcp__swarm) and takes
		// the call back with it.
		if ns, name, ok := strings.Cut(out.Called, "."); ok {
			item["namespace"], item["name"] = ns, name
		}
		outTokens = OutputCall
	} else {
		item = map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "done", "annotations": []any{}}}}
	}
	event("response.output_item.added", map[string]any{"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item})
	event("response.output_item.done", map[string]any{"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item})
	event("response.completed", map[string]any{"type": "response.completed", "sequence_number": 3,
		"response": map[string]any{"id": "resp_fake", "object": "response", "status": "completed", "model": req.Model, "output": []any{item},
			"usage": map[string]any{"input_tokens": Input, "input_tokens_details": map[string]any{"cached_tokens": Cached},
				"output_tokens": outTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": Input + outTokens}}})
	return out
}

// openAIToolNames are the names a tool definition offers: a function's
// name, a namespace's tools as <namespace>.<name>, or a built-in tool's
// type.
func openAIToolNames(raw json.RawMessage, prefix string) []string {
	var tool struct {
		Type  string            `json:"type"`
		Name  string            `json:"name"`
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(raw, &tool) != nil {
		return nil
	}
	if len(tool.Tools) > 0 {
		var out []string
		for _, t := range tool.Tools {
			out = append(out, openAIToolNames(t, prefix+tool.Name+".")...)
		}
		return out
	}
	if tool.Name == "" {
		return []string{prefix + tool.Type}
	}
	return []string{prefix + tool.Name}
}
