package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/internal/gittest"
)

// The front's journeys run the real binaries, built as `make build` does
// (every swarmd journey in cmd/swarmd goes through this front too).

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "swarm-front-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", dir+"/", "github.com/swarmhq/swarm/cmd/swarm", "github.com/swarmhq/swarm/cmd/swarmd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build (the front's tests need go on PATH): %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of a binary.
type result struct {
	stdout, stderr string
	code           int
}

// runBin runs bin with args in dir, with env over a clean environment
// (PATH without any other swarm) and stdin.
func runBin(t *testing.T, bin, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s %v: %v", bin, args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// newRepo is a git repository with one commit and `swarm init` run in it,
// with one scripted agent.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := gittest.Repo(t, nil)
	if r := runBin(t, filepath.Join(binDir, "swarm"), dir, "", nil, "init"); r.code != 0 {
		t.Fatalf("swarm init: %+v", r)
	}
	toml := "[defaults]\nengine = \"script\"\n[liveness]\nnudge_after = \"0s\"\n[[agent]]\nname = \"backend\"\n"
	if err := os.WriteFile(filepath.Join(dir, "swarm.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lonely is a copy of the front in a directory of its own, with no swarmd
// beside it or on PATH: whatever it does, it did without swarmd.
func lonely(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, "swarm"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "swarm")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVersionIsSwarmds: the front prints the version line itself, the
// line swarmd prints, and hands `version --json` over.
func TestVersionIsSwarmds(t *testing.T) {
	dir := t.TempDir()
	front := runBin(t, lonely(t), dir, "", nil, "version")
	whole := runBin(t, filepath.Join(binDir, "swarmd"), dir, "", nil, "version")
	if front.code != 0 || front.stdout != whole.stdout || !strings.HasPrefix(front.stdout, "swarm ") {
		t.Fatalf("front %+v, swarmd %+v", front, whole)
	}
	j := runBin(t, filepath.Join(binDir, "swarm"), dir, "", nil, "version", "--json")
	var v map[string]string
	if err := json.Unmarshal([]byte(j.stdout), &v); err != nil || v["version"] == "" {
		t.Fatalf("swarm version --json through swarmd: %+v (%v)", j, err)
	}
}

// TestWithoutSwarmd: a command the front hands over, with no swarmd to
// hand it to, fails with exit 1, naming what to install; nothing ran.
func TestWithoutSwarmd(t *testing.T) {
	dir := newRepo(t)
	r := runBin(t, lonely(t), dir, "", nil, "status")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "swarm: no swarmd: swarm hands this command to swarmd") || !strings.Contains(r.stderr, "go install github.com/swarmhq/swarm/cmd/swarm@latest github.com/swarmhq/swarm/cmd/swarmd@latest") {
		t.Fatalf("%+v", r)
	}
	// With no supervisor, a send is swarmd's too: refused, not lost.
	r = runBin(t, lonely(t), dir, "", nil, "send", "backend", "hello")
	if r.code != 1 || !strings.Contains(r.stderr, "no swarmd") {
		t.Fatalf("%+v", r)
	}
}

// TestHandOffKeepsCodesAndStdin: swarmd runs in the front's place with the
// same arguments, streams and exit codes, and a message the front read
// from stdin before finding no supervisor reaches swarmd whole.
func TestHandOffKeepsCodesAndStdin(t *testing.T) {
	dir := newRepo(t)
	swarm := filepath.Join(binDir, "swarm")
	if r := runBin(t, swarm, dir, "", nil, "send"); r.code != 2 || !strings.Contains(r.stderr, "swarm: ") {
		t.Fatalf("usage error through the front: %+v", r)
	}
	if r := runBin(t, swarm, dir, "", nil, "bogus"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "bogus"`) {
		t.Fatalf("unknown command through the front: %+v", r)
	}
	body := strings.Repeat("line of a long message\n", 4000) // past a pipe's buffer
	r := runBin(t, swarm, dir, body, nil, "send", "backend", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "sent #1 to backend") {
		t.Fatalf("send - with no supervisor: %+v", r)
	}
	r = runBin(t, swarm, dir, "", nil, "inbox", "backend", "--json")
	var msgs []struct{ Body string }
	if err := json.Unmarshal([]byte(r.stdout), &msgs); err != nil || len(msgs) != 1 || msgs[0].Body != strings.TrimRight(body, "\n") && msgs[0].Body != body {
		t.Fatalf("inbox after send -: %v %+v", err, r)
	}
}

// TestSendToARunningSwarmNeedsNoSwarmd: with a supervisor running, the
// front answers the operator's send itself, through the supervisor's
// socket (a front with no swarmd anywhere sends it), and the supervisor
// stores it as the operator's.
func TestSendToARunningSwarmNeedsNoSwarmd(t *testing.T) {
	dir := newRepo(t)
	swarm := filepath.Join(binDir, "swarm")
	if r := runBin(t, swarm, dir, "", nil, "up", "-d"); r.code != 0 {
		t.Fatalf("swarm up -d: %+v", r)
	}
	t.Cleanup(func() { runBin(t, swarm, dir, "", nil, "down") })
	lone := lonely(t)
	r := runBin(t, lone, dir, "", nil, "send", "backend", "from the front", "--urgent")
	if r.code != 0 || !strings.Contains(r.stdout, "sent urgent #1 to backend") {
		t.Fatalf("send through the supervisor: %+v", r)
	}
	r = runBin(t, lone, dir, "piped body", nil, "send", "backend", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "sent #2 to backend") {
		t.Fatalf("send - through the supervisor: %+v", r)
	}
	// Its errors are the command's, with its exit code.
	r = runBin(t, lone, dir, "", nil, "send", "nobody", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, `unknown recipient "nobody"`) {
		t.Fatalf("send to an unknown agent: %+v", r)
	}
	r = runBin(t, swarm, dir, "", nil, "inbox", "backend", "--json")
	var msgs []struct {
		From string
		Body string
	}
	if err := json.Unmarshal([]byte(r.stdout), &msgs); err != nil || len(msgs) != 2 {
		t.Fatalf("inbox: %v %+v", err, r)
	}
	for _, m := range msgs {
		if m.From != "operator" || m.Body != "piped body" && m.Body != "from the front" {
			t.Errorf("stored %+v", m)
		}
	}
}

// TestSwarmdAloneRefusesToStart: sessions run `swarm` from swarmd's
// directory; without it there, `swarmd up` starts nothing and says what
// to install.
func TestSwarmdAloneRefusesToStart(t *testing.T) {
	dir := newRepo(t)
	b, err := os.ReadFile(filepath.Join(binDir, "swarmd"))
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(t.TempDir(), "swarmd")
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runBin(t, alone, dir, "", nil, "up", "--no-tui")
	if r.code != 1 || !strings.Contains(r.stderr, "no swarm beside swarmd in "+filepath.Dir(alone)) {
		t.Fatalf("%+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, ".swarm", "swarm.lock")); err == nil {
		t.Fatal("swarmd up took the lock before refusing")
	}
}
