//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// TestR4BaseBranchEscapes runs two scripted agents through `swarm up`: one
// whose bash tool commits on the base branch from the repository root, one
// that leaves its branch. The supervisor must fail each session after it
// ends and report it to operator with a status message.
// r4Config runs R4's agents without the sandbox: the escapes are what an
// agent can do with the user's rights, which bubblewrap refuses before the
// guard could see them (sandbox/bwrap shows that).
const r4Config = "[liveness]\nnudge_after = \"0s\"\n\n[errors]\nbackoff_min = \"50ms\"\nbackoff_max = \"200ms\"\n\n[sandbox]\nmode = \"none\"\n"

func TestR4BaseBranchEscapes(t *testing.T) {
	agents := []string{"leaker", "wanderer"}
	oneTurn := func(command string) string {
		return "[[session]]\n[[session.turn]]\ntool = \"bash\"\nargs = { command = '''" + command + "''' }\n[[session.turn]]\ntext = \"done\"\n"
	}
	h := newHarness(t, swarmConfig{
		agents: agents,
		scripts: map[string]string{
			"leaker":   oneTurn(`git -C "$SWARM_ROOT" commit --allow-empty -q -m leak`),
			"wanderer": oneTurn(`git switch -q -c other`),
		},
		toml: r4Config,
	})
	base := h.git(h.root, "rev-parse", "main")
	up := h.up("--engine", "script")

	type reports struct{ leaker, wanderer *message.Message }
	var got reports
	h.waitFor(60*time.Second, "status messages to operator from both agents", func() (bool, error) {
		if up.exited() {
			t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
		}
		r := h.swarm("inbox", "operator", "--json", "--limit", "0")
		if r.code != 0 {
			return false, nil
		}
		var ms []message.Message
		if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
			return false, err
		}
		for i, m := range ms {
			if m.Kind != message.KindStatus {
				continue
			}
			switch m.From {
			case "leaker":
				got.leaker = &ms[i]
			case "wanderer":
				got.wanderer = &ms[i]
			}
		}
		return got.leaker != nil && got.wanderer != nil, nil
	})
	// The leak really happened on the base branch: the guard reports it, it
	// does not hide it.
	leak := h.git(h.root, "log", "-1", "--format=%an %s", "main")
	if h.git(h.root, "rev-parse", "main") == base || leak != "swarm/leaker leak" {
		t.Fatalf("main's newest commit is %q; the scripted leak did not happen", leak)
	}
	for _, c := range []struct {
		m     *message.Message
		words []string
	}{
		{got.leaker, []string{"base-branch guard", "branch_violation", "charged to leaker", "leak"}},
		{got.wanderer, []string{"base-branch guard", "branch_violation", "charged to wanderer", "other"}},
	} {
		for _, w := range c.words {
			if !strings.Contains(c.m.Body, w) {
				t.Errorf("report from %s lacks %q:\n%s", c.m.From, w, c.m.Body)
			}
		}
	}

	st := h.store(agents)
	defer st.Close()
	ctx := context.Background()
	// The guard's report is posted before the session's end is stored:
	// wait for the end, then look at it.
	h.waitFor(30*time.Second, "both first sessions to end", func() (bool, error) {
		for _, a := range agents {
			s, err := st.Session(ctx, a, 1)
			if err != nil || s.State == "running" {
				return false, err
			}
		}
		return true, nil
	})
	for _, a := range agents {
		s, err := st.Session(ctx, a, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.State != "failed" || !strings.Contains(s.Error, "base-branch guard") {
			t.Errorf("%s session 1: state %s, error %q; want failed by the base-branch guard", a, s.State, s.Error)
		}
		evs, err := st.Events(ctx, mailbox.EventFilter{Agent: a})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range evs {
			if e.From != nil && *e.From == "Running" && e.SessionSeq == 1 && (e.To == "CoolingDown" || e.To == "Stopped") && strings.Contains(e.Cause, "base-branch guard") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no Running → CoolingDown/Stopped event for session 1 caused by the guard", a)
		}
	}
	up.interrupt(t)
}

// guardReports reads operator's inbox: the guard's reports, by sender.
func (h *harness) guardReports() (map[string][]message.Message, error) {
	r := h.swarm("inbox", "operator", "--json", "--limit", "0")
	if r.code != 0 {
		return nil, nil
	}
	var ms []message.Message
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
		return nil, err
	}
	out := map[string][]message.Message{}
	for _, m := range ms {
		if m.Kind == message.KindStatus && strings.Contains(m.Body, "base-branch guard") {
			out[m.From] = append(out[m.From], m)
		}
	}
	return out, nil
}

