package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/internal/text"
)

// The guard tests play the agents' part with the test's own git calls:
// the session environment sets GIT_COMMITTER_NAME=swarm/<agent>, which is
// also the identity git writes into reflogs, so "as swarm/alpha" below
// means what an agent's git does.

// gitWith runs git as the operator with extra environment (later wins).
func (f *fixture) gitWith(dir string, env []string, args ...string) string {
	f.t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(f.root, dir)
	}
	return gitEnv(f.t, append(operatorEnv(f.env), env...), dir, args...)
}

// as is the environment of git run by who.
func as(who string) []string {
	return []string{"GIT_AUTHOR_NAME=" + who, "GIT_COMMITTER_NAME=" + who}
}

// commitWith commits path with content in dir with extra environment.
func (f *fixture) commitWith(dir string, env []string, path, content, msg string) string {
	f.t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(f.root, dir)
	}
	writeFile(f.t, filepath.Join(dir, path), content)
	f.git(dir, "add", "--", path)
	f.gitWith(dir, env, "commit", "-q", "-m", msg)
	return f.git(dir, "rev-parse", "HEAD")
}

// operatorIdentity makes Test Operator <op@example.com> the main
// checkout's own user, whose commits on the base are allowed.
func (f *fixture) operatorIdentity() {
	f.t.Helper()
	f.git(".", "config", "user.name", "Test Operator")
	f.git(".", "config", "user.email", "op@example.com")
}

func (f *fixture) guard(agent string) *SessionGuard {
	f.t.Helper()
	g, err := f.m.Guard(context.Background(), agent)
	if err != nil {
		f.t.Fatalf("Guard(%s): %v", agent, err)
	}
	return g
}

func (f *fixture) check(g *SessionGuard) []Finding {
	f.t.Helper()
	found, err := g.Check(context.Background())
	if err != nil {
		f.t.Fatalf("Check(%s): %v", g.agent, err)
	}
	return found
}

func noFindings(t *testing.T, what string, found []Finding) {
	t.Helper()
	if len(found) != 0 {
		t.Fatalf("%s: want no findings, got %d:\n%s", what, len(found), describeFindings(found))
	}
}

func describeFindings(found []Finding) string {
	var b strings.Builder
	for _, f := range found {
		j, _ := json.MarshalIndent(f, "  ", "  ")
		b.WriteString("  " + string(j) + "\n")
	}
	return b.String()
}

// oneViolation returns the only finding, which must be a violation of kind.
func oneViolation(t *testing.T, found []Finding, kind ViolationKind) Violation {
	t.Helper()
	if len(found) != 1 {
		t.Fatalf("want one %s violation, got %d findings:\n%s", kind, len(found), describeFindings(found))
	}
	v, ok := found[0].(Violation)
	if !ok || v.Kind != kind {
		t.Fatalf("want a %s violation, got:\n%s", kind, describeFindings(found))
	}
	if v.Escalation() != EscalationBranch || v.String() != v.Detail || v.Detail == "" {
		t.Fatalf("violation %+v: escalation %q", v, v.Escalation())
	}
	return v
}

// runUndo runs the command a finding's sentence gives for undoing it, the
// way an operator would paste it.
func (f *fixture) runUndo(detail string) {
	f.t.Helper()
	m := regexp.MustCompile(`'git (update-ref [^']+)'`).FindStringSubmatch(detail)
	if m == nil {
		f.t.Fatalf("no update-ref command in %q", detail)
	}
	f.git(".", strings.Fields(m[1])...)
}

func TestGuardCleanSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operatorIdentity()
	wt := f.ensure("alpha")
	bravo := f.ensure("bravo")
	g := f.guard("alpha")
	if g.BaseTip() != f.git(".", "rev-parse", "main") {
		t.Fatalf("BaseTip = %s", g.BaseTip())
	}
	gb := f.guard("bravo")
	// The agents commit on their own branches, the operator commits on
	// main, and swarm starts a third agent from main meanwhile: none of that
	// is a finding.
	f.commitWith(wt.Path, as("swarm/alpha"), "a.txt", "a\n", "alpha work")
	f.commitWith(bravo.Path, as("swarm/bravo"), "b.txt", "b\n", "bravo work")
	f.commitWith(".", nil, "op.txt", "op\n", "operator work")
	f.ensure("charlie")
	noFindings(t, "alpha", f.check(g))
	noFindings(t, "bravo", f.check(gb))
	if err := g.Err(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The next sessions start where these ended.
	noFindings(t, "alpha's next Prior", f.guard("alpha").Prior())
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
			g := f.guard("alpha")
			f.git(wt.Path, tc.args...)
			v := oneViolation(t, f.check(g), ViolationLeftBranch)
			if v.Agent != "alpha" || !strings.HasPrefix(v.Head, tc.head) || !slices.Equal(v.Charged, []string{"alpha"}) {
				t.Fatalf("violation = %+v", v)
			}
			if !strings.Contains(v.Detail, "not swarm/alpha") || !strings.Contains(v.Detail, "switch swarm/alpha") {
				t.Fatalf("detail %q does not say what happened and what to do", v.Detail)
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

// A rebase that stopped on a conflict detaches HEAD; the advice is to
// finish or abort it, never "git switch" (which refuses mid-rebase).
func TestGuardMidRebaseIsNotDetachedHead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wt := f.ensure("alpha")
	g := f.guard("alpha")
	f.commitWith(wt.Path, as("swarm/alpha"), "README.md", "alpha's readme\n", "alpha edits the readme")
	f.operatorIdentity()
	f.commitWith(".", nil, "README.md", "operator's readme\n", "operator edits the readme")
	f.gitFails(wt.Path, "rebase", "main")

	v := oneViolation(t, f.check(g), ViolationMidRebase)
	for _, want := range []string{"middle of a rebase of swarm/alpha", "rebase --continue", "rebase --abort"} {
		if !strings.Contains(v.Detail, want) {
			t.Fatalf("detail %q does not say %q", v.Detail, want)
		}
	}
	if strings.Contains(v.Detail, "switch") || strings.Contains(v.Detail, "detached HEAD at") {
		t.Fatalf("detail %q gives the detached-HEAD advice", v.Detail)
	}
	// Starting a session there, or Ensure, says the same.
	for name, err := range map[string]error{
		"Guard":  func() error { _, err := f.m.Guard(ctx, "alpha"); return err }(),
		"Ensure": func() error { _, err := f.m.Ensure(ctx, "alpha"); return err }(),
	} {
		if !errors.Is(err, ErrWrongBranch) || !strings.Contains(err.Error(), "rebase --abort") || strings.Contains(err.Error(), "switch") {
			t.Fatalf("%s mid-rebase = %v", name, err)
		}
	}
	// Aborting puts it back, and the next session may start.
	f.git(wt.Path, "rebase", "--abort")
	if _, err := f.m.Guard(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
}

// The author is not evidence: a commit on main authored "tester" by an
// agent's git is found, and charged to the agent its committer and reflog
// name. With no swarm identity anywhere, it is still found, charged to
// whoever overlapped.
func TestGuardFindsCommitOnBaseWhateverTheAuthor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     []string
		charged []string
	}{
		{"author tester", []string{"GIT_AUTHOR_NAME=tester", "GIT_COMMITTER_NAME=swarm/alpha"}, []string{"alpha"}},
		{"blames a teammate", []string{"GIT_AUTHOR_NAME=swarm/bravo", "GIT_COMMITTER_NAME=swarm/alpha"}, []string{"alpha"}},
		{"no swarm identity", as("tester"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.operatorIdentity()
			f.ensure("alpha")
			g := f.guard("alpha")
			old := g.BaseTip()
			leak := f.commitWith(".", tc.env, "leak.txt", "oops\n", "writes on main")
			v := oneViolation(t, f.check(g), ViolationBaseMoved)
			if !slices.Equal(v.Charged, tc.charged) || v.Ref != "refs/heads/main" || v.Old != old || v.New != leak {
				t.Fatalf("violation = %+v", v)
			}
			if len(v.Commits) != 1 || !strings.HasPrefix(v.Commits[0], text.Short(leak, 7)+" writes on main") {
				t.Fatalf("Commits = %q", v.Commits)
			}
			if !strings.Contains(v.Detail, "revert --no-edit "+text.Short(leak, 7)) || !strings.Contains(v.Detail, "Test Operator <op@example.com>") {
				t.Fatalf("detail = %q", v.Detail)
			}
		})
	}
}

