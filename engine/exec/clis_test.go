package exec_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/sandbox"
)

// The published CLIs are optional here: each check is skipped when its
// command is not on PATH. To run them:
//
//	npm install --prefix /tmp/cli @google/gemini-cli @anthropic-ai/claude-code @openai/codex
//	PATH=/tmp/cli/node_modules/.bin:$PATH go test ./engine/exec -run CLI -v
//
// TestRealCLIsFailFast also needs SWARM_TEST_CLIS=1: it starts each
// preset's full command line with a fake key against a local fake API.

func presetBinary(t *testing.T, preset string) string {
	t.Helper()
	name := execengine.Presets[preset].Command[0]
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not on PATH (%s)", name, execengine.Presets[preset].Install)
	}
	return path
}

func TestRealCLIVersions(t *testing.T) {
	for _, preset := range config.Presets {
		t.Run(preset, func(t *testing.T) {
			bin := presetBinary(t, preset)
			res, err := proc.Run(context.Background(), proc.Spec{Dir: t.TempDir(), Timeout: time.Minute}, bin, "--version")
			if err != nil {
				t.Fatalf("%s --version: %v", bin, err)
			}
			v := strings.TrimSpace(string(res.Stdout))
			if v == "" {
				t.Fatalf("%s --version printed nothing", bin)
			}
			t.Logf("%s --version: %s", preset, v)
		})
	}
}

// fakeAPI refuses every request with 401 and records the bodies.
type fakeAPI struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, r.Method+" "+r.URL.Path+"\n"+string(b))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"code":401,"type":"authentication_error","message":"invalid api key (fake)","status":"UNAUTHENTICATED"}}`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) saw(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bodies {
		if strings.Contains(b, s) {
			return true
		}
	}
	return false
}

func TestRealCLIsFailFast(t *testing.T) {
	if os.Getenv("SWARM_TEST_CLIS") != "1" {
		t.Skip("set SWARM_TEST_CLIS=1 to start the real CLIs against a local fake API")
	}
	for _, preset := range config.Presets {
		for _, run := range []string{config.PromptStdin, config.PromptArg, config.PromptStdin + "-sandboxed"} {
			prompt, boxed := strings.CutSuffix(run, "-sandboxed")
			t.Run(preset+"/"+run, func(t *testing.T) {
				presetBinary(t, preset)
				api := newFakeAPI(t)
				home := t.TempDir()
				var args, env []string
				switch preset {
				case "claude":
					env = []string{"ANTHROPIC_API_KEY=sk-ant-fake", "ANTHROPIC_BASE_URL=" + api.URL,
						"CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
				case "codex":
					env = []string{"OPENAI_API_KEY=sk-fake", "CODEX_HOME=" + home}
					args = []string{"-c", "model_provider=fake", "-c", "check_for_update_on_startup=false", "-c",
						`model_providers.fake={name="fake",base_url="` + api.URL + `/v1",env_key="OPENAI_API_KEY",wire_api="responses",request_max_retries=0,stream_max_retries=0}`}
				case "gemini-cli":
					// GOOGLE_GEMINI_BASE_URL alone selects gemini-cli's
					// "gateway" auth, which it then refuses; the setting
					// keeps it on the API key.
					settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false},"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false}}`
					if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
						t.Fatal(err)
					}
					env = []string{"GEMINI_API_KEY=fake", "GOOGLE_GEMINI_BASE_URL=" + api.URL}
				}
				e := mustNew(t, execengine.Options{Name: preset, Preset: preset, Args: args, Prompt: prompt, Env: env})
				// The stdin runs also pass a model, which must reach the API.
				var model string
				if prompt == config.PromptStdin {
					model = "swarm-test-model-" + preset
				}

				marker := "PINEAPPLE-" + strings.ToUpper(preset) + "-" + strings.ToUpper(prompt)
				s := newSession(t, "Reply with the word "+marker+".")
				if out, err := exec.Command("git", "init", "-q", s.Worktree).CombinedOutput(); err != nil {
					t.Fatalf("git init: %v\n%s", err, out)
				}
				var base []string
				for _, kv := range os.Environ() {
					if k, _, _ := strings.Cut(kv, "="); !engine.IsSecretName(k) && k != "HOME" {
						base = append(base, kv)
					}
				}
				s.Env = engine.SessionEnv(append(base, "HOME="+home), s.Session)
				s.Timeout = 2 * time.Minute
				s.Model = model
				if boxed {
					// The CLI in a session's bubblewrap (DESIGN §13.3):
					// its home read-only but for its own state directory.
					d, err := sandbox.Decide(context.Background(), sandbox.Bwrap, func(string) string { return "" })
					if err != nil {
						t.Skipf("bubblewrap is not usable here: %v", err)
					}
					box, err := sandbox.New(sandbox.Spec{Bwrap: d.Bwrap, Root: s.Root, Worktree: s.Worktree, Home: home,
						Path: os.Getenv("PATH"), TmpDir: t.TempDir(), Name: "alice-3"})
					if err != nil {
						t.Fatal(err)
					}
					defer box.Close()
					s.Sandbox = box
				}

				res := e.Run(context.Background(), s.Session)
				log := s.log.String()
				if res.Outcome != engine.Failed {
					t.Fatalf("result = %+v, want Failed on the rejected key\n%s", res, log)
				}
				if !api.saw(marker) {
					t.Fatalf("the fake API never got the prompt; result %v\n%s", res.Err, log)
				}
				if !strings.Contains(log, `=== mcp: swarm mcp registered as "swarm"`) {
					t.Fatalf("the session registered no MCP server\n%s", log)
				}
				if model != "" && !api.saw(model) {
					t.Fatalf("the fake API never saw the model %s; result %v\n%s", model, res.Err, log)
				}
				t.Logf("%s: %v", preset, res.Err)
			})
		}
	}
}
