package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// The journey scripts (testdata/journey, and the README's quick start in
// readme_test.go) run `swarm up` in the background and wait on what it
// does with the commands below. Every wait polls a real `swarm` process
// with a deadline; none sleeps for a fixed time.

// journeyWait bounds one wait. A scripted run takes well under a second;
// this only turns a stuck run into a failure that shows the last output.
const journeyWait = 45 * time.Second

const journeyPoll = 100 * time.Millisecond

// TestJourney runs testdata/journey: end-to-end runs of the real binary
// with `swarm up` in the background.
func TestJourney(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for the CLI tests")
	}
	testscript.Run(t, journeyParams(filepath.Join("testdata", "journey")))
}

func journeyParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupJourney,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitjson":  cmdWaitJSON,
			"waitmatch": cmdWaitMatch,
			"follow":    cmdFollow,
			"holdlock":  cmdHoldLock,
		},
	}
}

type envKeysKey struct{}

// setupJourney is setupRepo, and remembers the names of the environment
// variables, so the custom commands can give the swarm processes they
// start the script's current environment.
func setupJourney(env *testscript.Env) error {
	if err := setupRepo(env); err != nil {
		return err
	}
	var keys []string
	for _, kv := range env.Vars {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	env.Values[envKeysKey{}] = keys
	return nil
}

// swarmCommand is `swarm args...` as the script's `exec` would run it: the
// swarm on the script's PATH, in its current directory, with its current
// values of the environment (variables the script set with `env` that
// Setup did not know are passed too when listed in journeyExtraEnv).
func swarmCommand(ts *testscript.TestScript, args []string) *exec.Cmd {
	bin := ""
	for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
		p := filepath.Join(dir, "swarm")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			bin = p
			break
		}
	}
	if bin == "" {
		ts.Fatalf("no swarm on the script's PATH")
	}
	keys, _ := ts.Value(envKeysKey{}).([]string)
	var env []string
	for _, k := range slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(keys), journeyExtraEnv...)))) {
		env = append(env, k+"="+ts.Getenv(k))
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

var journeyExtraEnv = []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"}

// runSwarm runs swarm once and returns its stdout and stderr.
func runSwarm(ts *testscript.TestScript, args []string) (string, string, error) {
	cmd := swarmCommand(ts, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// waitFor runs `swarm args` until ok accepts its stdout, and makes that
// stdout the script's stdout. It fails after journeyWait, showing the last
// output.
func waitFor(ts *testscript.TestScript, what string, args []string, ok func(stdout string) bool) {
	deadline := time.Now().Add(journeyWait)
	var out, errOut string
	var err error
	for {
		out, errOut, err = runSwarm(ts, args)
		if err == nil && ok(out) {
			fmt.Fprint(ts.Stdout(), out)
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waited %s for %s from swarm %s; last run: err %v\nstdout:\n%s\nstderr:\n%s",
				journeyWait, what, strings.Join(args, " "), err, out, errOut)
		}
		time.Sleep(journeyPoll)
	}
}

// cmdWaitJSON waits until a JSON value in a swarm command's output has a
// value: waitjson <path> <want> <swarm args...>, path as in jsonq.
func cmdWaitJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: waitjson <path> <want> <swarm args...>")
	}
	path, want := args[0], args[1]
	waitFor(ts, path+" = "+want, args[2:], func(out string) bool {
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return false
		}
		got, err := jsonPath(v, path)
		return err == nil && got == want
	})
}

// cmdWaitMatch waits until a swarm command's output matches a regular
// expression (multi-line mode): waitmatch <regexp> <swarm args...>.
func cmdWaitMatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: waitmatch <regexp> <swarm args...>")
	}
	re, err := regexp.Compile("(?m)" + args[0])
	if err != nil {
		ts.Fatalf("waitmatch: %v", err)
	}
	waitFor(ts, "/"+args[0]+"/", args[1:], re.MatchString)
}

// cmdFollow checks a command that runs until interrupted, such as
// `swarm logs -f`: follow <regexp> <swarm args...> starts it, reads its
// output until the regexp matches (it must still be running then), sends
// it SIGINT as Ctrl-C would, and requires a clean exit. What it printed
// becomes the script's stdout.
func cmdFollow(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: follow <regexp> <swarm args...>")
	}
	re, err := regexp.Compile("(?m)" + args[0])
	if err != nil {
		ts.Fatalf("follow: %v", err)
	}
	cmd := swarmCommand(ts, args[1:])
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = pw, &stderr
	if err := cmd.Start(); err != nil {
		ts.Fatalf("follow: %v", err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.CloseWithError(io.EOF)
		exited <- err
	}()
	var got bytes.Buffer
	matched := make(chan bool, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			got.Write(buf[:n])
			if re.Match(got.Bytes()) {
				matched <- true
				io.Copy(io.Discard, pr) // keep the pipe drained until exit
				return
			}
			if err != nil {
				matched <- false
				return
			}
		}
	}()
	timer := time.NewTimer(journeyWait)
	defer timer.Stop()
	select {
	case ok := <-matched:
		if !ok {
			err := <-exited
			ts.Fatalf("swarm %s exited (%v) before printing /%s/; it printed:\n%s\nstderr:\n%s", strings.Join(args[1:], " "), err, args[0], got.String(), stderr.String())
		}
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-exited
		<-matched // the reader is done with got
		ts.Fatalf("swarm %s did not print /%s/ within %s; it printed:\n%s", strings.Join(args[1:], " "), args[0], journeyWait, got.String())
	}
	select {
	case err := <-exited:
		ts.Fatalf("swarm %s exited (%v) by itself: it should keep following until interrupted", strings.Join(args[1:], " "), err)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		ts.Fatalf("follow: interrupt: %v", err)
	}
	timer.Reset(journeyWait)
	select {
	case err := <-exited:
		if err != nil {
			ts.Fatalf("swarm %s: after Ctrl-C: %v\nstderr:\n%s", strings.Join(args[1:], " "), err, stderr.String())
		}
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-exited
		ts.Fatalf("swarm %s did not exit within %s of Ctrl-C", strings.Join(args[1:], " "), journeyWait)
	}
	fmt.Fprint(ts.Stdout(), got.String())
	fmt.Fprint(ts.Stderr(), stderr.String())
}

// cmdHoldLock takes the flock on a file, as a running supervisor holds
// .swarm/swarm.lock, writes a pid into it, and keeps it until the script
// ends: holdlock <file> <pid>.
func cmdHoldLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: holdlock <file> <pid>")
	}
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		ts.Fatalf("holdlock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		ts.Fatalf("holdlock: %v", err)
	}
	if _, err := f.WriteString(args[1] + "\n"); err != nil {
		ts.Fatalf("holdlock: %v", err)
	}
	ts.Defer(func() { f.Close() })
}
