package swarm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/worktree"
)

// mergeQueueFixture: alpha's worktree holds one commit main lacks.
func mergeQueueFixture(t *testing.T) (mailbox.Store, GitWorktrees, string) {
	t.Helper()
	ctx := context.Background()
	root := gittest.Repo(t, nil)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := worktree.New(ctx, worktree.Options{Root: root, Meta: st})
	if err != nil {
		t.Fatal(err)
	}
	git := GitWorktrees{M: m, Meta: st}
	wt, _, err := git.Ensure(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	gittest.WriteFile(t, filepath.Join(wt, "alpha.txt"), "alpha\n")
	gittest.Git(t, wt, "add", "alpha.txt")
	gittest.Git(t, wt, "commit", "-q", "-m", "alpha: alpha.txt")
	return st, git, root
}

// deadHolder is a holder of this host whose process has exited.
func deadHolder(t *testing.T) mailbox.Holder {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	h := ThisHolder()
	h.PID = cmd.Process.Pid
	return h
}

// TestMergeQueueFinishesAnInterruptedLanding: a process claimed a
// candidate, moved main and died before recording it. The next queue puts
// the candidate back, finds its commit on main and records it landed,
// without a second merge; it lands once.
func TestMergeQueueFinishesAnInterruptedLanding(t *testing.T) {
	ctx := context.Background()
	st, git, root := mergeQueueFixture(t)
	tip, err := git.Tip(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Merge{Batch: 1, CITimeout: time.Minute}
	dying := &MergeQueue{Store: st, Git: git, Cfg: cfg, Holder: deadHolder(t)}
	c, already, err := Enqueue(ctx, st, merge.Candidate{Agent: "alpha", Commit: tip, Source: merge.FromLand, By: "operator"})
	if err != nil || already {
		t.Fatalf("Enqueue = %+v, %v, %v", c, already, err)
	}
	batch, key, err := dying.claim(ctx)
	if err != nil || len(batch) != 1 {
		t.Fatalf("claim = %+v, %v", batch, err)
	}
	res, err := git.TestBatch(ctx, worktree.BatchRequest{Key: key, Candidates: []worktree.BatchCandidate{{Agent: "alpha", Commit: tip}}})
	if err != nil || !res.Passed() {
		t.Fatalf("TestBatch = %+v, %v", res, err)
	}
	// The landing moved main; the process died before its Record.
	if _, err := git.Land(ctx, worktree.LandRequest{Key: key, Agent: "alpha", Prepared: res.Commit, Expected: res.Old}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Candidate(ctx, c.ID); got.State != merge.Testing {
		t.Fatalf("before recovery: %s", got.State)
	}

	q := &MergeQueue{Store: st, Git: git, Cfg: cfg, Holder: ThisHolder()}
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.Candidate(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	main := gittest.Git(t, root, "rev-parse", "main")
	if got.State != merge.Landed || got.LandedAs != main || main != res.Commit {
		t.Fatalf("after recovery: %+v, main %s, the landing %s", got, main, res.Commit)
	}
	if n := gittest.Git(t, root, "rev-list", "--count", "--merges", "main"); n != "1" {
		t.Fatalf("%s merges on main, want 1", n)
	}
	evs, err := st.Events(ctx, mailbox.EventFilter{Kind: "merge"})
	if err != nil {
		t.Fatal(err)
	}
	var tos []string
	for _, e := range evs {
		tos = append(tos, e.To)
	}
	if want := "queued testing queued testing landed"; joinWords(tos) != want {
		t.Fatalf("events %q, want %q", joinWords(tos), want)
	}
}

// TestMergeQueueForgetsAnInterruptedLandingsJournal: a supervisor was
// killed after its landing moved main and before it recorded the
// candidate, leaving the landing's journal entry. The next queue claims
// the candidate under a new key and records it landed; the old key's
// entry must go too, not stay in .swarm/journal/land for ever.
func TestMergeQueueForgetsAnInterruptedLandingsJournal(t *testing.T) {
	ctx := context.Background()
	st, git, root := mergeQueueFixture(t)
	tip, err := git.Tip(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Merge{Batch: 1, CITimeout: time.Minute}
	dying := &MergeQueue{Store: st, Git: git, Cfg: cfg, Holder: deadHolder(t)}
	if _, _, err := Enqueue(ctx, st, merge.Candidate{Agent: "alpha", Commit: tip, Source: merge.FromLand, By: "operator"}); err != nil {
		t.Fatal(err)
	}
	batch, key, err := dying.claim(ctx)
	if err != nil || len(batch) != 1 {
		t.Fatalf("claim = %+v, %v", batch, err)
	}
	res, err := git.TestBatch(ctx, worktree.BatchRequest{Key: key, Candidates: []worktree.BatchCandidate{{Agent: "alpha", Commit: tip}}})
	if err != nil || !res.Passed() {
		t.Fatalf("TestBatch = %+v, %v", res, err)
	}
	// The process dies in its Record: main moved, the entry stays.
	killed := errors.New("killed")
	if _, err := git.Land(ctx, worktree.LandRequest{Key: key, Agent: "alpha", Prepared: res.Commit, Expected: res.Old,
		Record: func(context.Context, worktree.Landing) error { return killed }}); !errors.Is(err, killed) {
		t.Fatalf("Land = %v, want the Record's error", err)
	}
	entries := func() []string {
		ents, _ := os.ReadDir(filepath.Join(root, ".swarm", "journal", "land"))
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	if len(entries()) != 1 {
		t.Fatalf("the killed landing left %v, want its entry", entries())
	}

	q := &MergeQueue{Store: st, Git: git, Cfg: cfg, Holder: ThisHolder()}
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Candidate(ctx, batch[0].ID); got.State != merge.Landed {
		t.Fatalf("after recovery the candidate is %s", got.State)
	}
	if n := gittest.Git(t, root, "rev-list", "--count", "--merges", "main"); n != "1" {
		t.Fatalf("%s merges on main, want 1", n)
	}
	if left := entries(); len(left) != 0 {
		t.Fatalf("landing journal entries left after the candidate was recorded landed: %v", left)
	}
}

// uncleanable is git whose scratch worktrees cannot be removed (a killed
// process's orphaned git still writes in one).
type uncleanable struct{ GitWorktrees }

func (uncleanable) CleanScratch(context.Context) error { return errors.New("directory not empty") }

// TestMergeQueueRecoverRequeuesWhenCleaningFails: a candidate whose test
// a crash cut short goes back to the queue, and lands, even when the
// scratch worktree the crash left cannot be removed yet.
func TestMergeQueueRecoverRequeuesWhenCleaningFails(t *testing.T) {
	ctx := context.Background()
	st, git, _ := mergeQueueFixture(t)
	tip, err := git.Tip(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Merge{Batch: 1, CITimeout: time.Minute}
	dying := &MergeQueue{Store: st, Git: git, Cfg: cfg, Holder: deadHolder(t)}
	c, _, err := Enqueue(ctx, st, merge.Candidate{Agent: "alpha", Commit: tip, Source: merge.FromLand, By: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if batch, _, err := dying.claim(ctx); err != nil || len(batch) != 1 {
		t.Fatalf("claim = %+v, %v", batch, err)
	}
	q := &MergeQueue{Store: st, Git: uncleanable{git}, Cfg: cfg, Holder: ThisHolder()}
	if err := q.Recover(ctx); err == nil || !strings.Contains(err.Error(), "directory not empty") {
		t.Fatalf("Recover = %v, want the cleaning's error", err)
	}
	if got, _ := st.Candidate(ctx, c.ID); got.State != merge.Queued {
		t.Fatalf("after Recover the candidate is %s, want queued", got.State)
	}
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Candidate(ctx, c.ID); got.State != merge.Landed {
		t.Fatalf("after Drain the candidate is %s, want landed", got.State)
	}
}

// TestMergeQueueLeavesALiveClaim: a candidate another live holder is
// testing is not taken back.
func TestMergeQueueLeavesALiveClaim(t *testing.T) {
	ctx := context.Background()
	st, git, _ := mergeQueueFixture(t)
	tip, _ := git.Tip(ctx, "alpha")
	cfg := config.Merge{Batch: 1, CITimeout: time.Minute}
	other := ThisHolder()
	other.Host += "-elsewhere"
	if _, _, err := Enqueue(ctx, st, merge.Candidate{Agent: "alpha", Commit: tip, Source: merge.FromLand, By: "operator"}); err != nil {
		t.Fatal(err)
	}
	if b, _, err := (&MergeQueue{Store: st, Git: git, Cfg: cfg, Holder: other, Now: time.Now}).claim(ctx); err != nil || len(b) != 1 {
		t.Fatalf("claim: %v, %v", b, err)
	}
	q := &MergeQueue{Store: st, Git: git, Cfg: cfg, Holder: ThisHolder()}
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if did, err := q.Step(ctx); err != nil || did {
		t.Fatalf("Step over another host's claim: %v, %v", did, err)
	}
	cs, _ := st.Candidates(ctx, mailbox.CandidateFilter{})
	if len(cs) != 1 || cs[0].State != merge.Testing || cs[0].Claim != other.Host+":"+strconv.Itoa(other.PID) {
		t.Fatalf("candidates = %+v", cs)
	}
}

func joinWords(ws []string) string { return strings.Join(ws, " ") }

// movingGit moves main (an operator's commit) right after the first test:
// the landing's compare-and-set then fails.
type movingGit struct {
	GitWorktrees
	t     *testing.T
	root  string
	moved bool
}

func (g *movingGit) TestBatch(ctx context.Context, req worktree.BatchRequest) (worktree.BatchResult, error) {
	res, err := g.GitWorktrees.TestBatch(ctx, req)
	if !g.moved {
		g.moved = true
		gittest.WriteFile(g.t, filepath.Join(g.root, "op.txt"), "the operator's\n")
		gittest.Git(g.t, g.root, "add", "op.txt")
		gittest.Git(g.t, g.root, "commit", "-q", "-m", "operator: op.txt")
	}
	return res, err
}

// TestMergeQueueRetestsWhenTheBaseMoved: main moved between the test and
// the landing; the candidate goes back to the queue, is tested on the new
// tip and lands on top of it, never forced over it.
func TestMergeQueueRetestsWhenTheBaseMoved(t *testing.T) {
	ctx := context.Background()
	st, git, root := mergeQueueFixture(t)
	tip, _ := git.Tip(ctx, "alpha")
	q := &MergeQueue{Store: st, Git: &movingGit{GitWorktrees: git, t: t, root: root}, Cfg: config.Merge{Batch: 1, CITimeout: time.Minute}, Holder: ThisHolder()}
	c, _, err := Enqueue(ctx, st, merge.Candidate{Agent: "alpha", Commit: tip, Source: merge.FromLand, By: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Candidate(ctx, c.ID)
	op := gittest.Git(t, root, "rev-parse", "main^1")
	if got.State != merge.Landed || gittest.Git(t, root, "log", "-1", "--format=%s", op) != "operator: op.txt" ||
		gittest.Git(t, root, "rev-parse", "main^2") != tip {
		t.Fatalf("candidate %+v; main^1 %s", got, op)
	}
	evs, _ := st.Events(ctx, mailbox.EventFilter{Kind: "merge"})
	var tos []string
	for _, e := range evs {
		tos = append(tos, e.To)
	}
	if want := "queued testing queued testing landed"; joinWords(tos) != want {
		t.Fatalf("events %q, want %q", joinWords(tos), want)
	}
}
