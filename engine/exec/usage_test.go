package exec_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
)

// stdoutOf is a recorded session log without swarm's own "=== " lines and
// the CLIs' stderr: what the meter reads.
func stdoutOf(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "streams", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "WARNING: ") && !strings.HasPrefix(l, "Error: ") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, ""))
}

func TestMeter(t *testing.T) {
	cases := []struct {
		file  string
		want  engine.Usage
		steps []engine.Usage // the increments reported, in order
		turns int
	}{
		// The result also carries the session's cost (total_cost_usd),
		// which only it reports, and its turns (num_turns).
		{file: "claude.log", turns: 4, want: engine.Usage{InputTokens: 432, OutputTokens: 335, CacheWrite: 5520, CacheRead: 61036, CostUSD: 0.0412, Costed: true}, steps: []engine.Usage{
			{InputTokens: 4, OutputTokens: 8, CacheWrite: 5120, CacheRead: 11264},
			{OutputTokens: 88}, // the same message, grown
			{InputTokens: 6, OutputTokens: 120, CacheWrite: 310, CacheRead: 16384},
			{InputTokens: 6, OutputTokens: 64, CacheRead: 16694},
			{InputTokens: 6, OutputTokens: 30, CacheWrite: 90, CacheRead: 16694},
			{InputTokens: 410, OutputTokens: 25, CostUSD: 0.0412, Costed: true}, // the result's helper model, and the cost
		}},
		{file: "codex.log", turns: 1, want: engine.Usage{InputTokens: 315, OutputTokens: 122, CacheRead: 24448}, steps: []engine.Usage{
			{InputTokens: 315, OutputTokens: 122, CacheRead: 24448},
		}},
		{file: "codex-failed.log"},
		{file: "gemini.log", want: engine.Usage{InputTokens: 4554, OutputTokens: 530, CacheRead: 4096}, steps: []engine.Usage{
			{InputTokens: 4554, OutputTokens: 530, CacheRead: 4096},
		}},
		{file: "gemini-json.log", want: engine.Usage{InputTokens: 3500, OutputTokens: 250, CacheRead: 4000}, steps: []engine.Usage{
			{InputTokens: 3500, OutputTokens: 250, CacheRead: 4000}, // at the end
		}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			in := stdoutOf(t, c.file)
			for _, chunk := range []int{len(in) + 1, 7, 1} {
				var steps []engine.Usage
				m := execengine.NewMeter(func(u engine.Usage) { steps = append(steps, u) })
				for b := in; len(b) > 0; {
					n := min(chunk, len(b))
					if _, err := m.Write(b[:n]); err != nil {
						t.Fatal(err)
					}
					b = b[n:]
				}
				if got := m.Usage(); got != c.want {
					t.Errorf("chunks of %d: usage = %+v, want %+v", chunk, got, c.want)
				}
				if got := m.Turns(); got != c.turns {
					t.Errorf("chunks of %d: turns = %d, want %d (what the CLI reported)", chunk, got, c.turns)
				}
				if !slices.Equal(steps, c.steps) {
					t.Errorf("chunks of %d: increments = %+v\nwant %+v", chunk, steps, c.steps)
				}
			}
		})
	}
}

func TestMeterLastLineWithoutNewline(t *testing.T) {
	m := execengine.NewMeter(nil)
	_, _ = m.Write([]byte(`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3}}`))
	if got := m.Usage(); got != (engine.Usage{InputTokens: 6, OutputTokens: 3, CacheRead: 4}) {
		t.Fatalf("usage = %+v", got)
	}
}

func TestUsageWork(t *testing.T) {
	u := engine.Usage{InputTokens: 10, OutputTokens: 20, CacheWrite: 30, CacheRead: 1000}
	if u.Work() != 60 || u.Total() != 60 {
		t.Fatalf("work %d total %d, want 60: cache reads do not count", u.Work(), u.Total())
	}
}

// A session's result carries the usage its stream reported, and OnUsage saw
// all of it as it came.
func TestRunReportsUsage(t *testing.T) {
	fixture := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(fixture, stdoutOf(t, "claude.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := mustNew(t, execengine.Options{Name: "rec", Command: []string{"cat", fixture}})
	s := newSession(t, "hi")
	var mu sync.Mutex
	var sum engine.Usage
	s.OnUsage = func(u engine.Usage) {
		mu.Lock()
		defer mu.Unlock()
		sum = sum.Add(u)
	}
	res := e.Run(context.Background(), s.Session)
	want := engine.Usage{InputTokens: 432, OutputTokens: 335, CacheWrite: 5520, CacheRead: 61036, CostUSD: 0.0412, Costed: true}
	if res.Outcome != engine.Success || res.Usage != want || res.Turns != 4 {
		t.Fatalf("result %+v, want usage %+v and the CLI's 4 turns", res, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if sum != want {
		t.Fatalf("OnUsage summed to %+v, want %+v", sum, want)
	}
	if !strings.Contains(s.log.String(), "=== end: success · tokens 432 in, 335 out, cache 5520 written, 61036 read, cost $0.0412\n") {
		t.Fatalf("the log's end line has no usage:\n%s", s.log.String())
	}
}
