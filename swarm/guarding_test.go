package swarm

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/proc"
)

// guardReports returns the guard reports in operator's inbox, by sender.
func (h *harness) guardReports() map[string][]string {
	h.t.Helper()
	ms, err := h.store.Inbox(context.Background(), message.Operator, mailbox.Filter{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range ms {
		if m.Kind == message.KindStatus && strings.Contains(m.Body, "base-branch guard") {
			out[m.From] = append(out[m.From], m.Body)
		}
	}
	return out
}

// scriptedGuards hands out, per agent, the guards of its sessions in turn.
type scriptedGuards struct {
	mu     sync.Mutex
	guards map[string][]*fakeGuard
}

func (s *scriptedGuards) next(agent string) *fakeGuard {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs := s.guards[agent]
	if len(gs) == 0 {
		return nil
	}
	s.guards[agent] = gs[1:]
	return gs[0]
}

// A finding the guard made at a session's start (the late commit of the
// previous session) is reported before the session runs and does not fail
// it; one made at its end fails it.
func TestGuardPriorIsReportedAtStart(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	late := fakeFinding{kind: "branch_violation", key: "base_moved:main:late", text: "a late commit of alpha landed on main", blame: []string{"alpha"}}
	h.wt.guard = func(string) *fakeGuard { return &fakeGuard{prior: []Finding{late}} }
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	if got := h.guardReports()["alpha"]; len(got) != 1 || !strings.Contains(got[0], "a late commit of alpha landed on main") || !strings.Contains(got[0], "branch_violation") {
		t.Fatalf("reports while the session runs: %q", got)
	}
	// The finding holds alpha (a branch_violation escalation): its
	// session is cut short, and nothing more is reported.
	h.waitFor("alpha", lifecycle.Held)
	<-r.ctx.Done()
	if got := h.guardReports()["alpha"]; len(got) != 1 {
		t.Fatalf("reported %d times, want once: %q", len(got), got)
	}
}

// A finding that blames nobody is charged to every agent whose session
// overlapped it, once each, though both agents' guards find it.
func TestGuardBlamelessFindingChargesOverlappingSessions(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n[[agent]]\nname = \"carol\"\n")
	moved := fakeFinding{kind: "branch_violation", key: "base_rewound:main:abc", text: "main was rewound to abc; undo it with 'git update-ref refs/heads/main def'"}
	found := func() ([]Finding, error) { return []Finding{moved}, nil }
	sg := &scriptedGuards{guards: map[string][]*fakeGuard{
		"alpha": {{check: found}},
		"bravo": {{check: found}},
		"carol": {{}},
	}}
	h.wt.guard = sg.next
	h.start()
	runs := map[string]*fakeRun{}
	for range 3 {
		r := h.nextRun()
		runs[r.s.Agent] = r
	}
	// carol's guard finds nothing, but its session overlapped theirs: the
	// change may have been its doing, so it is charged too.
	for _, a := range []string{"alpha", "bravo"} {
		h.waitFor(a, lifecycle.Running)
	}
	runs["alpha"].finish <- engine.Result{Outcome: engine.Success}
	runs["bravo"].finish <- engine.Result{Outcome: engine.Success}
	// Every agent it is charged to is held by the branch_violation it
	// raises, carol (whose session is cut short) included.
	for _, a := range []string{"alpha", "bravo", "carol"} {
		h.waitFor(a, lifecycle.Held)
	}
	reports := h.guardReports()
	for _, a := range []string{"alpha", "bravo", "carol"} {
		if len(reports[a]) != 1 || !strings.Contains(reports[a][0], "git update-ref refs/heads/main def") || !strings.Contains(reports[a][0], "charged to "+a) {
			t.Errorf("%s: reports %q, want one", a, reports[a])
		}
	}
	// Each session ended either failed by its own guard or interrupted by
	// the hold a teammate's finding put on it first: never completed.
	for _, a := range []string{"alpha", "bravo"} {
		if s, _ := h.store.Session(context.Background(), a, 1); s.State != mailbox.SessionFailed && s.State != mailbox.SessionInterrupted {
			t.Errorf("%s session 1 = %s, want failed or interrupted", a, s.State)
		}
	}
}

// A finding that blames a teammate is reported as the teammate's, and does
// not fail the session of the agent whose guard found it.
func TestGuardFindingChargedToTheAgentItBlames(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n")
	moved := fakeFinding{kind: "branch_violation", key: "branch_moved:swarm/alpha:1", text: "bravo moved swarm/alpha", blame: []string{"bravo"}}
	sg := &scriptedGuards{guards: map[string][]*fakeGuard{"alpha": {{check: func() ([]Finding, error) { return []Finding{moved}, nil }}}}}
	h.wt.guard = sg.next
	h.start()
	// Both sessions start before alpha's ends: the finding holds bravo, and
	// a bravo not started yet would never start.
	runs := map[string]*fakeRun{}
	for range 2 {
		r := h.nextRun()
		runs[r.s.Agent] = r
	}
	defer func() { runs["bravo"].finish <- engine.Result{Outcome: engine.Success} }()
	h.waitFor("bravo", lifecycle.Running)
	runs["alpha"].finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	if got := h.guardReports(); len(got["bravo"]) != 1 || len(got["alpha"]) != 0 {
		t.Fatalf("reports = %q", got)
	}
}

// Sessions cut short are checked too: by urgent mail, and by the
// supervisor stopping.
func TestGuardChecksCutSessions(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n")
	finding := func(agent, key string) *fakeGuard {
		return &fakeGuard{check: func() ([]Finding, error) {
			return []Finding{fakeFinding{kind: "repo_tamper", key: key, text: "hook " + key + " was planted", blame: []string{agent}}}, nil
		}}
	}
	sg := &scriptedGuards{guards: map[string][]*fakeGuard{"alpha": {finding("alpha", "interrupted")}, "bravo": {finding("bravo", "stopped")}}}
	h.wt.guard = sg.next
	h.start()
	runs := map[string]*fakeRun{}
	for range 2 {
		r := h.nextRun()
		runs[r.s.Agent] = r
	}
	h.waitFor("alpha", lifecycle.Running)
	h.waitFor("bravo", lifecycle.Running)
	// alpha's session is cut short by urgent mail: its guard still runs,
	// and the repo_tamper it finds holds alpha.
	h.send(message.Draft{From: "operator", To: "alpha", Body: "stop", Urgency: message.Urgent})
	<-runs["alpha"].ctx.Done()
	h.waitFor("alpha", lifecycle.Held)
	// bravo's session is cut short by the supervisor stopping.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	got := h.guardReports()
	if len(got["alpha"]) != 1 || !strings.Contains(got["alpha"][0], "hook interrupted was planted") || !strings.Contains(got["alpha"][0], "repo_tamper") {
		t.Fatalf("alpha's reports = %q", got["alpha"])
	}
	if len(got["bravo"]) != 1 || !strings.Contains(got["bravo"][0], "hook stopped was planted") {
		t.Fatalf("bravo's reports = %q", got["bravo"])
	}
	if s, _ := h.store.Session(context.Background(), "alpha", 1); s.State != mailbox.SessionInterrupted {
		t.Errorf("session 1 = %s, want interrupted", s.State)
	}
}

// KillSessions kills the process groups of the running sessions, even a
// process that ignores SIGTERM.
func TestKillSessionsKillsRunningGroups(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	r := h.nextRun()
	h.waitFor("alpha", lifecycle.Running)
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 100 & wait")
	cmd.Env = append(os.Environ(), sessionMarker("alpha", r.s.Seq))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	r.s.OnProcess(cmd.Process.Pid)
	if n := h.sup.KillSessions(); n != 1 {
		t.Fatalf("KillSessions = %d, want 1", n)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the session's process survived KillSessions")
	}
	deadline := time.Now().Add(10 * time.Second)
	for groupAlive(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("the session's sleep survived KillSessions")
		}
		time.Sleep(10 * time.Millisecond) // polling the kernel's reaping, bounded
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("alpha", lifecycle.Idle)
	// An ended session's groups are no longer the supervisor's to kill.
	if n := h.sup.KillSessions(); n != 0 {
		t.Fatalf("KillSessions after the session ended = %d", n)
	}
}

// afterKill removes the git lock a killed session may have left, once its
// process groups are gone: never while a killed git could still write it.
func TestAfterKillRemovesTheLockOnceTheGroupsAreGone(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 100 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pg := cmd.Process.Pid
	if err := syscall.Kill(-pg, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.sup.afterKill("alpha", []int{pg})
	// Gone: no process of the group runs (zombies not yet reaped count as
	// gone, as they do for afterKill).
	if !proc.AwaitGroupsGone([]int{pg}, time.Millisecond, 0, time.Sleep) {
		t.Fatal("afterKill returned while the killed group was still running")
	}
	<-exited
	wt := h.sup.opts.Worktrees.(*fakeWorktrees)
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.unlocked["alpha"] != 1 {
		t.Fatalf("RemoveStaleLock calls = %v, want one for alpha", wt.unlocked)
	}
}

func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil
}

func TestSessionBookOverlap(t *testing.T) {
	var b sessionBook
	names := []string{"a", "b", "c"}
	a1 := b.open("a", 1)
	b.close("a", 1)
	endA1 := b.lastEnd("a", 2)
	b1 := b.open("b", 1)
	a2 := b.open("a", 2)
	// Between a's sessions only b ran.
	if got := b.overlapping(names, endA1, a2); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("between = %v", got)
	}
	now := b.mark()
	if got := b.overlapping(names, a2, now); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a's session 2 = %v", got)
	}
	if got := b.overlapping(names, a1, endA1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a's session 1 = %v (b started after it)", got)
	}
	_ = b1
}

// TestSessionEndRemovesAStaleLock: a session's end removes the index.lock
// a git killed with SIGKILL left in the worktree (what a sandbox's end
// does to a commit half way), however the session ended: it completed
// here, and nothing was killed by the runner.
func TestSessionEndRemovesAStaleLock(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n")
	h.start()
	r := h.nextRun()
	wt := h.sup.opts.Worktrees.(*fakeWorktrees)
	calls := func() int {
		wt.mu.Lock()
		defer wt.mu.Unlock()
		return wt.unlocked["alpha"]
	}
	if n := calls(); n != 0 {
		t.Fatalf("RemoveStaleLock called %d times before the session ended", n)
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitForSeq("alpha", lifecycle.SessionComplete, 1)
	if n := calls(); n != 1 {
		t.Fatalf("RemoveStaleLock calls after the session = %d, want 1", n)
	}
}