// TestR4GuardCases runs the guard's cases through `swarm up --engine
// script`, each done by a scripted agent's bash tool, one after the other
// (each agent waits for its gate file):
//   - mover moves a teammate's branch (update-ref, as itself);
//   - rewinder rewinds the base branch (git update-ref refs/heads/main
//     <older>);
//   - late starts a detached background commit on main that lands after
//     its session was checked;
//   - impostor commits on main with another author and committer name.
//
// Each must reach operator as a report charged to the agent, within its
// session (the late commit: at its next session's start).
func TestR4GuardCases(t *testing.T) {
	agents := []string{"mover", "rewinder", "late", "impostor"}
	actions := map[string]string{
		"mover":    `git -C "$SWARM_ROOT" update-ref refs/heads/swarm/rewinder "$(git -C "$SWARM_ROOT" rev-parse main~1)"`,
		"rewinder": `git -C "$SWARM_ROOT" update-ref refs/heads/main "$(git -C "$SWARM_ROOT" rev-parse main~1)"`,
		// setsid takes it out of the tool's process group, which the tool
		// kills when the command returns: it waits until setsid is done.
		"late":     `setsid sh -c 'echo $$ > "$R4_GATES/late-started"; while [ ! -e "$R4_GATES/late-commit" ]; do sleep 0.05; done; git -C "$SWARM_ROOT" commit --allow-empty -q -m "late commit"' </dev/null >"$R4_GATES/late.out" 2>&1 & while [ ! -s "$R4_GATES/late-started" ]; do sleep 0.02; done`,
		"impostor": `GIT_AUTHOR_NAME=tester GIT_COMMITTER_NAME=tester git -C "$SWARM_ROOT" commit --allow-empty -q -m "impostor commit"`,
	}
	scripts := map[string]string{}
	for _, a := range agents {
		scripts[a] = "[[session]]\n[[session.turn]]\ntool = \"bash\"\n[session.turn.args]\ntimeout_seconds = 300\ncommand = '''while [ ! -e \"$R4_GATES/" + a + "\" ]; do sleep 0.05; done; " +
			actions[a] + "'''\n\n[[session.turn]]\ntext = \"done\"\n"
	}
	h := newHarness(t, swarmConfig{agents: agents, scripts: scripts,
		toml: r4Config})
	gates := filepath.Join(h.dir, "gates")
	if err := os.MkdirAll(gates, 0o755); err != nil {
		t.Fatal(err)
	}
	h.extra = []string{"R4_GATES=" + gates}
	// main needs an older commit to be rewound to.
	writeFile(t, filepath.Join(h.root, "second.txt"), "second\n")
	h.git(h.root, "add", "second.txt")
	h.git(h.root, "commit", "-q", "-m", "second commit")
	// impostor runs alone, later: its commit must be the only move of main
	// in its session. (When agents move main too in the same session, the
	// guard charges the whole move to the agents its reflog names.)
	up := h.up("--engine", "script", "--agents", "mover,rewinder,late")
	st := h.store(agents)
	defer st.Close()
	ctx := context.Background()
	open := func(name string) { writeFile(t, filepath.Join(gates, name), "") }
	session := func(agent string, seq int64) (mailbox.Session, bool) {
		s, err := st.Session(ctx, agent, seq)
		return s, err == nil
	}
	h.waitFor(60*time.Second, "every agent's first session", func() (bool, error) {
		if up.exited() {
			t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
		}
		for _, a := range agents[:3] {
			if s, ok := session(a, 1); !ok || s.State != mailbox.SessionRunning {
				return false, nil
			}
		}
		return true, nil
	})
	// report waits for a report charged to agent that has every word.
	report := func(agent string, words ...string) message.Message {
		t.Helper()
		var found message.Message
		var seen map[string][]message.Message
		err := waitUntil(60*time.Second, func() (bool, error) {
			if up.exited() {
				t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
			}
			rs, err := h.guardReports()
			seen = rs
			for _, m := range rs[agent] {
				ok := strings.Contains(m.Body, "charged to "+agent)
				for _, w := range words {
					ok = ok && strings.Contains(m.Body, w)
				}
				if ok {
					found = m
					return true, nil
				}
			}
			return false, err
		})
		if err != nil {
			var b strings.Builder
			for from, ms := range seen {
				for _, m := range ms {
					fmt.Fprintf(&b, "  from %s: %s\n", from, m.Body)
				}
			}
			t.Fatalf("waiting for a report charged to %s with %q: %v; the reports:\n%s", agent, words, err, b.String())
		}
		return found
	}
	failedByGuard := func(agent string) {
		t.Helper()
		h.waitFor(30*time.Second, agent+"'s session 1 to end", func() (bool, error) {
			s, ok := session(agent, 1)
			return ok && s.State != mailbox.SessionRunning, nil
		})
		if s, _ := session(agent, 1); s.State != mailbox.SessionFailed || !strings.Contains(s.Error, "base-branch guard") {
			t.Errorf("%s session 1: %s (%s), want failed by the base-branch guard", agent, s.State, s.Error)
		}
	}

	open("mover")
	report("mover", "branch_violation", "swarm/rewinder was moved")
	failedByGuard("mover")

	open("rewinder")
	report("rewinder", "branch_violation", "update-ref refs/heads/main")
	failedByGuard("rewinder")

	// A background process that would commit after late's session was
	// checked (setsid, so outside the session's process group) ends with
	// the session (DESIGN §13.3): the late commit never happens.
	open("late")
	h.waitFor(30*time.Second, "late's session 1 to complete", func() (bool, error) {
		s, ok := session("late", 1)
		return ok && s.State == mailbox.SessionCompleted, nil
	})
	pidText, err := os.ReadFile(filepath.Join(gates, "late-started"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatalf("late's background pid %q: %v", pidText, err)
	}
	if err := waitUntil(10*time.Second, func() (bool, error) {
		return syscall.Kill(pid, 0) != nil, nil
	}); err != nil {
		t.Fatalf("late's setsid background process %d outlived its session: %v", pid, err)
	}
	open("late-commit") // nobody is left to take it
	if out := h.git(h.root, "log", "-1", "--format=%s", "main"); out == "late commit" {
		t.Fatalf("the late commit landed on main after its session ended")
	}

	up.interrupt(t)

	up = h.up("--engine", "script", "--agents", "impostor")
	h.waitFor(60*time.Second, "impostor's first session", func() (bool, error) {
		s, ok := session("impostor", 1)
		return ok && s.State == mailbox.SessionRunning, nil
	})
	open("impostor")
	report("impostor", "branch_violation", "impostor commit", "committed by tester")
	failedByGuard("impostor")
	up.interrupt(t)
	t.Logf("each case reported to operator: a teammate's branch moved, main rewound, a commit under another name; a late background committer ended with its session")
}
