package deptest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartupStaysLean runs the real binary's `swarm version` with
// GODEBUG=inittrace=1 and holds every package initialiser to its budget
// (startup.go). It uses $SWARM_BIN when set, else builds one as `make
// build` does.
func TestStartupStaysLean(t *testing.T) {
	bin := os.Getenv("SWARM_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "swarm")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, Module+"/cmd/swarm")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("swarm version: %v\n%s", err, stderr.String())
	}
	inits, err := ParseInitTrace(&stderr)
	if err != nil {
		t.Fatal(err)
	}
	// A binary has hundreds of packages; a handful means the trace was
	// not read, and the check would prove nothing.
	if len(inits) < 50 {
		t.Fatalf("inittrace listed %d initialisers; expected hundreds:\n%s", len(inits), stderr.String())
	}
	for _, v := range CheckStartup(inits) {
		t.Error(v)
	}
}

// TestCatchesHeavyInit shows the check naming a heavy initialiser (one
// compiling schemas in its init, as santhosh-tekuri/jsonschema/v6 did, which
// is no exception any more), an exception past its own ceiling, and a total
// over budget.
func TestCatchesHeavyInit(t *testing.T) {
	trace := `init runtime @0.022 ms, 0.031 ms clock, 0 bytes, 0 allocs
not an init line
init example.com/heavy @7.2 ms, 4.0 ms clock, 1701424 bytes, 21287 allocs
init github.com/santhosh-tekuri/jsonschema/v6 @9.1 ms, 4.4 ms clock, 1900000 bytes, 23000 allocs
init github.com/google/go-cmp/cmp @4.7 ms, 0.22 ms clock, 300000 bytes, 150 allocs
init github.com/swarmhq/swarm/config @15 ms, 0.12 ms clock, 62496 bytes, 900 allocs
`
	inits, err := ParseInitTrace(strings.NewReader(trace))
	if err != nil {
		t.Fatal(err)
	}
	if len(inits) != 5 || inits[1].Bytes != 1701424 || inits[1].Allocs != 21287 {
		t.Fatalf("parsed %+v", inits)
	}
	got := strings.Join(CheckStartup(inits), "\n")
	for _, want := range []string{
		"init example.com/heavy allocates 1701424 bytes",
		"init github.com/santhosh-tekuri/jsonschema/v6 allocates 1900000 bytes",
		"init github.com/google/go-cmp/cmp allocates 300000 bytes",
		"in all, over the budget",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "init github.com/swarmhq/swarm/config") || strings.Contains(got, "init runtime") {
		t.Errorf("flagged an initialiser within budget:\n%s", got)
	}
	lean := []Init{{Pkg: "github.com/google/go-cmp/cmp", Bytes: 178568}, {Pkg: "github.com/google/jsonschema-go/jsonschema", Bytes: 81240}, {Pkg: "a", Bytes: 60000}}
	if v := CheckStartup(lean); len(v) > 0 {
		t.Errorf("lean start-up flagged: %v", v)
	}
}
