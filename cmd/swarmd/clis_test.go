package main

import (
	"context"
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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/internal/fakeapi"
)

// TestRealCLIJourneys runs testdata/clis: swarm up with the real agent
// CLIs (make presets installs them) through their presets, against local
// fake model servers: Anthropic's for claude, OpenAI's Responses API for
// codex, Gemini's for gemini-cli (internal/fakeapi). Set SWARM_TEST_CLIS=1
// with the CLIs on PATH. make presets runs it as root and as a user that
// is not (gemini-cli treats root differently). The fakes' request logs are
// printed at the end: the evidence that each CLI called swarm's tool.
func TestRealCLIJourneys(t *testing.T) {
	if os.Getenv("SWARM_TEST_CLIS") != "1" {
		t.Skip("set SWARM_TEST_CLIS=1 (make presets does) to run the real CLIs against local fake APIs")
	}
	for _, cli := range []string{"claude", "codex", "gemini"} {
		if _, err := exec.LookPath(cli); err != nil {
			t.Fatalf("%s is not on PATH: make presets installs it", cli)
		}
	}
	anthropic := newFakeAnthropic(t)
	openai := fakeapi.NewOpenAI(t)
	gemini := fakeapi.NewGemini(t)
	t.Cleanup(func() {
		t.Logf("uid %d: the fake OpenAI API's requests (codex):\n%s", os.Geteuid(), openai.Log())
		t.Logf("uid %d: the fake Gemini API's requests (gemini-cli):\n%s", os.Geteuid(), gemini.Log())
	})
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "clis"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			if err := setupRepo(env); err != nil {
				return err
			}
			env.Setenv("FAKE_ANTHROPIC_URL", anthropic.URL)
			env.Setenv("FAKE_GEMINI_URL", gemini.URL)
			// codex reaches the fake through a model provider of its
			// config (its built-in OpenAI provider takes a WebSocket).
			codexHome := filepath.Join(env.WorkDir, "codex-home")
			if err := os.MkdirAll(codexHome, 0o700); err != nil {
				return err
			}
			config := fmt.Sprintf(`model_provider = "fake"
check_for_update_on_startup = false
[model_providers.fake]
name = "fake"
base_url = %q
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, openai.URL+"/v1")
			if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
				return err
			}
			env.Setenv("CODEX_HOME", codexHome)
			env.Setenv("PATH", os.Getenv("PATH")+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":        cmdJSONQ,
			"sessionprocs": cmdSessionProcs,
			// waitstate as in the up scripts, with more time: two real
			// CLIs start at once (node, MCP servers, a probe), on a
			// loaded machine in 10-30 s each.
			"waitstate": cmdWaitCLIState,
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
			// fakeapi openai|gemini <agent> <field>: the same for the other
			// fakes, plus "calls" (the tools their answers called, one
			// per line) and "log" (every request of the agent).
			"fakeapi": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 3 || neg {
					ts.Fatalf("usage: fakeapi openai|gemini <agent> model|tools|requests|calls|log")
				}
				srv := map[string]*fakeapi.Server{"openai": openai, "gemini": gemini}[args[0]]
				if srv == nil {
					ts.Fatalf("no fake API %q", args[0])
				}
				reqs := srv.From(args[1])
				for i, r := range reqs {
					switch args[2] {
					case "requests":
						if i == 0 {
							fmt.Fprintf(ts.Stdout(), "%d\n", len(reqs))
						}
					case "model":
						fmt.Fprintln(ts.Stdout(), r.Model)
					case "tools":
						// The request that called the tool offered the
						// session's tools (gemini-cli's router asks first,
						// with none).
						if r.Called != "" {
							fmt.Fprintln(ts.Stdout(), strings.Join(r.Tools, "\n"))
						}
					case "calls":
						if r.Called != "" {
							fmt.Fprintln(ts.Stdout(), r.Called)
						}
					case "log":
						fmt.Fprintln(ts.Stdout(), r)
					}
				}
				if len(reqs) == 0 && args[2] == "requests" {
					fmt.Fprintln(ts.Stdout(), 0)
				}
			},
		},
	})
}

// cliWaitLimit bounds a real CLI journey's waits.
const cliWaitLimit = 3 * time.Minute

// cmdWaitCLIState is waitstate <agent> <state> [session_seq] with
// cliWaitLimit.
func cmdWaitCLIState(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || len(args) > 3 || neg {
		ts.Fatalf("usage: waitstate <agent> <state> [session_seq]")
	}
	st := openScriptStore(ts)
	defer st.Close()
	deadline := time.Now().Add(cliWaitLimit)
	last := ""
	for time.Now().Before(deadline) {
		a, err := st.Agent(context.Background(), args[0])
		if err == nil {
			if string(a.State) == args[1] && (len(args) < 3 || strconv.FormatInt(a.SessionSeq, 10) == args[2]) {
				return
			}
			last = fmt.Sprintf("%s session %d", a.State, a.SessionSeq)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("timed out after %s waiting for %s in %s (last seen: %s)", cliWaitLimit, args[0], args[1], last)
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
