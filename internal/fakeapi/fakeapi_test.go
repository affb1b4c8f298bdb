package fakeapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) string {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, res.StatusCode, b)
	}
	return string(b)
}

const prompt = `You are coder, an LLM coding agent in a swarm: a team`

func TestOpenAI(t *testing.T) {
	s := NewOpenAI(t)
	tools := `"tools":[{"type":"function","name":"shell"},{"type":"namespace","name":"mcp__swarm","tools":[{"type":"function","name":"send_message"}]}]`
	out := post(t, s.URL+"/v1/responses", `{"model":"m1","stream":true,`+tools+`,"input":[{"type":"message","content":[{"type":"input_text","text":"`+prompt+`"}]}]}`)
	for _, want := range []string{"event: response.completed", `"type":"function_call"`, `"namespace":"mcp__swarm"`, `"name":"send_message"`, `hello from coder through MCP`, `"cached_tokens":30`} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %s in\n%s", want, out)
		}
	}
	out = post(t, s.URL+"/v1/responses", `{"model":"m1",`+tools+`,"input":[{"type":"message","content":[{"type":"input_text","text":"`+prompt+`"}]},{"type":"function_call_output","call_id":"call_fake","output":"ok"}]}`)
	if !strings.Contains(out, `"text":"done"`) || strings.Contains(out, "function_call\"") {
		t.Fatalf("after the result, text:\n%s", out)
	}
	reqs := s.From("coder")
	if len(reqs) != 2 || reqs[0].Called != "mcp__swarm.send_message" || reqs[0].Model != "m1" || !reqs[1].Result {
		t.Fatalf("%+v", reqs)
	}
	if log := s.Log(); !strings.Contains(log, "agent=coder model=m1 tools=2 mcp=mcp__swarm.send_message -> call mcp__swarm.send_message") {
		t.Fatal(log)
	}
}

func TestGemini(t *testing.T) {
	s := NewGemini(t)
	tools := `"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"mcp_swarm_send_message"}]}]`
	out := post(t, s.URL+"/v1beta/models/g1:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"`+prompt+`"}]}],`+tools+`}`)
	for _, want := range []string{"data: ", `"functionCall":{"args":{"body":"hello from coder through MCP","to":"operator"},"name":"mcp_swarm_send_message"}`, `"cachedContentTokenCount":30`} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %s in\n%s", want, out)
		}
	}
	post(t, s.URL+"/v1beta/models/g1:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"`+prompt+`"}]},{"role":"user","parts":[{"functionResponse":{"name":"mcp_swarm_send_message","response":{"error":{"message":"no"}}}}]}],`+tools+`}`)
	out = post(t, s.URL+"/v1beta/models/lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"route"}]}],"generationConfig":{"responseMimeType":"application/json"}}`)
	if !strings.Contains(out, "next_speaker") {
		t.Fatal(out)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Called != "mcp_swarm_send_message" || reqs[0].Model != "g1" || reqs[1].ResultError == "" || reqs[2].Agent != "?" {
		t.Fatalf("%+v", reqs)
	}
	if log := s.Log(); !strings.Contains(log, "tool_result(error) -> text") {
		t.Fatal(log)
	}
}
