package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxServer is a private tmux server for one test.
type tmuxServer struct {
	t    *testing.T
	sock string
	env  []string
}

func newTmux(t *testing.T, env []string) *tmuxServer {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the end-to-end test of the live view needs it")
	}
	s := &tmuxServer{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock"), env: env}
	t.Cleanup(func() { exec.Command("tmux", "-S", s.sock, "kill-server").Run() })
	return s
}

func (s *tmuxServer) run(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-f", "/dev/null", "-S", s.sock}, args...)...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// start runs shell command line in a new 120x40 window called name; the
// window stays after the command ends, showing what it printed last.
func (s *tmuxServer) start(name, line string) {
	s.t.Helper()
	line += "; exec sleep 3600"
	if name == "up" {
		s.run("new-session", "-d", "-x", "120", "-y", "40", "-s", "e2e", "-n", name, line)
		return
	}
	s.run("new-window", "-d", "-t", "e2e", "-n", name, line)
	s.run("resize-window", "-t", "e2e:"+name, "-x", "120", "-y", "40")
}

func (s *tmuxServer) screen(name string) string {
	s.t.Helper()
	return s.run("capture-pane", "-p", "-t", "e2e:"+name)
}

// waitScreen polls the window until ok holds, for at most within.
func (s *tmuxServer) waitScreen(name string, within time.Duration, what string, ok func(string) bool) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		scr := s.screen(name)
		if ok(scr) {
			return scr
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("window %s: no %s within %s; the screen:\n%s", name, what, within, scr)
		case <-tick.C:
		}
	}
}

// agentRow is the line of the agents table for agent, or "".
func agentRow(screen, agent string) string {
	for _, l := range strings.Split(screen, "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "▸"))
		if len(f) > 2 && f[0] == agent && f[1] == "●" {
			return l
		}
	}
	return ""
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestTUIEndToEnd drives the real binary in tmux: swarm up shows the live
// view, an urgent message from another command shows up on it, swarm watch
// attaches and detaches, and q stops it. (The view's idle CPU is measured
// by `make bench`, P4, not by a timed test.)
func TestTUIEndToEnd(t *testing.T) {
	env := e2eEnv(t)
	tm := newTmux(t, env)
	bin := buildSwarm(t)
	dir := newE2ERepo(t, bin, env)

	// Every agent with its state within 3 s.
	tm.start("up", fmt.Sprintf("cd %s && %s up --engine script; echo UP-EXIT=$?", shq(dir), shq(bin)))
	tm.waitScreen("up", 3*time.Second, "agents with states", func(s string) bool {
		return strings.Contains(agentRow(s, "alpha"), "● Running") && agentRow(s, "bravo") != "" &&
			strings.Contains(s, "swarm up · "+dir)
	})

	// An urgent message from another command: alpha interrupting, and the
	// message, within 1 s.
	out := swarmCmd(t, bin, dir, env, 0, "send", "alpha", "x", "--urgent")
	if !strings.Contains(out, "sent urgent #1 to alpha") {
		t.Fatalf("send: %s", out)
	}
	tm.waitScreen("up", time.Second, "the interrupt and the urgent mail", func(s string) bool {
		return strings.Contains(agentRow(s, "alpha"), "⚡ interrupted: urgent mail #1 from operator") &&
			strings.Contains(strings.Join(strings.Fields(s), " "), "#1 ") &&
			strings.Contains(s, "operator → alpha") && strings.Contains(s, "[URGENT] x")
	})

	// swarm watch shows the same agents; q leaves it and the swarm runs on.
	tm.start("watch", fmt.Sprintf("cd %s && %s watch; echo WATCH-EXIT=$?", shq(dir), shq(bin)))
	scr := tm.waitScreen("watch", 3*time.Second, "the agents", func(s string) bool {
		return strings.Contains(s, "swarm watch · "+dir) && agentRow(s, "alpha") != "" && agentRow(s, "bravo") != ""
	})
	if !strings.Contains(scr, "q leave (the swarm keeps running)") {
		t.Fatalf("watch does not say what q does:\n%s", scr)
	}
	tm.run("send-keys", "-t", "e2e:watch", "q")
	tm.waitScreen("watch", 3*time.Second, "watch's exit", func(s string) bool { return strings.Contains(s, "WATCH-EXIT=0") })
	var st statusJSON
	if err := json.Unmarshal([]byte(swarmCmd(t, bin, dir, env, 0, "status", "--json")), &st); err != nil || !st.Running || st.Pid == nil {
		t.Fatalf("after leaving watch the swarm is not running: %+v %v", st, err)
	}

	// Pause and resume from another terminal show in the view.
	swarmCmd(t, bin, dir, env, 0, "pause", "bravo")
	tm.waitScreen("up", 3*time.Second, "bravo paused", func(s string) bool { return strings.Contains(agentRow(s, "bravo"), "● Paused") })
	swarmCmd(t, bin, dir, env, 0, "resume", "bravo")
	tm.waitScreen("up", 3*time.Second, "bravo idle again", func(s string) bool { return strings.Contains(agentRow(s, "bravo"), "● Idle") })

	// q asks, y stops gracefully: exit 0, and status says not running.
	tm.run("send-keys", "-t", "e2e:up", "q")
	tm.waitScreen("up", 3*time.Second, "the question", func(s string) bool { return strings.Contains(s, "stop the swarm? [y/N]") })
	tm.run("send-keys", "-t", "e2e:up", "y")
	tm.waitScreen("up", 20*time.Second, "up's exit", func(s string) bool { return strings.Contains(s, "UP-EXIT=") })
	scr = tm.screen("up")
	if !strings.Contains(scr, "UP-EXIT=0") || !strings.Contains(scr, "swarm stopped") {
		t.Fatalf("q did not stop gracefully:\n%s", scr)
	}
	st = statusJSON{}
	if err := json.Unmarshal([]byte(swarmCmd(t, bin, dir, env, 0, "status", "--json")), &st); err != nil || st.Running {
		t.Fatalf("after q: %+v %v", st, err)
	}
	for _, a := range st.Agents {
		if a.State != "Stopped" {
			t.Errorf("after q, %s is %s", a.Name, a.State)
		}
	}
}
