//go:build reliability

package reliability

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The merge queue's landing rounds (issue 29): the operator runs `swarm
// land dev` while no supervisor runs (it only queues), then `swarm up`,
// whose merge-queue service tests and lands the candidate, is killed with
// kill -9 or interrupted with SIGINT at a random moment or inside one of
// the landing's git commands, on the 20,000-file repository where dev's
// commit changes 1,000 files, deletes 100 and adds 200, and the operator
// committed on main before dev worked (so the landing is a real merge).
// The next `swarm up` must finish or roll back: the candidate landed once.

// landDevScript is dev's session: the work, committed; nothing else (the
// operator lands it).
const landDevScript = `after = "mail"
[[session]]
[[session.turn]]
tool = "bash"
args = { command = "[ -n \"${mail.latest.id}\" ] || exit 0; swarm ack --all && for f in d*/e*/f00*.txt; do echo changed by dev >> $f; done && git rm -q d*/e*/f010*.txt && mkdir -p added && for i in $(seq 1 200); do echo new file $i > added/n$i.txt; done && git add -A && git commit -qm 'dev: the work'" }
[[session.turn]]
text = "done"
`

// landCandidate is the part of `swarm merges --json` the rounds read.
type landCandidate struct {
	ID       int64  `json:"id"`
	Agent    string `json:"agent"`
	Commit   string `json:"commit"`
	State    string `json:"state"`
	Reason   string `json:"reason"`
	LandedAs string `json:"landed_commit"`
}

// landWorld is the large repository with dev's commit queued and no
// supervisor running (the snapshot queued), and what its landing must
// produce.
type landWorld struct {
	h      *harness
	mw     *mergeWorld // its checkout checks (hashFiles) and git wrapper
	queued string      // snapshot
	old    string      // main before the landing
	cand   string      // dev's commit, the candidate
	want   map[string]string
	cfg    string // swarm.toml without a CI
}

func newLandWorld(t *testing.T) *landWorld {
	t.Helper()
	dir, err := os.MkdirTemp(bigDir(), "swarm-reliability-land-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := newHarnessIn(t, dir, swarmConfig{agents: []string{"dev"}, big: true,
		scripts: map[string]string{"dev": landDevScript},
		toml:    "[liveness]\nnudge_after = \"0s\"\n"})
	h.git(h.root, "config", "core.trustctime", "false")
	// The operator's commit comes first: dev's branch starts from it, so
	// no supervisor brings dev's branch current (a merge of its own)
	// during the rounds.
	writeFile(t, filepath.Join(h.root, "README.md"), "a repository for the reliability suite, edited by the operator\n")
	h.git(h.root, "commit", "-qam", "operator: README")
	w := &landWorld{h: h, mw: newKiller(t, h)}
	w.old = h.git(h.root, "rev-parse", "main")
	t0 := time.Now()
	up := h.up("--engine", "script", "--yes")
	if r := h.swarm("send", "dev", "do the work"); r.code != 0 {
		t.Fatalf("send dev its work: %s", r)
	}
	h.waitFor(2*time.Minute, "dev's commit", func() (bool, error) {
		if up.exited() {
			t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
		}
		out, err := h.gitErr(h.root, "rev-list", "--count", "main..swarm/dev")
		return err == nil && out == "1", nil
	})
	up.interrupt(t)
	w.cand = h.git(h.root, "rev-parse", "swarm/dev")
	r := h.swarm("land", "dev")
	if r.code != 0 || !strings.Contains(r.stdout, "the supervisor is not running") {
		t.Fatalf("swarm land dev without a supervisor: %s", r)
	}
	if cs := w.candidates(t); len(cs) != 1 || cs[0].State != "queued" || cs[0].Commit != w.cand {
		t.Fatalf("swarm land dev queued %+v, want dev's %s queued", cs, w.cand)
	}
	cfg, err := os.ReadFile(filepath.Join(h.root, "swarm.toml"))
	if err != nil {
		t.Fatal(err)
	}
	w.cfg = string(cfg)
	w.queued = h.snapshot("queued")
	t.Logf("dev's commit %s queued on %d files in %s", w.cand[:12], bigFiles, time.Since(t0).Round(time.Millisecond))
	return w
}