func TestGuardFindsRewoundBase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operatorIdentity()
	f.commitWith(".", nil, "one.txt", "1\n", "operator one")
	f.commitWith(".", nil, "two.txt", "2\n", "operator two")
	f.ensure("alpha")
	g := f.guard("alpha")
	old := g.BaseTip()
	older := f.git(".", "rev-parse", "main~1")
	f.gitWith(".", as("swarm/alpha"), "update-ref", "refs/heads/main", older)

	v := oneViolation(t, f.check(g), ViolationBaseRewound)
	if v.Old != old || v.New != older || !slices.Equal(v.Charged, []string{"alpha"}) {
		t.Fatalf("violation = %+v", v)
	}
	want := "'git update-ref refs/heads/main " + old + " " + older + "'"
	if !strings.Contains(v.Detail, want) || !strings.Contains(v.Detail, "by swarm/alpha according to its reflog") {
		t.Fatalf("detail %q lacks %s", v.Detail, want)
	}
	// The sentence's command undoes it.
	f.runUndo(v.Detail)
	noFindings(t, "after the undo", f.check(g))
}

func TestGuardFindsDeletedBase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.ensure("alpha")
	g := f.guard("alpha")
	old := g.BaseTip()
	f.gitWith(".", as("swarm/alpha"), "update-ref", "-d", "refs/heads/main")
	v := oneViolation(t, f.check(g), ViolationBaseRewound)
	if v.Old != old || v.New != "" || !strings.Contains(v.Detail, "'git update-ref refs/heads/main "+old+"'") {
		t.Fatalf("violation = %+v", v)
	}
	// The next session does not start without its base, and says how to
	// bring it back.
	if _, err := f.m.Guard(context.Background(), "alpha"); !errors.Is(err, ErrBaseMissing) || !strings.Contains(err.Error(), old) {
		t.Fatalf("Guard = %v", err)
	}
	f.runUndo(v.Detail)
	noFindings(t, "after the undo", f.guard("alpha").Prior())
}

// An agent moves the operator's own commit onto main: every commit is the
// operator's, but the reflog says an agent moved the base.
func TestGuardFindsAgentFastForwardingBase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operatorIdentity()
	f.git(".", "branch", "feature")
	f.git(".", "switch", "-q", "feature")
	tip := f.commitWith(".", nil, "f.txt", "f\n", "operator feature work")
	f.git(".", "switch", "-q", "main")
	f.ensure("alpha")
	g := f.guard("alpha")
	f.gitWith(".", as("swarm/alpha"), "update-ref", "refs/heads/main", tip)
	v := oneViolation(t, f.check(g), ViolationBaseMoved)
	if len(v.Commits) != 0 || !slices.Equal(v.Charged, []string{"alpha"}) || !strings.Contains(v.Detail, "git update-ref refs/heads/main") {
		t.Fatalf("violation = %+v", v)
	}
}

func TestGuardAllowsTheOperatorsOwnCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.operatorIdentity()
	f.ensure("alpha")
	// A colleague's commits, on a branch the operator fast-forwards main to
	// (as a pull would): the reflog shows the operator's git moved it.
	f.git(".", "branch", "upstream")
	f.git(".", "switch", "-q", "upstream")
	f.commitWith(".", []string{"GIT_AUTHOR_NAME=Colleague", "GIT_COMMITTER_NAME=Colleague", "GIT_COMMITTER_EMAIL=c@example.com"}, "c.txt", "c\n", "colleague's work")
	f.git(".", "switch", "-q", "main")
	g := f.guard("alpha")
	f.commitWith(".", nil, "op.txt", "op\n", "operator work")
	f.git(".", "merge", "-q", "--no-edit", "upstream")
	noFindings(t, "operator commits and merge", f.check(g))

	f.git(".", "branch", "-f", "upstream", "main")
	g = f.guard("alpha")
	f.git(".", "switch", "-q", "upstream")
	f.commitWith(".", []string{"GIT_AUTHOR_NAME=Colleague", "GIT_COMMITTER_NAME=Colleague", "GIT_COMMITTER_EMAIL=c@example.com"}, "c2.txt", "c\n", "more colleague work")
	f.git(".", "switch", "-q", "main")
	f.git(".", "merge", "-q", "--ff-only", "upstream")
	noFindings(t, "the operator's fast-forward", f.check(g))
}

