package swarm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/internal/pgtest"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/postgres"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/worktree"
)

// landHost is one host of a swarm on two: its own clone of the shared
// bare remote, its own store connection, its own merge queue.
type landHost struct {
	root string
	git  GitWorktrees
	q    *MergeQueue
}

// twoLandHosts: a bare origin holding main; two clones of it sharing one
// PostgreSQL database; agents alpha and beta each with a commit main
// lacks, made on host 1 and pushed ([worktree] push), fetched on host 2.
func twoLandHosts(t *testing.T) (h1, h2 *landHost, origin string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgtest.Start()
	if err != nil {
		if os.Getenv(pgtest.Require) != "" {
			t.Fatalf("%s is set but: %v", pgtest.Require, err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	url, err := c.CreateDB()
	if err != nil {
		t.Fatal(err)
	}
	first := gittest.Repo(t, nil)
	origin = filepath.Join(t.TempDir(), "origin.git")
	gittest.Git(t, first, "init", "-q", "--bare", origin)
	gittest.Git(t, first, "push", "-q", origin, "main")
	host := func(name string) *landHost {
		root := filepath.Join(t.TempDir(), name)
		gittest.Git(t, first, "clone", "-q", "-b", "main", origin, root)
		gittest.Git(t, root, "config", "user.name", "Test Operator")
		gittest.Git(t, root, "config", "user.email", "op@example.com")
		st, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		m, err := worktree.New(ctx, worktree.Options{Root: root, Meta: st})
		if err != nil {
			t.Fatal(err)
		}
		git := GitWorktrees{M: m, Meta: st}
		q := &MergeQueue{Store: st, Git: git, Cfg: config.Merge{Batch: 1, CITimeout: time.Minute}, Remote: "origin",
			Holder: mailbox.Holder{Host: name, PID: os.Getpid()}}
		return &landHost{root: root, git: git, q: q}
	}
	h1, h2 = host("host1"), host("host2")
	for _, a := range []string{"alpha", "beta"} {
		wt, _, err := h1.git.Ensure(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		gittest.WriteFile(t, filepath.Join(wt, a+".txt"), a+"\n")
		gittest.Git(t, wt, "add", a+".txt")
		gittest.Git(t, wt, "commit", "-q", "-m", a+": "+a+".txt")
		if err := h1.git.Push(ctx, "origin", a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h2.git.M.Fetch(ctx, "origin", []string{"alpha", "beta"}); err != nil {
		t.Fatal(err)
	}
	return h1, h2, origin
}

// landAll runs LandNow on each host at once, host i for candidate cs[i].
func landAll(t *testing.T, hosts []*landHost, cs []merge.Candidate) ([]merge.Candidate, []*worktree.Landing) {
	t.Helper()
	ctx := context.Background()
	got := make([]merge.Candidate, len(hosts))
	ls := make([]*worktree.Landing, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, h := range hosts {
		wg.Go(func() {
			<-start
			got[i], ls[i], errs[i] = h.q.LandNow(ctx, cs[i])
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("host %d: LandNow: %v", i+1, err)
		}
	}
	return got, ls
}

// TestTwoHostsLandOneCandidateOnce: both hosts land alpha's commit at
// once. It lands exactly once: one merge commit on the remote's main,
// one landed row; the other host's LandNow lands nothing and returns
// that row. Run again later from either host, it is still a no-op.
func TestTwoHostsLandOneCandidateOnce(t *testing.T) {
	ctx := context.Background()
	h1, h2, origin := twoLandHosts(t)
	before := gittest.Git(t, origin, "rev-parse", "main")
	tip, err := h1.git.Tip(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	c := merge.Candidate{Agent: "alpha", Commit: tip, Source: merge.FromLand, By: "operator"}
	got, ls := landAll(t, []*landHost{h1, h2}, []merge.Candidate{c, c})
	if got[0].State != merge.Landed || got[1].State != merge.Landed || got[0].ID != got[1].ID {
		t.Fatalf("LandNow = %+v and %+v, want the same candidate landed", got[0], got[1])
	}
	if (ls[0] == nil) == (ls[1] == nil) {
		t.Fatalf("landings %+v and %+v: want exactly one host to have landed", ls[0], ls[1])
	}
	main := gittest.Git(t, origin, "rev-parse", "main")
	if n := gittest.Git(t, origin, "rev-list", "--count", "--merges", before+".."+main); n != "1" {
		t.Fatalf("%s merges on origin's main, want 1", n)
	}
	if gittest.Git(t, origin, "rev-parse", "main^2") != tip || got[0].LandedAs != main {
		t.Fatalf("origin's main %s (second parent %s), landed as %s", main, gittest.Git(t, origin, "rev-parse", "main^2"), got[0].LandedAs)
	}
	for i, h := range []*landHost{h1, h2} {
		again, l, err := h.q.LandNow(ctx, c)
		if err != nil || l != nil || again.ID != got[0].ID {
			t.Fatalf("host %d again: %+v, %+v, %v: want the landed row, nothing done", i+1, again, l, err)
		}
	}
	// One row, landed: no twin queued, cancelled or landed beside it.
	cs, err := h1.q.Store.Candidates(ctx, mailbox.CandidateFilter{Agent: "alpha"})
	if err != nil || len(cs) != 1 || cs[0].State != merge.Landed {
		t.Fatalf("alpha's rows %+v, %v: want one, landed", cs, err)
	}
	if gittest.Git(t, origin, "rev-parse", "main") != main {
		t.Fatal("origin's main moved again")
	}
}

// TestTwoHostsLandDifferentCandidatesByCompareAndSet: host 1 lands alpha
// and host 2 beta at once. The push of one of them finds the remote moved
// (its lease fails): it is tested again on the new remote main and lands
// on top, never forced. Both land once, both mains end equal.
func TestTwoHostsLandDifferentCandidatesByCompareAndSet(t *testing.T) {
	ctx := context.Background()
	h1, h2, origin := twoLandHosts(t)
	before := gittest.Git(t, origin, "rev-parse", "main")
	var cs []merge.Candidate
	for _, a := range []string{"alpha", "beta"} {
		tip, err := h1.git.Tip(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, merge.Candidate{Agent: a, Commit: tip, Source: merge.FromLand, By: "operator"})
	}
	got, _ := landAll(t, []*landHost{h1, h2}, cs)
	for i, c := range got {
		if c.State != merge.Landed {
			t.Fatalf("host %d: %+v, want landed", i+1, c)
		}
	}
	main := gittest.Git(t, origin, "rev-parse", "main")
	if n := gittest.Git(t, origin, "rev-list", "--count", "--merges", before+".."+main); n != "2" {
		t.Fatalf("%s merges on origin's main, want 2", n)
	}
	for _, c := range cs {
		if on := gittest.Git(t, origin, "merge-base", "--is-ancestor", c.Commit, main); on != "" {
			t.Fatal(on)
		}
	}
	// The host that landed last is at the remote's main; the other
	// fetches it before its next landing.
	if _, err := h1.git.SyncBase(ctx, "origin", false); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.git.SyncBase(ctx, "origin", false); err != nil {
		t.Fatal(err)
	}
	for i, h := range []*landHost{h1, h2} {
		if got := gittest.Git(t, h.root, "rev-parse", "main"); got != main {
			t.Fatalf("host %d's main %s, origin's %s", i+1, got, main)
		}
	}
	evs, err := h1.q.Store.Events(ctx, mailbox.EventFilter{Kind: "merge"})
	if err != nil {
		t.Fatal(err)
	}
	var tos []string
	for _, e := range evs {
		tos = append(tos, e.To)
	}
	if strings.Count(strings.Join(tos, " "), "landed") != 2 {
		t.Fatalf("events %q: want two landings", tos)
	}
}