// newKiller is a mergeWorld holding only what its helpers need here: the
// git wrapper that signals swarm inside one git command, and hashFiles.
func newKiller(t *testing.T, h *harness) *mergeWorld {
	w := &mergeWorld{h: h}
	var err error
	if w.realGit, err = exec.LookPath("git"); err != nil {
		t.Fatal(err)
	}
	w.killer = filepath.Join(h.dir, "killgit")
	writeFile(t, filepath.Join(w.killer, "git"), killGitScript)
	if err := os.Chmod(filepath.Join(w.killer, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// candidates reads every candidate with `swarm merges --all --json`.
func (w *landWorld) candidates(t *testing.T) []landCandidate {
	t.Helper()
	r := w.h.swarm("merges", "--all", "--json")
	if r.code != 0 {
		t.Fatalf("swarm merges: %s", r)
	}
	var out struct {
		Candidates []landCandidate `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("swarm merges --json: %v\n%s", err, r.stdout)
	}
	return out.Candidates
}

// landed reports whether the one candidate is landed.
func (w *landWorld) landed(t *testing.T) bool {
	cs := w.candidates(t)
	return len(cs) == 1 && cs[0].State == "landed"
}

// runUntilLanded starts `swarm up` and waits until the candidate landed,
// then stops it with Ctrl-C; it returns how long the landing took. Every
// swarm up of these rounds passes --yes: the test itself turns [merge] ci
// on and off, a change swarm up otherwise asks the operator to confirm.
func (w *landWorld) runUntilLanded(t *testing.T, stage string) time.Duration {
	t.Helper()
	t0 := time.Now()
	up := w.h.up("--engine", "script", "--yes")
	w.h.waitFor(2*time.Minute, stage+": the candidate landed", func() (bool, error) {
		if up.exited() {
			t.Fatalf("%s: swarm up exited:\n%s", stage, tail(up.output(), 3000))
		}
		return w.landed(t), nil
	})
	took := time.Since(t0)
	up.interrupt(t)
	return took
}

// setCI writes swarm.toml with or without a [merge] ci (restore does not
// put the operator's untracked swarm.toml back); the CI checks the batch's
// tree holds dev's work.
func (w *landWorld) setCI(t *testing.T, ci bool) {
	t.Helper()
	cfg := w.cfg
	if ci {
		cfg = "[merge]\nci = \"test -f added/n200.txt && ! test -e d00/e00/f01000.txt\"\n\n" + cfg
	}
	writeFile(t, filepath.Join(w.h.root, "swarm.toml"), cfg)
}

// operatorLocks lists the locks of the operator's checkout and of the
// branches: the scratch worktrees' own (.git/worktrees/) are the queue's,
// removed by the next supervisor.
func (w *landWorld) operatorLocks() []string {
	var out []string
	for _, l := range w.h.gitLocks() {
		if !strings.Contains(l, string(filepath.Separator)+"worktrees"+string(filepath.Separator)) {
			out = append(out, l)
		}
	}
	return out
}

// checkAfterKill checks what a killed or interrupted supervisor may leave:
// main at its old commit or at the one merge of the candidate, the
// candidate landed only if main holds it, no MERGE_HEAD; before the move
// the checkout untouched and no lock of it; past the move every file the
// landing changes its old or new version (or missing, or the start of the
// new one: a git killed while replacing it, finished by the next run). It
// returns whether main had moved.
func (w *landWorld) checkAfterKill(t *testing.T, stage string) bool {
	t.Helper()
	h := w.h
	main := h.git(h.root, "rev-parse", "main")
	moved := main != w.old
	if moved && h.git(h.root, "rev-parse", "main^1", "main^2") != w.old+"\n"+w.cand {
		t.Fatalf("%s: main is at %s, neither %s nor its merge with %s", stage, main, w.old, w.cand)
	}
	cs := w.candidates(t)
	if len(cs) != 1 {
		t.Fatalf("%s: %d candidates, want the one", stage, len(cs))
	}
	switch c := cs[0]; {
	case c.State == "landed" && !moved:
		t.Fatalf("%s: the candidate is recorded landed, but main does not hold it", stage)
	case c.State == "landed" && c.LandedAs != main:
		t.Fatalf("%s: the candidate is recorded landed as %s, main is %s", stage, c.LandedAs, main)
	case c.State != "landed" && c.State != "queued" && c.State != "testing":
		t.Fatalf("%s: the candidate is %s (%s): it should land when the supervisor runs again", stage, c.State, c.Reason)
	}
	if _, err := os.Stat(filepath.Join(h.root, ".git", "MERGE_HEAD")); err == nil {
		t.Fatalf("%s: MERGE_HEAD left", stage)
	}
	status := h.git(h.root, "-c", "core.quotepath=off", "status", "--porcelain", "--untracked-files=all", "--no-renames")
	var paths []string
	for _, line := range strings.Split(status, "\n") {
		if len(line) < 4 {
			continue
		}
		if _, lands := w.want[line[3:]]; strings.HasPrefix(line, "?? ") && !lands {
			continue // the operator's untracked files (swarm.toml)
		}
		if !moved {
			t.Fatalf("%s: main did not move, but the checkout changed: %s", stage, line)
		}
		paths = append(paths, line[3:])
	}
	if !moved {
		if locks := w.operatorLocks(); len(locks) > 0 {
			t.Fatalf("%s: main did not move, but git locks are left: %v", stage, locks)
		}
		return false
	}
	oldTree, newTree := h.tree(w.old), h.tree("main")
	hashes := w.mw.hashFiles(t, paths)
	blob := func(v string) string {
		if f := strings.Fields(v); len(f) == 2 {
			return f[1]
		}
		return ""
	}
	for _, p := range paths {
		got := hashes[p]
		if got == blob(oldTree[p]) || got == blob(newTree[p]) {
			continue
		}
		if got == "" && blob(oldTree[p]) != blob(newTree[p]) {
			continue
		}
		if nb := blob(newTree[p]); nb != "" && got != "" {
			have, err := os.ReadFile(filepath.Join(h.root, p))
			if err == nil && strings.HasPrefix(h.git(h.root, "cat-file", "blob", nb)+"\n", string(have)) {
				continue
			}
		}
		t.Fatalf("%s: %s is neither main's old nor its new version (blob %q)", stage, p, got)
	}
	return true
}

// verify checks the landing is done once and whole: main is the one merge
// of the candidate, its tree the uninterrupted run's, the candidate landed
// as main, the checkout clean, no MERGE_HEAD, no lock, no journal entry,
// no scratch worktree. It returns the files lost or changed against the
// uninterrupted tree.
func (w *landWorld) verify(t *testing.T, stage string) int {
	t.Helper()
	h := w.h
	var problems []string
	main := h.git(h.root, "rev-parse", "main")
	if got := h.git(h.root, "rev-parse", "main^1", "main^2"); got != w.old+"\n"+w.cand {
		problems = append(problems, fmt.Sprintf("main's parents are %q", got))
	}
	if n := h.git(h.root, "rev-list", "--count", "--merges", w.old+"..main"); n != "1" {
		problems = append(problems, n+" merges on main, want 1")
	}
	cs := w.candidates(t)
	if len(cs) != 1 || cs[0].State != "landed" || cs[0].LandedAs != main {
		problems = append(problems, fmt.Sprintf("the candidates are %+v, want the one landed as %s", cs, main))
	}
	got := h.tree("main")
	lost := 0
	for p, v := range w.want {
		if got[p] != v {
			lost++
		}
	}
	for p := range got {
		if _, ok := w.want[p]; !ok {
			lost++
		}
	}
	if lost > 0 {
		problems = append(problems, fmt.Sprintf("%d files differ from the uninterrupted landing", lost))
	}
	if out := h.git(h.root, "status", "--porcelain", "--untracked-files=no"); out != "" {
		problems = append(problems, "the checkout is not clean: "+tail(out, 500))
	}
	if head := h.git(h.root, "symbolic-ref", "-q", "HEAD"); head != "refs/heads/main" {
		problems = append(problems, "the checkout's HEAD is "+head)
	}
	if _, err := os.Stat(filepath.Join(h.root, ".git", "MERGE_HEAD")); err == nil {
		problems = append(problems, "MERGE_HEAD left")
	}
	if locks := h.gitLocks(); len(locks) > 0 {
		problems = append(problems, fmt.Sprintf("git locks left: %v", locks))
	}
	if ents, _ := os.ReadDir(filepath.Join(h.root, ".swarm", "journal", "land")); len(ents) > 0 {
		problems = append(problems, fmt.Sprintf("%d landing journal entries left", len(ents)))
	}
	if ents, _ := os.ReadDir(filepath.Join(h.root, ".swarm", "merging")); len(ents) > 0 {
		problems = append(problems, fmt.Sprintf("%d scratch worktrees left", len(ents)))
	}
	if len(problems) > 0 {
		t.Fatalf("%s: %s", stage, strings.Join(problems, "; "))
	}
	return lost
}

// TestR1LandQueueKills kills (kill -9) and interrupts (SIGINT) the
// supervisor while its merge queue lands the candidate `swarm land dev`
// queued: half of the rounds at a random moment from `swarm up` to the
// landing, half inside the landing's git commands (commit-tree, the
// compare-and-set update-ref, the read-tree that brings the checkout
// forward). After each, checkAfterKill; then `swarm up` again must land it
// exactly once, whole (verify). RELIABILITY_MERGE_ROUNDS sets the rounds
// per signal (default 6).
func TestR1LandQueueKills(t *testing.T) {
	rng := newRand(t)
	perSignal := 6
	if s := os.Getenv("RELIABILITY_MERGE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("RELIABILITY_MERGE_ROUNDS=%q: %v", s, err)
		}
		perSignal = n
	}
	w := newLandWorld(t)
	h := w.h
	full := w.runUntilLanded(t, "uninterrupted")
	w.want = h.tree("main")
	changed := len(treeChanges(h.tree(w.old), w.want))
	w.verify(t, "uninterrupted")
	t.Logf("an uninterrupted landing through the queue changes %d files; swarm up → landed takes %s", changed, full.Round(time.Millisecond))

	// With a [merge] ci the queue checks the batch out in a scratch
	// worktree (20,000 files) and runs the CI there first.
	h.restore(w.queued)
	w.setCI(t, true)
	fullCI := w.runUntilLanded(t, "uninterrupted, with a CI")
	w.verify(t, "uninterrupted, with a CI")
	t.Logf("with [merge] ci, swarm up → landed takes %s", fullCI.Round(time.Millisecond))

	type point struct {
		sub string
		nth int
	}
	points := []point{{"update-ref -m", 1}, {"read-tree -m", 2}, {"commit-tree", 1}}
	pointsCI := []point{{"worktree add", 1}, {"update-ref -m", 1}, {"read-tree -m", 2}}
	rounds, moved, inGit, withCI, lost, restarts, earlyStops := 0, 0, 0, 0, 0, 0, 0
	var recovery time.Duration
	for i := range 2 * perSignal {
		sig := []syscall.Signal{syscall.SIGKILL, syscall.SIGINT}[i%2]
		// Rounds 5-8, 13-16, ...: with the CI.
		ci := (i/4)%2 == 1
		h.restore(w.queued)
		w.setCI(t, ci)
		span, pts, how := full, points, ""
		if ci {
			span, pts, how = fullCI, pointsCI, " (with a CI)"
			withCI++
		}
		var stage string
		var env []string
		var done string
		var delay time.Duration
		if i%4 < 2 {
			delay = time.Duration(rng.Int64N(int64(span)))
			stage = fmt.Sprintf("round %d%s: %s at %s", i+1, how, sig, delay.Round(time.Millisecond))
		} else {
			p := pts[(i/8)%len(pts)]
			d := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
			stage = fmt.Sprintf("round %d%s: %s after %s in the %d. 'git %s'", i+1, how, sig, d.Round(time.Millisecond), p.nth, p.sub)
			sigName := map[syscall.Signal]string{syscall.SIGKILL: "KILL", syscall.SIGINT: "INT"}[sig]
			env, done = w.mw.killEnv(p.sub, sigName, p.nth, d, fmt.Sprint(i))
		}
		up, err := h.startUp(env, "--engine", "script", "--yes")
		if err != nil {
			t.Fatal(err)
		}
		if done == "" {
			fault := time.NewTimer(delay)
			select {
			case <-up.done:
				fault.Stop()
				t.Fatalf("%s: swarm up exited on its own:\n%s", stage, tail(up.output(), 3000))
			case <-fault.C: // the moment of the fault, chosen above
			}
			if sig == syscall.SIGKILL {
				up.kill9(t)
			} else {
				_ = up.cmd.Process.Signal(syscall.SIGINT)
			}
		} else {
			// The wrapper signals swarm up itself.
			h.waitFor(2*time.Minute, stage+": the wrapper fired", func() (bool, error) {
				_, err := os.Stat(done)
				return err == nil || up.exited(), nil
			})
			if _, err := os.Stat(done); err != nil {
				t.Fatalf("%s: swarm up exited before the wrapper fired:\n%s", stage, tail(up.output(), 3000))
			}
			inGit++
		}
		if !up.wait(time.Minute) {
			t.Fatalf("%s: swarm up still ran a minute after the signal:\n%s", stage, tail(up.output(), 3000))
		}
		// A Ctrl-C while swarm up starts ends it before it runs anything
		// (killed by the signal before its handler is set, or exit 1 from
		// a cancelled open); what it leaves is checked below all the same.
		if sig == syscall.SIGINT && up.exitCode() != 0 {
			earlyStops++
			t.Logf("%s: swarm up exited %d:\n%s", stage, up.exitCode(), tail(up.output(), 500))
		}
		wasMoved := w.checkAfterKill(t, stage)
		if wasMoved {
			moved++
		}
		t0 := time.Now()
		if !w.landed(t) {
			w.runUntilLanded(t, stage)
		} else {
			// Landed and recorded before the signal: the next start has
			// nothing to finish but what the kill cut (the checkout).
			up := h.up("--engine", "script", "--yes")
			h.waitFor(time.Minute, stage+": the supervisor running, the landing journal finished", func() (bool, error) {
				if up.exited() {
					t.Fatalf("%s: swarm up exited:\n%s", stage, tail(up.output(), 3000))
				}
				ents, _ := os.ReadDir(filepath.Join(h.root, ".swarm", "journal", "land"))
				r := h.swarm("status", "--json")
				return len(ents) == 0 && strings.Contains(r.stdout, `"running": true`), nil
			})
			up.interrupt(t)
		}
		recovery += time.Since(t0)
		if ents, _ := os.ReadDir(filepath.Join(h.root, ".swarm", "merging")); len(ents) > 0 {
			// A kill -9 inside `git worktree add` orphans its checkout,
			// which may still write in the scratch worktree while the next
			// start removes it: the start after removes what is left.
			restarts++
			up := h.up("--engine", "script", "--yes")
			h.waitFor(time.Minute, stage+": the scratch worktree removed by the next start", func() (bool, error) {
				if up.exited() {
					t.Fatalf("%s: swarm up exited:\n%s", stage, tail(up.output(), 3000))
				}
				ents, _ := os.ReadDir(filepath.Join(h.root, ".swarm", "merging"))
				r := h.swarm("status", "--json")
				return len(ents) == 0 && strings.Contains(r.stdout, `"running": true`), nil
			})
			up.interrupt(t)
		}
		lost += w.verify(t, stage)
		rounds++
		t.Logf("%s: main had moved: %v; recovered in %s", stage, wasMoved, time.Since(t0).Round(time.Millisecond))
	}
	t.Logf("%d interrupted landings through the merge queue (%d per signal; %d with a CI; %d inside git; main had moved in %d); recovery runs took %s on average; a scratch worktree left for the start after: %d; Ctrl-C ending the start itself: %d; files lost: %d; landed more than once: 0",
		rounds, perSignal, withCI, inGit, moved, (recovery / time.Duration(max(rounds, 1))).Round(time.Millisecond), restarts, earlyStops, lost)
}
