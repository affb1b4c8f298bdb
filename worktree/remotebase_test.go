package worktree

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// remoteFixture is landFixture with a shared bare remote holding main, and
// another host's clone of it (g) that can move the remote's main.
func remoteFixture(t *testing.T) (f, g *fixture, reviewed, before string) {
	t.Helper()
	f, _, reviewed, before = landFixture(t)
	origin := filepath.Join(t.TempDir(), "origin.git")
	f.git(".", "init", "-q", "--bare", origin)
	f.git(".", "remote", "add", "origin", origin)
	f.git(".", "push", "-q", "origin", "main")
	g = &fixture{t: t, root: filepath.Join(t.TempDir(), "other"), env: f.env, meta: &memMeta{}}
	f.git(".", "clone", "-q", origin, g.root)
	g.m = g.manager(Options{})
	return f, g, reviewed, before
}

// otherHostLands moves the remote's main from the other clone, as a
// landing on another host does; it returns the new remote tip.
func (g *fixture) otherHostLands() string {
	g.t.Helper()
	g.git(".", "fetch", "-q", "origin")
	g.git(".", "checkout", "-q", "-B", "main", "origin/main")
	g.commitAs("Test Operator", ".", "other.txt", "from the other host\n", "other host: other.txt")
	g.git(".", "push", "-q", "origin", "main")
	return g.git(".", "rev-parse", "main")
}

func (f *fixture) remoteMain() string {
	f.t.Helper()
	out := f.git(".", "ls-remote", "origin", "refs/heads/main")
	tip, _, _ := strings.Cut(out, "\t")
	return tip
}

// TestLandPushesTheBaseByCompareAndSet: with a remote, the landing moves
// the remote's main too, to the very merge commit of the local main.
func TestLandPushesTheBaseByCompareAndSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _, reviewed, before := remoteFixture(t)
	if s, err := f.m.SyncBase(ctx, "origin", false); err != nil || s.Old != before || s.New != before {
		t.Fatalf("SyncBase of an up to date main = %+v, %v", s, err)
	}
	req := helperLanding(reviewed, filepath.Join(t.TempDir(), "record"))
	req.Remote = "origin"
	l, err := f.m.Land(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	tip := f.checkLanded(before, reviewed)
	if l.Commit != tip || f.remoteMain() != tip {
		t.Fatalf("landed %s, local main %s, origin's main %s: want all the same", l.Commit, tip, f.remoteMain())
	}
	if keys := f.landings(); len(keys) != 0 {
		t.Fatalf("journal entries left: %v", keys)
	}
}

// TestLandLeaseFailureMovesNothing: another host moved the remote's main
// after this host synced; the push's lease fails, nothing is forced, the
// local main goes back to where it was (the checkout with it), and after
// SyncBase the same candidate lands on top of the other host's work.
func TestLandLeaseFailureMovesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, g, reviewed, before := remoteFixture(t)
	theirs := g.otherHostLands()
	// An idle host's fetch: it knows it is behind, nothing moved.
	if tip, err := f.m.FetchBase(ctx, "origin"); err != nil || tip != theirs {
		t.Fatalf("FetchBase = %s, %v, want %s", tip, err, theirs)
	}
	if _, n, err := f.m.RemoteBehind(ctx); err != nil || n != 1 || f.git(".", "rev-parse", "main") != before {
		t.Fatalf("RemoteBehind = %d, %v; main %s: want 1 behind, main unmoved", n, err, f.git(".", "rev-parse", "main"))
	}
	req := helperLanding(reviewed, filepath.Join(t.TempDir(), "record"))
	req.Remote = "origin"
	_, err := f.m.Land(ctx, req)
	if !errors.Is(err, ErrBaseMoved) {
		t.Fatalf("Land on a remote another host moved = %v, want ErrBaseMoved", err)
	}
	if got := f.remoteMain(); got != theirs {
		t.Fatalf("origin's main is %s, want the other host's %s: forced", got, theirs)
	}
	if got := f.git(".", "rev-parse", "main"); got != before {
		t.Fatalf("local main is %s after the refused push, want it back at %s", got, before)
	}
	f.checkCheckout()
	if keys := f.landings(); len(keys) != 0 {
		t.Fatalf("journal entries left: %v", keys)
	}

	// The next run syncs first: main fast-forwards (the clean checkout
	// comes along), then the candidate lands on top, pushed.
	s, err := f.m.SyncBase(ctx, "origin", false)
	if err != nil || s.Old != before || s.New != theirs {
		t.Fatalf("SyncBase = %+v, %v, want %s..%s", s, err, before, theirs)
	}
	if readFile(t, filepath.Join(f.root, "other.txt")) != "from the other host\n" {
		t.Fatal("the checkout was not brought forward to the remote's main")
	}
	if _, err := f.m.Land(ctx, req); err != nil {
		t.Fatal(err)
	}
	tip := f.checkLanded(theirs, reviewed)
	if f.remoteMain() != tip {
		t.Fatalf("origin's main %s, local %s", f.remoteMain(), tip)
	}
}

