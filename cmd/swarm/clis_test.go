package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestRealCLIJourneys runs testdata/clis: swarm up with the real agent
// CLIs (make presets installs them) through their presets, against local
// fake model servers. Set SWARM_TEST_CLIS=1 with the CLIs on PATH.
func TestRealCLIJourneys(t *testing.T) {
	if os.Getenv("SWARM_TEST_CLIS") != "1" {
		t.Skip("set SWARM_TEST_CLIS=1 (make presets does) to run the real CLIs against local fake APIs")
	}
	if _, err := exec.LookPath("claude"); err != nil {
		t.Fatal("claude is not on PATH: make presets installs it")
	}
	anthropic := newFakeAnthropic(t)
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "clis"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			if err := setupRepo(env); err != nil {
				return err
			}
			env.Setenv("FAKE_ANTHROPIC_URL", anthropic.URL)
			env.Setenv("PATH", os.Getenv("PATH")+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":        cmdJSONQ,
			"waitstate":    cmdWaitState,
			"sessionprocs": cmdSessionProcs,
			// anthropic <agent> <field>: what the fake Anthropic API saw from
			// an agent's requests, on stdout: "model", "tools" (one per
			// line) or "requests" (how many).
			"anthropic": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 || neg {
					ts.Fatalf("usage: anthropic <agent> model|tools|requests")
				}
				reqs := anthropic.from(args[0])
				switch args[1] {
				case "requests":
					fmt.Fprintf(ts.Stdout(), "%d\n", len(reqs))
				case "model":
					for _, r := range reqs {
						fmt.Fprintln(ts.Stdout(), r.Model)
					}
				case "tools":
					if len(reqs) > 0 {
						fmt.Fprintln(ts.Stdout(), strings.Join(reqs[0].Tools, "\n"))
					}
				}
			},
		},
	})
}

// fakeAnthropic is the Messages API as Claude Code streams it: a request
// that carries no tool result yet is answered with a call to Bash when it
// holds RUN-BASH[<command>] and offers Bash, else with a call to
// mcp__swarm__send_message when it offers that; any other with "done". Every answer reports
// 100 input, 20 cache-write and 30 cache-read tokens, and 7 (a call) or 5
// output tokens. Requests are told apart by the agent named in the swarm's
// prompt ("You are <agent>, an LLM coding agent").
type fakeAnthropic struct {
	*httptest.Server
	mu   sync.Mutex
	reqs map[string][]anthropicRequest
}

type anthropicRequest struct {
	Model string
	Tools []string
}

// bashRE finds RUN-BASH[<command>] in a request (the mail in the prompt):
// the fake then calls Claude Code's Bash tool with that command.
var bashRE = regexp.MustCompile(`RUN-BASH\[([^\]]*)\]`)

// swarmAgentRE finds the agent in its prompt's first line (section 1).
var swarmAgentRE = regexp.MustCompile(`You are ([a-z][a-z0-9-]*), an LLM coding agent in a swarm`)

func newFakeAnthropic(t *testing.T) *fakeAnthropic {
	f := &fakeAnthropic{reqs: map[string][]anthropicRequest{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAnthropic) from(agent string) []anthropicRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs[agent])
}

func (f *fakeAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not here"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model string `json:"model"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	agent := "?"
	if m := swarmAgentRE.FindSubmatch(body); m != nil {
		agent = string(m[1])
	}
	var tools []string
	for _, tool := range req.Tools {
		tools = append(tools, tool.Name)
	}
	answered := len(req.Messages) > 0 && strings.Contains(string(req.Messages[len(req.Messages)-1].Content), `"tool_result"`)
	f.mu.Lock()
	f.reqs[agent] = append(f.reqs[agent], anthropicRequest{Model: req.Model, Tools: tools})
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 30}}})
	call := slices.Contains(tools, "mcp__swarm__send_message") && !answered
	bash := bashRE.FindSubmatch(body)
	if bash != nil && slices.Contains(tools, "Bash") && !answered {
		call = true
		input, _ := json.Marshal(map[string]any{"command": string(bash[1]), "description": "run it"})
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_fake", "name": "Bash", "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else if call {
		input, _ := json.Marshal(map[string]any{"to": "operator", "body": "hello from " + agent + " through MCP"})
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_fake", "name": "mcp__swarm__send_message", "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	stop, out := "end_turn", 5
	if call {
		stop, out = "tool_use", 7
	}
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
