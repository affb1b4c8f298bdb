package worktree

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestGuardCleanSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	g, err := f.m.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if g.BaseTip() != f.git(".", "rev-parse", "main") {
		t.Fatalf("BaseTip = %s", g.BaseTip())
	}
	// The agent commits on its branch, the operator and another agent on
	// main: none of that is a finding for alpha.
	f.commitAs("swarm/alpha", wt.Path, "a.txt", "a\n", "alpha work")
	f.commitAs("Test Operator", ".", "op.txt", "op\n", "operator work")
	f.commitAs("swarm/bravo", ".", "b.txt", "b\n", "bravo leak")
	found, err := g.Check(ctx)
	if err != nil || len(found) != 0 {
		t.Fatalf("Check = %+v, %v; want nothing", found, err)
	}
	if err := g.Err(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestGuardFindsWorktreeOffBranch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		head string
	}{
		{"switch -c", []string{"switch", "-q", "-c", "other"}, "branch other"},
		{"checkout --detach", []string{"checkout", "-q", "--detach"}, "a detached HEAD at "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			wt := f.ensure("alpha")
			g, err := f.m.Guard(ctx, "alpha")
			if err != nil {
				t.Fatal(err)
			}
			f.git(wt.Path, tc.args...)
			found, err := g.Check(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 1 || found[0].Kind != FindingLeftBranch || found[0].Agent != "alpha" || !strings.HasPrefix(found[0].Head, tc.head) {
				t.Fatalf("Check = %+v", found)
			}
			if msg := found[0].String(); !strings.Contains(msg, "not swarm/alpha") || !strings.Contains(msg, "switch swarm/alpha") {
				t.Fatalf("message %q does not say what happened and what to do", msg)
			}
			var ge *GuardError
			if err := g.Err(ctx); !errors.As(err, &ge) || ge.Agent != "alpha" || len(ge.Findings) != 1 {
				t.Fatalf("Err = %v, want a *GuardError", err)
			}
			// A new session cannot start there.
			if _, err := f.m.Guard(ctx, "alpha"); !errors.Is(err, ErrWrongBranch) {
				t.Fatalf("Guard off the branch = %v, want ErrWrongBranch", err)
			}
		})
	}
}

func TestGuardFindsCommitsOnBase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.ensure("alpha")
	g, err := f.m.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	// The leak: the agent commits in the repo root, on main, as itself.
	f.commitAs("swarm/alpha", ".", "leak.txt", "oops\n", "alpha writes on main")
	f.commitAs("Test Operator", ".", "op.txt", "op\n", "operator work")
	found, err := g.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Kind != FindingBaseCommits {
		t.Fatalf("Check = %+v", found)
	}
	c := found[0].Commits
	if len(c) != 1 || !strings.HasSuffix(c[0], " alpha writes on main") {
		t.Fatalf("Commits = %q", c)
	}
	if msg := found[0].Message; !strings.Contains(msg, "main") || !strings.Contains(msg, "alpha writes on main") {
		t.Fatalf("message = %q", msg)
	}
	// The next session starts from the new tip: the old leak is not found
	// again.
	g2, err := f.m.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if found, err := g2.Check(ctx); err != nil || len(found) != 0 {
		t.Fatalf("second session Check = %+v, %v", found, err)
	}
}

func TestGuardFindsBoth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	g, err := f.m.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	f.git(wt.Path, "checkout", "-q", "--detach")
	f.commitAs("swarm/alpha", ".", "leak.txt", "oops\n", "leak")
	found, err := g.Check(ctx)
	if err != nil || len(found) != 2 || found[0].Kind != FindingLeftBranch || found[1].Kind != FindingBaseCommits {
		t.Fatalf("Check = %+v, %v", found, err)
	}
}
