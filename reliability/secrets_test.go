//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/engine/gemini/geminitest"
)

// TestR5Secrets runs a real gemini session through `swarm up` against the
// fake Gemini API with GEMINI_API_KEY=sk-test-SECRET. The fake asks for a
// bash `env` call. The key must reach the API (or the test proves nothing)
// and nothing else: not the tool's environment, the database, the logs, the
// stored prompt, the worktree or the supervisor's output.
func TestR5Secrets(t *testing.T) {
	const key = "sk-test-SECRET"
	const token = "tok-test-SECRET" // any *_TOKEN is scrubbed too
	srv := geminitest.New(t)
	srv.HandleFunc(func(r *geminitest.Request) geminitest.Reply {
		if len(r.FunctionResponses()) == 0 {
			return geminitest.Call("bash", map[string]any{"command": "env; env > env-seen.txt"})
		}
		return geminitest.Text("I looked at the environment. Done.")
	})
	h := newHarness(t, swarmConfig{agents: []string{"alice"}, engine: "gemini", toml: "[liveness]\nnudge_after = \"0s\"\n"})
	h.extra = []string{"GEMINI_API_KEY=" + key, "GOOGLE_GEMINI_BASE_URL=" + srv.URL, "DEPLOY_TOKEN=" + token}
	up := h.up()
	st := h.store([]string{"alice"})
	defer st.Close()
	ctx := context.Background()
	h.waitFor(60*time.Second, "alice's first session to complete", func() (bool, error) {
		if up.exited() {
			t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
		}
		s, err := st.Session(ctx, "alice", 1)
		if err != nil {
			return false, nil
		}
		if s.State != "running" && s.State != "completed" {
			t.Fatalf("alice's session 1 ended %s: %s\n%s", s.State, s.Error, tail(up.output(), 3000))
		}
		return s.State == "completed", nil
	})
	up.interrupt(t)

	reqs := srv.Requests()
	if len(reqs) < 2 {
		t.Fatalf("the fake API got %d requests, want the bash call and its result", len(reqs))
	}
	var envOut string
	for _, r := range reqs {
		if r.APIKey != key {
			t.Fatalf("request %d carried API key %q, want %q: the test would prove nothing", r.N, r.APIKey, key)
		}
		for _, fr := range r.FunctionResponses() {
			envOut += fmt.Sprint(fr.Response)
		}
	}
	if !strings.Contains(envOut, "SWARM_AGENT=alice") {
		t.Fatalf("the bash tool's output does not look like env:\n%s", envOut)
	}
	for _, s := range []string{key, token, "GEMINI_API_KEY", "DEPLOY_TOKEN"} {
		if strings.Contains(envOut, s) {
			t.Errorf("the tool process saw %q in its environment", s)
		}
	}
	seen, err := os.ReadFile(filepath.Join(h.root, ".swarm", "worktrees", "alice", "env-seen.txt"))
	if err != nil || !bytes.Contains(seen, []byte("SWARM_SESSION_SEQ=1")) {
		t.Fatalf("env-seen.txt: %v\n%s", err, seen)
	}

	var prompts int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE instr(prompt, ?) > 0`, key).Scan(&prompts); err != nil {
		t.Fatal(err)
	}
	if prompts > 0 {
		t.Errorf("%d stored prompts contain the key", prompts)
	}
	// Every file of the repository: the database and its WAL, the logs,
	// the stored state, the worktree and the tool's own output file.
	files := 0
	err = filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, s := range []string{key, token} {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s contains %q", p, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(up.output(), key) {
		t.Errorf("swarm up's output contains the key")
	}
	t.Logf("the key reached the API in %d requests and none of %d files, the stored prompt, the tool's environment or the output", len(reqs), files)
}
