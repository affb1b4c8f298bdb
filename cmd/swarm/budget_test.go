package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/engine/gemini/geminitest"
)

// TestBudgetScripts runs the budget journeys in testdata/budget against a
// fake Gemini server that never finishes: every answer is one more tool
// call costing 800 work tokens (700 prompt, 100 output), so only the
// budget ends a session.
func TestBudgetScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts supervisors")
	}
	fake := geminitest.New(t)
	fake.HandleFunc(func(r *geminitest.Request) geminitest.Reply {
		reply := geminitest.Call("list_files", map[string]any{"path": "."})
		resp := reply.Body.(geminitest.Response)
		resp.UsageMetadata = &geminitest.UsageMetadata{PromptTokenCount: 700, CandidatesTokenCount: 100, TotalTokenCount: 800}
		reply.Body = resp
		return reply
	})
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "budget"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			if err := setupRepo(env); err != nil {
				return err
			}
			env.Setenv("FAKE_GEMINI_URL", fake.URL)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitstate": cmdWaitState,
			// requests N: the fake model has been asked exactly N times.
			"requests": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: requests <n>")
				}
				if got := len(fake.Requests()); strconv.Itoa(got) != args[0] {
					ts.Fatalf("the fake model got %d requests, want %s", got, args[0])
				}
			},
		},
	})
}