// TestSyncBaseRefusesALocalBaseAhead: a main with a commit the remote lacks
// is neither pushed nor moved; the error says what to do.
func TestSyncBaseRefusesALocalBaseAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _, _, before := remoteFixture(t)
	f.commitAs("Test Operator", ".", "mine.txt", "only here\n", "operator: only here")
	local := f.git(".", "rev-parse", "main")
	_, err := f.m.SyncBase(ctx, "origin", false)
	if !errors.Is(err, ErrBaseAhead) || !strings.Contains(err.Error(), "git push origin main") {
		t.Fatalf("SyncBase = %v, want ErrBaseAhead saying to push", err)
	}
	if f.git(".", "rev-parse", "main") != local || f.remoteMain() != before {
		t.Fatal("SyncBase moved a base")
	}
}

// TestLandKilledBeforeThePush: kill -9 after the local move, before the
// push. The next run pushes it (the remote still at the old tip): one
// merge on both mains. When another host moved the remote meanwhile, the
// next run moves the local main back instead: nothing forced. Killed just
// after the push, the next run finds it on the remote and finishes.
func TestLandKilledBeforeThePush(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, step string
		moved      bool
	}{{"remote-still-old", "moved", false}, {"remote-moved", "moved", true}, {"after-the-push", "pushed", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f, g, reviewed, before := remoteFixture(t)
			record := filepath.Join(t.TempDir(), "record")
			interrupt(t, f, "land", "", "SWARM_WT_LAND_KILL="+tc.step, "SWARM_WT_LAND_COMMIT="+reviewed,
				"SWARM_WT_LAND_RECORD="+record, "SWARM_WT_LAND_REMOTE=origin")
			local := f.git(".", "rev-parse", "main")
			if pushed := f.remoteMain() == local; local == before || pushed != (tc.step == "pushed") || exists(record) {
				t.Fatalf("killed at %s: main %s, origin's %s, recorded %v", tc.step, local, f.remoteMain(), exists(record))
			}
			req := helperLanding(reviewed, record)
			req.Remote = "origin"
			m := f.manager(Options{})
			if !tc.moved {
				l, err := m.Land(ctx, req)
				if err != nil {
					t.Fatalf("the re-run: %v", err)
				}
				tip := f.checkLanded(before, reviewed)
				if f.remoteMain() != tip {
					t.Fatalf("origin's main %s, local %s", f.remoteMain(), tip)
				}
				if tc.step == "moved" && !strings.Contains(recoveredText(l.Recovered), "pushed main to origin") {
					t.Fatalf("recovered %q, want the push finished", recoveredText(l.Recovered))
				}
				if !strings.HasPrefix(readFile(t, record), "recorded "+tip) {
					t.Fatalf("recorded %q", readFile(t, record))
				}
			} else {
				theirs := g.otherHostLands()
				_, err := m.Land(ctx, req)
				if !errors.Is(err, ErrBaseMoved) {
					t.Fatalf("the re-run = %v, want ErrBaseMoved", err)
				}
				if f.git(".", "rev-parse", "main") != before || f.remoteMain() != theirs || exists(record) {
					t.Fatalf("local main %s (want %s), origin's %s (want %s), recorded %v",
						f.git(".", "rev-parse", "main"), before, f.remoteMain(), theirs, exists(record))
				}
				f.checkCheckout()
			}
			if keys := f.landings(); len(keys) != 0 {
				t.Fatalf("journal entries left: %v", keys)
			}
		})
	}
}

// TestPruneRemoteDeletesOnlyLandedBranches: the remote swarm/alpha whose
// commits the remote's main holds is deleted; one with a commit main lacks
// is kept; an absent one is said absent.
func TestPruneRemoteDeletesOnlyLandedBranches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _, reviewed, _ := remoteFixture(t)
	// alpha's branch has a commit after the reviewed one (landFixture).
	f.git(".", "push", "-q", "origin", "swarm/alpha")
	req := helperLanding(reviewed, filepath.Join(t.TempDir(), "record"))
	req.Remote = "origin"
	if _, err := f.m.Land(ctx, req); err != nil {
		t.Fatal(err)
	}
	p, err := f.m.PruneRemote(ctx, "origin", "alpha")
	if err != nil || p.What != "kept" {
		t.Fatalf("PruneRemote of a branch with a commit main lacks = %+v, %v, want kept", p, err)
	}
	f.git(".", "push", "-q", "-f", "origin", reviewed+":refs/heads/swarm/alpha")
	p, err = f.m.PruneRemote(ctx, "origin", "alpha")
	if err != nil || p.What != "deleted" || p.Tip != reviewed {
		t.Fatalf("PruneRemote of a landed branch = %+v, %v, want deleted", p, err)
	}
	if out := f.git(".", "ls-remote", "origin", "refs/heads/swarm/alpha"); out != "" {
		t.Fatalf("origin still has swarm/alpha: %s", out)
	}
	if p, err = f.m.PruneRemote(ctx, "origin", "alpha"); err != nil || p.What != "absent" {
		t.Fatalf("PruneRemote again = %+v, %v, want absent", p, err)
	}
	if f.git(".", "for-each-ref", "refs/swarm/prune") != "" {
		t.Fatal("the aside ref was left")
	}
}