// swarm's own merge while agents run: allowed when recorded, found when
// not (its identity here is nobody's), and a leak under it is still found.
func TestGuardAllowsSwarmsRecordedMerge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.ensure("alpha")
	bravo := f.ensure("bravo")
	f.commitWith(bravo.Path, as("swarm/bravo"), "b.txt", "b\n", "bravo work")
	bot := []string{"GIT_AUTHOR_NAME=Release Bot", "GIT_COMMITTER_NAME=Release Bot"}
	merge := func() (old, new string) {
		old = f.git(".", "rev-parse", "main")
		f.gitWith(".", bot, "merge", "-q", "--no-ff", "-m", "merge bravo", "swarm/bravo")
		return old, f.git(".", "rev-parse", "main")
	}

	g := f.guard("alpha")
	merge()
	v := oneViolation(t, f.check(g), ViolationBaseMoved)
	if len(v.Commits) != 1 || !strings.Contains(v.Commits[0], "merge bravo (committed by Release Bot)") {
		t.Fatalf("unrecorded merge: %+v", v)
	}

	// Recorded through another Manager on the same meta store, as
	// `swarm down --merge` would in its own process.
	f.commitWith(bravo.Path, as("swarm/bravo"), "b2.txt", "b\n", "more bravo work")
	g = f.guard("alpha")
	old, new := merge()
	if err := f.manager(Options{}).RecordMove(ctx, "refs/heads/main", old, new); err != nil {
		t.Fatal(err)
	}
	noFindings(t, "recorded merge", f.check(g))

	// An agent's commit that landed first is not excused by swarm's merge
	// on top of it.
	f.commitWith(bravo.Path, as("swarm/bravo"), "b3.txt", "b\n", "yet more bravo work")
	g = f.guard("alpha")
	leak := f.commitWith(".", as("swarm/alpha"), "leak.txt", "x\n", "alpha leak")
	old, new = merge()
	if err := f.m.RecordMove(ctx, "refs/heads/main", old, new); err != nil {
		t.Fatal(err)
	}
	v = oneViolation(t, f.check(g), ViolationBaseMoved)
	if len(v.Commits) != 1 || !strings.HasPrefix(v.Commits[0], text.Short(leak, 7)+" alpha leak") || !slices.Equal(v.Charged, []string{"alpha"}) {
		t.Fatalf("leak under a recorded merge: %+v", v)
	}
}

// Merge, Squash and Discard record their own moves (the base's, and the
// branch they delete), so a guard that compares across them, in this
// process or after a restart, reports nothing.
func TestGuardAllowsSwarmsMergeCall(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"merge", "squash", "discard"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			f.ensure("alpha")
			bravo := f.ensure("bravo")
			f.commitWith(bravo.Path, as("swarm/bravo"), "b.txt", "b\n", "bravo work")
			g := f.guard("alpha")
			stored, err := json.Marshal(g.Start())
			if err != nil {
				t.Fatal(err)
			}
			var run func(context.Context, string) (Result, error)
			switch op {
			case "merge":
				run = f.m.Merge
			case "squash":
				run = f.m.Squash
			default:
				run = f.m.Discard
			}
			if _, err := run(ctx, "bravo"); err != nil {
				t.Fatal(err)
			}
			// bravo starts again, from the base.
			f.ensure("bravo")
			noFindings(t, "swarm's "+op, f.check(g))

			// The same across a restart: the moves are in the meta store.
			var restored Snapshot
			if err := json.Unmarshal(stored, &restored); err != nil {
				t.Fatal(err)
			}
			m2 := f.manager(Options{})
			m2.SetBaseline("alpha", &restored)
			g2, err := m2.Guard(ctx, "alpha")
			if err != nil {
				t.Fatal(err)
			}
			noFindings(t, "swarm's "+op+" after a restart", g2.Prior())
		})
	}
}

