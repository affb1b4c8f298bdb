package swarm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/worktree"
)

// The guard baseline survives a restart: a commit that lands on the base
// branch after the last check and before the next `swarm up` (a detached
// `git commit &` the kill did not reach) is found at the agent's first
// session in the new process.
func TestGitWorktreesKeepsTheGuardBaselineAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	root := gittest.Repo(t, nil)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	manager := func() GitWorktrees {
		m, err := worktree.New(ctx, worktree.Options{Root: root, Meta: st})
		if err != nil {
			t.Fatal(err)
		}
		return GitWorktrees{M: m, Meta: st}
	}
	w := manager()
	if _, _, err := w.Ensure(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	g, err := w.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if found, err := g.Check(ctx); err != nil || len(found) != 0 {
		t.Fatalf("clean session: %v, %v", found, err)
	}
	if _, ok, _ := st.Meta(ctx, MetaGuardBaseline+"alpha"); !ok {
		t.Fatal("no baseline stored after the check")
	}

	// swarm is down; the late commit lands.
	gittest.WriteFile(t, filepath.Join(root, "late.txt"), "late\n")
	gittest.Git(t, root, "add", "late.txt")
	gittest.Git(t, root, "-c", "user.name=swarm/alpha", "commit", "-q", "-m", "late commit")

	w2 := manager()
	g2, err := w2.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	prior := g2.Prior()
	if len(prior) != 1 || prior[0].Escalation() != "branch_violation" || !strings.Contains(prior[0].String(), "late commit") {
		t.Fatalf("Prior after the restart = %v", prior)
	}
}
