package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine/gemini/geminitest"
	"github.com/swarmhq/swarm/repo"
)

// TestBudgetScripts runs the budget journeys in testdata/budget, each
// against its own fake Gemini server that never finishes: every answer is
// one more tool call costing 800 work tokens (700 prompt, 100 output), so
// only the budget ends a session.
func TestBudgetScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts supervisors")
	}
	type fakeKey struct{}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "budget"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			if err := setupRepo(env); err != nil {
				return err
			}
			fake := geminitest.New(t)
			fake.HandleFunc(func(r *geminitest.Request) geminitest.Reply {
				reply := geminitest.Call("list_files", map[string]any{"path": "."})
				resp := reply.Body.(geminitest.Response)
				resp.UsageMetadata = &geminitest.UsageMetadata{PromptTokenCount: 700, CandidatesTokenCount: 100, TotalTokenCount: 800}
				reply.Body = resp
				return reply
			})
			env.Values[fakeKey{}] = fake
			env.Setenv("FAKE_GEMINI_URL", fake.URL)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"door":      cmdDoor,
			"jsonq":     cmdJSONQ,
			"sighup":    cmdSighup,
			"waitstate": cmdWaitState,
			// requests N: the script's fake model has been asked exactly N times.
			"requests": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: requests <n>")
				}
				fake := ts.Value(fakeKey{}).(*geminitest.Server)
				if got := len(fake.Requests()); strconv.Itoa(got) != args[0] {
					ts.Fatalf("the fake model got %d requests, want %s", got, args[0])
				}
			},
		},
	})
}

// cmdSighup sends SIGHUP to the running supervisor (its pid from a ping).
func cmdSighup(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 0 || neg {
		ts.Fatalf("usage: sighup")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := control.Call(ctx, repo.At(ts.MkAbs("."), ""), control.Request{Op: control.OpPing})
	ts.Check(err)
	var d struct {
		Pid int `json:"pid"`
	}
	ts.Check(json.Unmarshal(resp.Data, &d))
	ts.Check(syscall.Kill(d.Pid, syscall.SIGHUP))
}