func TestGuardFindsTeammatesBranchMoved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     []string
		delete  bool
		charged []string
	}{
		{"by alpha", as("swarm/alpha"), false, []string{"alpha"}},
		{"by nobody known", as("tester"), false, nil},
		{"deleted", as("swarm/alpha"), true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.ensure("alpha")
			bravo := f.ensure("bravo")
			first := f.commitWith(bravo.Path, as("swarm/bravo"), "b.txt", "b\n", "bravo one")
			second := f.commitWith(bravo.Path, as("swarm/bravo"), "b2.txt", "b\n", "bravo two")
			g := f.guard("alpha") // bravo has no session
			want := first
			if tc.delete {
				f.gitWith(".", tc.env, "update-ref", "-d", "refs/heads/swarm/bravo")
				want = ""
			} else {
				f.gitWith(".", tc.env, "update-ref", "refs/heads/swarm/bravo", first)
			}
			v := oneViolation(t, f.check(g), ViolationBranchMoved)
			if v.Ref != "refs/heads/swarm/bravo" || v.Old != second || v.New != want || !slices.Equal(v.Charged, tc.charged) {
				t.Fatalf("violation = %+v", v)
			}
			f.runUndo(v.Detail)
			if got := f.git(".", "rev-parse", "swarm/bravo"); got != second {
				t.Fatalf("after the undo swarm/bravo is at %s, want %s", got, second)
			}
		})
	}
}

// While bravo has a session its branch is its own to move; alpha's guard
// leaves it alone. Moved by alpha's git, it is alpha's violation, and only
// alpha's guard reports it.
func TestGuardTeammateInSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.ensure("alpha")
	bravo := f.ensure("bravo")
	first := f.commitWith(bravo.Path, as("swarm/bravo"), "b.txt", "b\n", "bravo one")
	f.commitWith(bravo.Path, as("swarm/bravo"), "b2.txt", "b\n", "bravo two")
	ga, gb := f.guard("alpha"), f.guard("bravo")
	// Not even as swarm/bravo (a tool of bravo's may drop the session
	// environment): during its session, it is bravo's to move.
	f.git(bravo.Path, "reset", "-q", "--hard", first)
	noFindings(t, "bravo resets its own branch (alpha)", f.check(ga))
	noFindings(t, "bravo resets its own branch (bravo)", f.check(gb))

	ga, gb = f.guard("alpha"), f.guard("bravo")
	f.gitWith(".", as("swarm/alpha"), "update-ref", "refs/heads/swarm/bravo", f.git(".", "rev-parse", "main"))
	v := oneViolation(t, f.check(ga), ViolationBranchMoved)
	if !slices.Equal(v.Charged, []string{"alpha"}) || !strings.Contains(v.Detail, "by swarm/alpha according to its reflog") {
		t.Fatalf("violation = %+v", v)
	}
	noFindings(t, "bravo, not charged", f.check(gb))
}

// A change charged to bravo by the reflog goes to bravo's guard, not to
// alpha's, although alpha's session saw it too.
func TestGuardChargesFromTheReflog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.ensure("alpha")
	f.ensure("bravo")
	ga, gb := f.guard("alpha"), f.guard("bravo")
	// A commit whose committer is "tester", put on main by bravo's git.
	tree := f.git(".", "rev-parse", "main^{tree}")
	c := f.gitWith(".", as("tester"), "commit-tree", "-p", "main", "-m", "sneaky", tree)
	f.gitWith(".", as("swarm/bravo"), "update-ref", "refs/heads/main", c)

	noFindings(t, "alpha", f.check(ga))
	v := oneViolation(t, f.check(gb), ViolationBaseMoved)
	if !slices.Equal(v.Charged, []string{"bravo"}) || len(v.Commits) != 1 || !strings.Contains(v.Commits[0], "(committed by tester)") {
		t.Fatalf("violation = %+v", v)
	}
	if !strings.Contains(v.Detail, "by swarm/bravo according to its reflog") {
		t.Fatalf("detail = %q", v.Detail)
	}
	if v.Dedupe() != "base_moved:refs/heads/main:"+text.Short(c, 7) {
		t.Fatalf("Dedupe = %q", v.Dedupe())
	}
}

// A commit that lands on main after Check (a background `git commit &`
// of the session) is found when the agent's next session starts.
func TestGuardLateCommitFoundAtNextStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.ensure("alpha")
	noFindings(t, "the session", f.check(f.guard("alpha")))
	leak := f.commitWith(".", as("swarm/alpha"), "late.txt", "late\n", "late commit")

	g := f.guard("alpha")
	v := oneViolation(t, g.Prior(), ViolationBaseMoved)
	if !v.Between || !slices.Equal(v.Charged, []string{"alpha"}) || v.New != leak || !strings.Contains(v.Detail, "since alpha's last session") {
		t.Fatalf("prior = %+v", v)
	}
	// Check reports it too, so a caller that only checks loses nothing.
	if got := oneViolation(t, f.check(g), ViolationBaseMoved); got.Dedupe() != v.Dedupe() {
		t.Fatalf("Check = %+v", got)
	}
	// Reported once: the session after starts clean.
	noFindings(t, "the next Prior", f.guard("alpha").Prior())
}

