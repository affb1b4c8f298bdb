package deptest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartupStaysLean runs each real binary's `version` with
// GODEBUG=inittrace=1 and holds every package initialiser to the binary's
// budget (startup.go). It uses the binaries beside $SWARM_BIN (the front)
// when set, else builds them as `make build` does.
func TestStartupStaysLean(t *testing.T) {
	dir := ""
	if bin := os.Getenv("SWARM_BIN"); bin != "" {
		dir = filepath.Dir(bin)
	} else {
		dir = t.TempDir()
		build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", dir+"/", Module+"/cmd/swarm", Module+"/cmd/swarmd")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	for _, b := range Startups {
		t.Run(filepath.Base(b.Pkg), func(t *testing.T) {
			bin := filepath.Join(dir, filepath.Base(b.Pkg))
			cmd := exec.Command(bin, "version")
			cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s version: %v\n%s", bin, err, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), "swarm ") {
				t.Fatalf("%s version printed %q", bin, stdout.String())
			}
			inits, err := ParseInitTrace(&stderr)
			if err != nil {
				t.Fatal(err)
			}
			// A few lines mean the trace was not read, and the check
			// would prove nothing.
			if len(inits) < b.MinInits {
				t.Fatalf("inittrace listed %d initialisers; expected at least %d:\n%s", len(inits), b.MinInits, stderr.String())
			}
			for _, v := range CheckStartup(b, inits) {
				t.Error(v)
			}
		})
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
	front, swarmd := Startups[0], Startups[1]
	got := strings.Join(CheckStartup(swarmd, inits), "\n")
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
	if v := CheckStartup(swarmd, lean); len(v) > 0 {
		t.Errorf("lean start-up flagged: %v", v)
	}
	// The front allows no exception: go-cmp, which swarmd may link, is
	// over its budget there, and so is the total.
	got = strings.Join(CheckStartup(front, lean), "\n")
	if !strings.Contains(got, "init github.com/google/go-cmp/cmp allocates 178568 bytes") || !strings.Contains(got, "keep the package out of cmd/swarm") || !strings.Contains(got, "cmd/swarm's initialisers allocate") {
		t.Errorf("the front's budget let go-cmp in:\n%s", got)
	}
}
