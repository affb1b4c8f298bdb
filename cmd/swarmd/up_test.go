package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine/gemini/geminitest"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/repo"
)

// waitLimit bounds every wait in the up scripts: a broken supervisor fails
// the script instead of hanging the suite. The waits poll a condition; none
// sleeps for a fixed time.
const waitLimit = 30 * time.Second

// TestUpScripts runs `swarm up` end to end in testdata/up: the real
// supervisor, worktrees, prompts and engines, in temporary git repos.
func TestUpScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts supervisors")
	}
	fake := geminitest.New(t)
	// A stateless fake model: write a file, tell operator, finish.
	fake.HandleFunc(func(r *geminitest.Request) geminitest.Reply {
		switch len(r.FunctionResponses()) {
		case 0:
			return geminitest.Call("write_file", map[string]any{"path": "hello.txt", "content": "written by gemini\n"})
		case 1:
			return geminitest.Call("send_message", map[string]any{"to": "operator", "body": "wrote hello.txt"})
		default:
			return geminitest.Text("done")
		}
	})
	hooks := newHookServer()
	t.Cleanup(hooks.Close) // the scripts run after this function returns
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "up"),
		RequireExplicitExec: true,
		Condition: func(cond string) (bool, error) {
			if cond == "tmpfs" {
				return canMountTmpfs(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			if err := setupRepo(env); err != nil {
				return err
			}
			env.Setenv("FAKE_GEMINI_URL", fake.URL)
			env.Setenv("WEBHOOK_URL", hooks.url(env.WorkDir))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitevent": cmdWaitEvent,
			"waitstate": cmdWaitState,
			"waitfile":  cmdWaitFile,
			"waitup":    cmdWaitUp,
			"pidgone":   cmdPidGone,
			"waitwatch": cmdWaitWatchers,
			"mounttiny": cmdMountTiny,
			"freeze":    cmdFreeze,
			"thaw":      cmdThaw,
			"fillfs":    cmdFillFS,
			// escalate_test.go
			"webhook":     hooks.cmdWebhook,
			"hookline":    cmdHookLine,
			"waitsession": cmdWaitSession,
			"escid":       cmdEscID,
		},
	})
}

// openScriptStore opens the repo's database for a custom command.
func openScriptStore(ts *testscript.TestScript) mailbox.Store {
	st, err := sqlite.Open(context.Background(), ts.MkAbs(".swarm/swarm.db"), sqlite.Options{})
	if err != nil {
		ts.Fatalf("open database: %v", err)
	}
	return st
}

// poll runs cond until it reports done, failing after waitLimit.
func poll(ts *testscript.TestScript, what string, cond func() (bool, string)) {
	deadline := time.Now().Add(waitLimit)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(25 * time.Millisecond)
	}
	ts.Fatalf("timed out waiting for %s (last seen: %s)", what, last)
}

// cmdWaitEvent waits for an event: waitevent <agent> <from> <to> [cause substring].
// "-" as from matches an agent's first event.
func cmdWaitEvent(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 || len(args) > 4 || neg {
		ts.Fatalf("usage: waitevent <agent> <from> <to> [cause]")
	}
	st := openScriptStore(ts)
	defer st.Close()
	poll(ts, fmt.Sprintf("%s %s → %s", args[0], args[1], args[2]), func() (bool, string) {
		evs, err := st.Events(context.Background(), mailbox.EventFilter{Agent: args[0]})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs {
			from := "-"
			if e.From != nil {
				from = *e.From
			}
			if from == args[1] && e.To == args[2] && (len(args) < 4 || strings.Contains(e.Cause, args[3])) {
				return true, ""
			}
			seen = append(seen, from+"→"+e.To)
		}
		return false, strings.Join(seen, " ")
	})
}

// cmdWaitState waits for an agent's state: waitstate <agent> <state> [session_seq].
func cmdWaitState(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || len(args) > 3 || neg {
		ts.Fatalf("usage: waitstate <agent> <state> [session_seq]")
	}
	st := openScriptStore(ts)
	defer st.Close()
	poll(ts, args[0]+" in "+args[1], func() (bool, string) {
		a, err := st.Agent(context.Background(), args[0])
		if err != nil {
			return false, err.Error()
		}
		seqOK := len(args) < 3 || strconv.FormatInt(a.SessionSeq, 10) == args[2]
		return string(a.State) == args[1] && seqOK, fmt.Sprintf("%s session %d", a.State, a.SessionSeq)
	})
}

// cmdWaitFile waits for a file to exist with content: waitfile <path>.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: waitfile <path>")
	}
	poll(ts, args[0], func() (bool, string) {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		return err == nil && len(b) > 0, fmt.Sprint(err)
	})
}

// cmdWaitUp waits until the supervisor answers on its control socket, or
// with !, until none does.
func cmdWaitUp(ts *testscript.TestScript, neg bool, args []string) {
	l := repo.At(ts.MkAbs("."), "")
	poll(ts, map[bool]string{false: "the supervisor", true: "the supervisor to go"}[neg], func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := control.Call(ctx, l, control.Request{Op: control.OpPing})
		up := err == nil
		return up != neg, fmt.Sprint(err)
	})
}

// cmdWaitWatchers waits until n watchers are attached to the supervisor:
// waitwatch <n>.
func cmdWaitWatchers(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: waitwatch <n>")
	}
	l := repo.At(ts.MkAbs("."), "")
	poll(ts, args[0]+" watcher(s)", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := control.Call(ctx, l, control.Request{Op: control.OpPing})
		if err != nil {
			return false, err.Error()
		}
		var p struct {
			Watchers int `json:"watchers"`
		}
		_ = json.Unmarshal(resp.Data, &p)
		return strconv.Itoa(p.Watchers) == args[0], fmt.Sprint(p.Watchers)
	})
}

// cmdPidGone checks that the process whose pid is in a file has exited:
// pidgone <pidfile>. It waits (bounded) for the kernel to finish the kill.
func cmdPidGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: pidgone <pidfile>")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	if err != nil {
		ts.Fatalf("%v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		ts.Fatalf("bad pid in %s: %v", args[0], err)
	}
	poll(ts, fmt.Sprintf("process %d to exit", pid), func() (bool, string) {
		return !alive(pid), "still running"
	})
}

// alive reports whether pid runs; a zombie (exited, not yet reaped) is dead.
func alive(pid int) bool {
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(stat))
		return len(f) > 2 && f[2] != "Z"
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// cmdMountTiny mounts a small tmpfs on a directory, unmounted when the
// script ends: mounttiny <dir> <size>. Scripts guard it with [tmpfs].
func cmdMountTiny(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: mounttiny <dir> <size>")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+args[1]); err != nil {
		ts.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	ts.Defer(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// cmdFillFS fills the file system holding a directory with one file until
// it has no space left: fillfs <dir>.
func cmdFillFS(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: fillfs <dir>")
	}
	f, err := os.Create(filepath.Join(ts.MkAbs(args[0]), "filler"))
	ts.Check(err)
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			ts.Fatalf("fill: %v", err)
		}
	}
}

// canMountTmpfs is the [tmpfs] condition: this process may mount a tmpfs
// (root, and a mount namespace that allows it).
func canMountTmpfs() bool {
	dir, err := os.MkdirTemp("", "swarm-tmpfs-probe")
	if err != nil {
		return false
	}
	defer os.Remove(dir)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		return false
	}
	return syscall.Unmount(dir, 0) == nil
}