// A guard that was never checked (a session that ended without Check) is
// taken over by the next Guard: its window and its Prior carry on.
func TestGuardUncheckedSessionCarriesOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wt := f.ensure("alpha")
	noFindings(t, "first", f.check(f.guard("alpha")))
	f.commitWith(".", as("swarm/alpha"), "late.txt", "late\n", "late commit")
	f.guard("alpha") // finds the late commit; never checked
	f.commitWith(wt.Path, as("swarm/alpha"), "a.txt", "a\n", "own work")
	f.commitWith(".", as("swarm/alpha"), "leak.txt", "x\n", "leak in the unchecked session")

	g := f.guard("alpha")
	found := g.Prior()
	if len(found) != 2 {
		t.Fatalf("Prior:\n%s", describeFindings(found))
	}
	first, second := found[0].(Violation), found[1].(Violation)
	if !first.Between || !strings.Contains(first.Commits[0], "late commit") || second.Between || !strings.Contains(second.Commits[0], "leak in the unchecked session") {
		t.Fatalf("Prior:\n%s", describeFindings(found))
	}
}

// The baseline survives a restart as JSON.
func TestGuardBaselineAcrossRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.ensure("alpha")
	bravo := f.ensure("bravo")
	noFindings(t, "session", f.check(f.guard("alpha")))
	stored, err := json.Marshal(f.m.Baseline("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	// While swarm is down: a late commit of alpha's on main, and bravo's
	// own work (its sessions are unknown to the new process).
	f.commitWith(".", as("swarm/alpha"), "late.txt", "late\n", "late commit")
	f.commitWith(bravo.Path, nil, "b.txt", "b\n", "bravo work")

	m2 := f.manager(Options{})
	var restored Snapshot
	if err := json.Unmarshal(stored, &restored); err != nil {
		t.Fatal(err)
	}
	m2.SetBaseline("alpha", &restored)
	g, err := m2.Guard(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	v := oneViolation(t, g.Prior(), ViolationBaseMoved)
	if !strings.Contains(v.Commits[0], "late commit") {
		t.Fatalf("prior = %+v", v)
	}
}

func TestGuardFindsBoth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wt := f.ensure("alpha")
	g := f.guard("alpha")
	f.git(wt.Path, "checkout", "-q", "--detach")
	f.commitWith(".", as("swarm/alpha"), "leak.txt", "oops\n", "leak")
	found := f.check(g)
	if len(found) != 2 || found[0].(Violation).Kind != ViolationLeftBranch || found[1].(Violation).Kind != ViolationBaseMoved {
		t.Fatalf("Check:\n%s", describeFindings(found))
	}
	var ge *GuardError
	if err := g.Err(context.Background()); !errors.As(err, &ge) || len(ge.Findings) != 2 || !strings.Contains(err.Error(), "; ") {
		t.Fatalf("Err = %v", err)
	}
}

// Guards of several agents on one Manager, concurrently, as the
// supervisor's runners make them: clean sessions find nothing.
func TestGuardConcurrentSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	agents := []string{"alpha", "bravo", "charlie"}
	paths := map[string]string{}
	for _, a := range agents {
		paths[a] = f.ensure(a).Path
	}
	errs := make(chan error, len(agents))
	for _, a := range agents {
		go func() {
			for i := range 2 {
				g, err := f.m.Guard(context.Background(), a)
				if err != nil {
					errs <- err
					return
				}
				// No t.Fatal off the test's goroutine: errors go back.
				if err := os.WriteFile(filepath.Join(paths[a], a+".txt"), []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
					errs <- err
					return
				}
				for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "work"}} {
					cmd := exec.Command("git", args...)
					cmd.Dir, cmd.Env = paths[a], append(operatorEnv(f.env), as("swarm/"+a)...)
					if out, err := cmd.CombinedOutput(); err != nil {
						errs <- fmt.Errorf("%s: git %v: %v: %s", a, args, err, out)
						return
					}
				}
				if found, err := g.Check(context.Background()); err != nil || len(found) != 0 {
					errs <- errors.New(a + ": " + describeFindings(found) + errString(err))
					return
				}
			}
			errs <- nil
		}()
	}
	for range agents {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
