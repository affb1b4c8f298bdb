//go:build reliability

package reliability

import (
	"context"
	"fmt"
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
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/worktree"
)

// landHostRounds is how many rounds of each race TestR9LandOnTwoHosts runs.
const landHostRounds = 10

// TestR9LandOnTwoHosts: two clones of one bare remote ([worktree] push)
// share a PostgreSQL swarm. Each round, both hosts land the same new
// commit of alpha at the same moment (swarm.MergeQueue.LandNow), then each
// lands a different agent's new commit at the same moment. The same
// commit lands exactly once (one merge on the remote's main, one row, the
// other host a no-op); different commits both land, the loser of the push
// race tested again on the new remote main, never forced: the remote's
// main gains exactly one merge per landing and loses nothing.
func TestR9LandOnTwoHosts(t *testing.T) {
	ctx := context.Background()
	c, err := pgtest.Start()
	if err != nil {
		if os.Getenv(pgtest.Require) != "" {
			t.Fatalf("%s is set but: %v", pgtest.Require, err)
		}
		t.Skip(err)
	}
	defer c.Stop()
	url, err := c.CreateDB()
	if err != nil {
		t.Fatal(err)
	}
	first := gittest.Repo(t, nil)
	origin := filepath.Join(t.TempDir(), "origin.git")
	gittest.Git(t, first, "init", "-q", "--bare", origin)
	gittest.Git(t, first, "push", "-q", origin, "main")
	type host struct {
		root string
		git  swarm.GitWorktrees
		q    *swarm.MergeQueue
	}
	var hosts []*host
	for _, name := range []string{"host1", "host2"} {
		root := filepath.Join(t.TempDir(), name)
		gittest.Git(t, first, "clone", "-q", "-b", "main", origin, root)
		gittest.Git(t, root, "config", "user.name", "Test Operator")
		gittest.Git(t, root, "config", "user.email", "op@example.com")
		st, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		m, err := worktree.New(ctx, worktree.Options{Root: root, Meta: st})
		if err != nil {
			t.Fatal(err)
		}
		git := swarm.GitWorktrees{M: m, Meta: st}
		hosts = append(hosts, &host{root: root, git: git, q: &swarm.MergeQueue{Store: st, Git: git,
			Cfg: config.Merge{Batch: 1, CITimeout: time.Minute}, Remote: "origin", Holder: mailbox.Holder{Host: name, PID: os.Getpid()}}})
	}
	// commit makes a new commit of agent's branch on host h, pushes it and
	// fetches it on the other host.
	commit := func(h int, agent, file string) string {
		wt, _, err := hosts[h].git.Ensure(ctx, agent)
		if err != nil {
			t.Fatal(err)
		}
		gittest.WriteFile(t, filepath.Join(wt, file), file+"\n")
		gittest.Git(t, wt, "add", file)
		gittest.Git(t, wt, "commit", "-q", "-m", agent+": "+file)
		if err := hosts[h].git.Push(ctx, "origin", agent); err != nil {
			t.Fatal(err)
		}
		if _, err := hosts[1-h].git.M.Fetch(ctx, "origin", []string{agent}); err != nil {
			t.Fatal(err)
		}
		tip, err := hosts[h].git.Tip(ctx, agent)
		if err != nil {
			t.Fatal(err)
		}
		return tip
	}
	race := func(cs [2]merge.Candidate) [2]*worktree.Landing {
		var ls [2]*worktree.Landing
		var errs [2]error
		var got [2]merge.Candidate
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range hosts {
			wg.Go(func() {
				<-start
				got[i], ls[i], errs[i] = hosts[i].q.LandNow(ctx, cs[i])
			})
		}
		close(start)
		wg.Wait()
		for i := range hosts {
			if errs[i] != nil || got[i].State != merge.Landed {
				t.Fatalf("host %d: LandNow = %+v, %v", i+1, got[i], errs[i])
			}
		}
		return ls
	}
	merges := func() int {
		var n int
		fmt.Sscan(gittest.Git(t, origin, "rev-list", "--count", "--merges", "main"), &n)
		return n
	}
	want := 0
	// Each host lands on its own clone and is not cleaned between rounds:
	// the loser of a round fetches the winner's landing before its next.
	for round := range landHostRounds {
		tip := commit(round%2, "alpha", fmt.Sprintf("a%d.txt", round))
		c := merge.Candidate{Agent: "alpha", Commit: tip, Source: merge.FromLand, By: "operator"}
		ls := race([2]merge.Candidate{c, c})
		if (ls[0] == nil) == (ls[1] == nil) {
			t.Fatalf("round %d: the same commit: landings %+v and %+v, want exactly one", round, ls[0], ls[1])
		}
		want++
		if got := merges(); got != want {
			t.Fatalf("round %d: %d merges on origin's main, want %d", round, got, want)
		}
		rows, err := hosts[0].q.Store.Candidates(ctx, mailbox.CandidateFilter{Agent: "alpha"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rows {
			if r.Commit == tip {
				n++
				if r.State != merge.Landed {
					t.Fatalf("round %d: a twin row %+v", round, r)
				}
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d rows for %s, want one", round, n, tip)
		}

		b := commit(0, "beta", fmt.Sprintf("b%d.txt", round))
		g := commit(1, "gamma", fmt.Sprintf("g%d.txt", round))
		race([2]merge.Candidate{
			{Agent: "beta", Commit: b, Source: merge.FromLand, By: "operator"},
			{Agent: "gamma", Commit: g, Source: merge.FromLand, By: "operator"},
		})
		want += 2
		if got := merges(); got != want {
			t.Fatalf("round %d: %d merges on origin's main, want %d", round, got, want)
		}
		for _, h := range []string{b, g, tip} {
			gittest.Git(t, origin, "merge-base", "--is-ancestor", h, "main")
		}
	}
	evs, err := hosts[0].q.Store.Events(ctx, mailbox.EventFilter{Kind: "merge"})
	if err != nil {
		t.Fatal(err)
	}
	retests := 0
	for _, e := range evs {
		if strings.Contains(e.Cause, "moved after the test") {
			retests++
		}
	}
	t.Logf("%d rounds: %d merges on origin's main, %d candidates tested again after losing the push race", landHostRounds, merges(), retests)
}
