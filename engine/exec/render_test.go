package exec_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	execengine "github.com/swarmhq/swarm/engine/exec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/streams")

// TestRender renders each recorded session log; the .golden files are the
// expected text (go test -run TestRender -update rewrites them).
func TestRender(t *testing.T) {
	logs, err := filepath.Glob(filepath.Join("testdata", "streams", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no logs: %v", err)
	}
	for _, path := range logs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			log, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !execengine.IsExecLog(log) {
				t.Fatalf("%s is not recognised as an exec session log", path)
			}
			got := execengine.Render(log)
			golden := strings.TrimSuffix(path, ".log") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rendered %s differs from %s:\n%s", path, golden, got)
			}
			// Written a byte at a time (as swarm logs -f reads it), it
			// renders the same.
			var b bytes.Buffer
			r := execengine.NewRenderer(&b)
			for i := range log {
				if _, err := r.Write(log[i : i+1]); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), got) {
				t.Errorf("byte-at-a-time rendering differs:\n%s", b.Bytes())
			}
		})
	}
}

func TestRenderKeepsOtherLines(t *testing.T) {
	in := "=== session 1 of a · engine x · exec sh\nplain text\n{\"not\":\"an event\"}\n{\"type\":\"mystery\"}\n{broken json\nno newline"
	want := "=== session 1 of a · engine x · exec sh\nplain text\n{\"not\":\"an event\"}\n{\"type\":\"mystery\"}\n{broken json\nno newline\n"
	if got := string(execengine.Render([]byte(in))); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if execengine.IsExecLog([]byte("# session 1 of a on gemini\n=== session 1 of a · engine gemini · mode code\n")) {
		t.Fatal("an in-process engine's log taken for an exec log")
	}
	if !execengine.IsExecLog([]byte("# session 1 of a on x\n=== session 1 of a · engine x · exec sh\n")) {
		t.Fatal("an exec log after the supervisor's line not recognised")
	}
}

// A shell command reads in swarm logs as the CLI ran it: <, > and & are
// not HTML-escaped (\u003e, \u0026).
func TestRenderShowsCommandsAsTyped(t *testing.T) {
	in := `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"go test ./... > out.txt 2>&1 && echo <ok>"}}]}}` + "\n"
	got := string(execengine.Render([]byte(in)))
	if !strings.Contains(got, `→ Bash {"command":"go test ./... > out.txt 2>&1 && echo <ok>"}`) {
		t.Fatalf("the command is not shown as typed:\n%s", got)
	}
}
