package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite golden files and testscript expectations")

// TestMain runs every journey as installed: `swarm` on the scripts' PATH
// is the real front (cmd/swarm), built beside this test binary as swarmd,
// so each command goes through the front first and, when it hands off,
// through the exec into swarmd.
func TestMain(m *testing.M) {
	testscript.Main(withFront{m}, map[string]func(){
		"swarmd":  func() { os.Exit(Main()) },
		"rawsock": func() { os.Exit(rawSock(os.Args[1:])) },
	})
}

// withFront builds the front into the directory testscript put its
// commands in (first on PATH) before the tests run.
type withFront struct{ m *testing.M }

func (w withFront) Run() int {
	bindir := filepath.SplitList(os.Getenv("PATH"))[0]
	if _, err := os.Stat(filepath.Join(bindir, "swarmd")); err != nil {
		fmt.Fprintln(os.Stderr, "testscript put no swarmd first on PATH:", err)
		return 1
	}
	front := filepath.Join(bindir, "swarm")
	if prebuilt := os.Getenv("SWARM_FRONT"); prebuilt != "" {
		// A front built beforehand (make presets-user builds it as root
		// and runs these tests as another user, with no module cache).
		b, err := os.ReadFile(prebuilt)
		if err == nil {
			err = os.WriteFile(front, b, 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "SWARM_FRONT:", err)
			return 1
		}
		return w.m.Run()
	}
	build := exec.Command("go", "build", "-buildvcs=false", "-o", front, "../swarm")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the swarm front (the journeys need go on PATH, or SWARM_FRONT naming a built one): %v\n%s", err, out)
		return 1
	}
	return w.m.Run()
}

// TestScripts runs the end-to-end CLI scripts in testdata/script. Each starts
// in $WORK/repo, a git repository with one commit and no git identity in the
// global config (the scripts set what they need).
func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for the CLI tests")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupJourney,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":        cmdJSONQ,
			"waitjson":     cmdWaitJSON,
			"waitmatch":    cmdWaitMatch,
			"waitdue":      cmdWaitDue,
			"ackescalated": cmdAckEscalated,
			"msgid":        cmdMsgID,
			"waitmsg":      cmdWaitMsg,
			"exitcode":     cmdExitCode,
			"door":         cmdDoor,
		},
	})
}

// cmdExitCode runs a command and checks its exit status, which `! exec`
// cannot: exitcode <code> <command> [args...]. Its output is the script's
// stdout and stderr, as after exec.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || neg {
		ts.Fatalf("usage: exitcode <code> <command> [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not a number", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

func setupRepo(env *testscript.Env) error {
	home := filepath.Join(env.WorkDir, "home")
	dir := filepath.Join(env.WorkDir, "repo")
	for _, d := range []string{home, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	env.Setenv("HOME", home)
	// Race-enabled binaries sleep 1 s at exit by default; the scripts start
	// hundreds of them.
	env.Setenv("GORACE", "atexit_sleep_ms=0")
	env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	env.Setenv("GIT_AUTHOR_NAME", "Test Operator")
	env.Setenv("GIT_AUTHOR_EMAIL", "op@example.com")
	env.Setenv("GIT_COMMITTER_NAME", "Test Operator")
	env.Setenv("GIT_COMMITTER_EMAIL", "op@example.com")
	for _, k := range []string{"SWARM_ROOT", "SWARM_DB", "SWARM_AGENT", "SWARM_SESSION_ID", "GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		env.Setenv(k, "")
	}
	run := func(args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = env.Vars
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := run("init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644); err != nil {
		return err
	}
	if err := run("add", "README.md"); err != nil {
		return err
	}
	if err := run("commit", "-q", "-m", "first"); err != nil {
		return err
	}
	env.Cd = dir
	return nil
}

// cmdJSONQ checks a value in JSON output: jsonq <file|stdout> <path> <want>.
// A path is dot-separated keys and array indexes; "length" is the length of
// an array and "unique:key" the number of distinct values of key across it.
func cmdJSONQ(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: jsonq <file|stdout> <path> <want>")
	}
	data := ts.ReadFile(args[0])
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		ts.Fatalf("not JSON: %v\n%s", err, data)
	}
	got, err := jsonPath(v, args[1])
	if err != nil {
		ts.Fatalf("%s: %v", args[1], err)
	}
	if (got == args[2]) == neg {
		ts.Fatalf("%s = %s, want %s%s", args[1], got, map[bool]string{true: "not ", false: ""}[neg], args[2])
	}
}

func jsonPath(v any, path string) (string, error) {
	for _, part := range strings.Split(path, ".") {
		switch {
		case part == "length":
			a, ok := v.([]any)
			if !ok {
				return "", fmt.Errorf("length of a non-array")
			}
			v = float64(len(a))
		case strings.HasPrefix(part, "unique:"):
			a, ok := v.([]any)
			if !ok {
				return "", fmt.Errorf("unique of a non-array")
			}
			seen := map[string]bool{}
			for _, e := range a {
				m, _ := e.(map[string]any)
				b, _ := json.Marshal(m[strings.TrimPrefix(part, "unique:")])
				seen[string(b)] = true
			}
			v = float64(len(seen))
		default:
			if i, err := strconv.Atoi(part); err == nil {
				a, ok := v.([]any)
				if !ok || i >= len(a) {
					return "", fmt.Errorf("no index %d", i)
				}
				v = a[i]
				continue
			}
			m, ok := v.(map[string]any)
			if !ok {
				return "", fmt.Errorf("no key %q", part)
			}
			v, ok = m[part]
			if !ok {
				return "", fmt.Errorf("no key %q", part)
			}
		}
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case nil:
		return "null", nil
	default:
		b, _ := json.Marshal(v)
		return string(b), nil
	}
}
