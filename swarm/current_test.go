package swarm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/worktree"
)

// newGitHarness is a harness on a real repository: real worktrees (with
// their guard), real prompts, scripted sessions (the fake engine: the test
// works in the worktrees while a session runs).
func newGitHarness(t *testing.T, extra string, agents ...string) (*harness, string) {
	t.Helper()
	root := gittest.Repo(t, map[string]string{"README.md": "hello\n", "api.go": "package api\n\nfunc Users() {}\n"})
	// The operator's identity, so the guard takes their commits on main as theirs.
	gittest.Git(t, root, "config", "user.name", "test")
	gittest.Git(t, root, "config", "user.email", "test@example.com")
	gittest.WriteFile(t, filepath.Join(root, ".git", "info", "exclude"), ".swarm/\n")
	toml := baseConfig + "[sandbox]\nmode = \"none\"\n" + extra
	for _, a := range agents {
		toml += fmt.Sprintf("[[agent]]\nname = %q\n", a)
	}
	cfg, err := config.Parse([]byte(toml), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	ctx := context.Background()
	store, err := sqlite.Open(ctx, l.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m, err := worktree.New(ctx, worktree.Options{Root: root, Meta: store})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: store, layout: l, notices: make(chan lifecycle.Notice, 1000),
		eng: &fakeEngine{name: "script", runs: make(chan *fakeRun, 100)}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sup, err := New(Options{
		Config: cfg, Layout: l, Store: store,
		Engines:   func(config.Agent) (engine.Engine, error) { return h.eng, nil },
		Worktrees: GitWorktrees{M: m, Meta: store},
		Prompts:   NewPipePrompts(cfg, l, store, nil, time.Now, log),
		Rand:      func() float64 { return 0.5 },
		Notify:    func(n lifecycle.Notice) { h.notices <- n },
		Logger:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.sup = sup
	return h, root
}

// runs takes the next n sessions, by agent.
func (h *harness) runsOf(n int) map[string]*fakeRun {
	h.t.Helper()
	runs := map[string]*fakeRun{}
	for range n {
		r := h.nextRun()
		runs[r.s.Agent] = r
	}
	return runs
}

// commitIn commits path with content in dir, as the session there would.
func commitIn(t *testing.T, dir, path, content string) {
	t.Helper()
	gittest.WriteFile(t, filepath.Join(dir, path), content)
	gittest.Git(t, dir, "add", path)
	gittest.Git(t, dir, "commit", "-q", "-m", "work on "+path)
}

// TestAgentsKeptCurrentAndWarned runs three scripted agents. alpha and
// bob both change api.go; carol changes only her own file. Then the
// operator changes api.go on main by hand. The next sessions: carol's
// prompt names the merge that brought her branch up to date (a commit
// saying so is on swarm/carol); alpha's and bob's prompts each name the
// other and api.go, and say main conflicts; each got one mail from swarm
// listing api.go and the commands; their branches did not move. A third
// session mails nothing again. No guard finding is raised.
func TestAgentsKeptCurrentAndWarned(t *testing.T) {
	h, root := newGitHarness(t, "", "alpha", "bob", "carol")
	h.start()
	runs := h.runsOf(3)
	commitIn(t, runs["alpha"].s.Worktree, "api.go", "package api\n\nfunc Users() { /* alpha */ }\n")
	commitIn(t, runs["bob"].s.Worktree, "api.go", "package api\n\nfunc Users() { /* bob */ }\n")
	commitIn(t, runs["carol"].s.Worktree, "carol.txt", "carol's\n")
	for _, a := range []string{"alpha", "bob", "carol"} {
		runs[a].finish <- engine.Result{Outcome: engine.Success}
		h.waitFor(a, lifecycle.Idle)
	}
	tips := map[string]string{}
	for _, a := range []string{"alpha", "bob", "carol"} {
		tips[a] = gittest.Git(t, root, "rev-parse", "swarm/"+a)
	}

	// The operator moves main by hand.
	commitIn(t, root, "api.go", "package api\n\nfunc Users() { /* main */ }\n")
	mainTip := gittest.Git(t, root, "rev-parse", "main")
	short := mainTip[:7]

	wake := func() map[string]*fakeRun {
		for _, a := range []string{"alpha", "bob", "carol"} {
			h.send(message.Draft{From: "operator", To: a, Body: "go on"})
		}
		return h.runsOf(3)
	}
	runs = wake()
	carol := runs["carol"].s.Prompt
	if want := fmt.Sprintf("Branch: swarm merged main (%s: 1 commit from test) into your branch before this session", short); !strings.Contains(carol, want) {
		t.Fatalf("carol's prompt lacks %q:\n%s", want, section(carol, "Environment"))
	}
	head := gittest.Git(t, root, "rev-parse", "swarm/carol")
	if got := gittest.Git(t, root, "rev-parse", head+"^1", head+"^2"); got != tips["carol"]+"\n"+mainTip {
		t.Fatalf("swarm/carol's tip has parents %q, want her work and main", got)
	}
	if subj := gittest.Git(t, root, "log", "-1", "--format=%s", "swarm/carol"); subj != worktree.CurrentSubject("carol", "main", mainTip) {
		t.Fatalf("swarm/carol's tip says %q", subj)
	}
	if got := gittest.ReadFile(t, filepath.Join(runs["carol"].s.Worktree, "api.go")); !strings.Contains(got, "main") {
		t.Fatalf("carol's worktree was not switched with her branch: api.go is %q", got)
	}
	for a, mate := range map[string]string{"alpha": "bob", "bob": "alpha"} {
		p := runs[a].s.Prompt
		for _, want := range []string{
			"Overlap: you and " + mate + " both changed api.go; your branches conflict in api.go",
			"Branch: main is ahead of your branch (" + short + ": 1 commit) and merging it conflicts in api.go",
			"merging it into your branch swarm/" + a + " conflicts in: api.go",
		} {
			if !strings.Contains(p, want) {
				t.Fatalf("%s's prompt lacks %q:\n%s", a, want, p)
			}
		}
		if now := gittest.Git(t, root, "rev-parse", "swarm/"+a); now != tips[a] {
			t.Fatalf("swarm/%s moved on a conflict", a)
		}
	}
	for _, a := range []string{"alpha", "bob", "carol"} {
		runs[a].finish <- engine.Result{Outcome: engine.Success}
		h.waitFor(a, lifecycle.Idle)
	}

	// Once per base commit: the next sessions get no second mail.
	runs = wake()
	for _, a := range []string{"alpha", "bob"} {
		if strings.Contains(runs[a].s.Prompt, "merging it into your branch") {
			t.Fatalf("%s was mailed its conflict again:\n%s", a, runs[a].s.Prompt)
		}
		ms, err := h.store.Inbox(context.Background(), a, mailbox.Filter{From: message.Swarm})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || !strings.Contains(ms[0].Body, "git merge "+short) {
			t.Fatalf("%s got %d mails from swarm: %v", a, len(ms), ms)
		}
	}
	if strings.Contains(runs["carol"].s.Prompt, "swarm merged") {
		t.Fatal("carol's next prompt names a merge again")
	}
	for _, a := range []string{"alpha", "bob", "carol"} {
		runs[a].finish <- engine.Result{Outcome: engine.Success}
		h.waitFor(a, lifecycle.Idle)
	}
	if es, err := h.store.Escalations(context.Background(), mailbox.EscalationFilter{All: true}); err != nil || len(es) != 0 {
		t.Fatalf("escalations: %v, %v", es, err)
	}
}

// TestKeepCurrentOff: with [worktree] keep_current = false the branch is
// left behind and nothing is said of it.
func TestKeepCurrentOff(t *testing.T) {
	h, root := newGitHarness(t, "[worktree]\nkeep_current = false\n", "carol")
	h.start()
	r := h.nextRun()
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("carol", lifecycle.Idle)
	tip := gittest.Git(t, root, "rev-parse", "swarm/carol")
	commitIn(t, root, "ops.txt", "the operator's\n")
	h.send(message.Draft{From: "operator", To: "carol", Body: "go on"})
	r = h.nextRun()
	if strings.Contains(r.s.Prompt, "swarm merged") || gittest.Git(t, root, "rev-parse", "swarm/carol") != tip {
		t.Fatal("keep_current = false still merged main")
	}
	if _, err := os.Stat(filepath.Join(r.s.Worktree, "ops.txt")); err == nil {
		t.Fatal("keep_current = false still switched the worktree")
	}
	r.finish <- engine.Result{Outcome: engine.Success}
	h.waitFor("carol", lifecycle.Idle)
}

// section returns the body of the prompt's section titled title.
func section(prompt, title string) string {
	_, rest, ok := strings.Cut(prompt, "## "+title+"\n")
	if !ok {
		return prompt
	}
	body, _, _ := strings.Cut(rest, "\n## ")
	return body
}
