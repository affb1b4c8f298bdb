//go:build reliability

package reliability

import (
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

// The workflow merge rounds (issue 28, item 1) run on the large repository
// where dev's reviewed commit changes 1,000 files, deletes 100 and adds
// 200 (the size of the half-merges the issue found), and the operator
// committed on main since, so the landing is a real merge.

// mergeDevScript is dev's session: the work, committed, then the result.
const mergeDevScript = `after = "mail"
[[session]]
[[session.turn]]
tool = "bash"
args = { command = "[ -n \"${mail.latest.id}\" ] || exit 0; swarm ack --all && for f in d*/e*/f00*.txt; do echo changed by dev >> $f; done && git rm -q d*/e*/f010*.txt && mkdir -p added && for i in $(seq 1 200); do echo new file $i > added/n$i.txt; done && git add -A && git commit -qm 'dev: the work' && swarm send swarm --type task_result --reply-to ${mail.latest.id} --payload '{\"status\": \"completed\", \"summary\": \"done\"}'" }
[[session.turn]]
text = "done"
`

const mergeCriticScript = `after = "mail"
[[session]]
[[session.turn]]
tool = "bash"
args = { command = "[ -n \"${mail.latest.id}\" ] || exit 0; swarm ack --all && swarm send swarm --type review_verdict --reply-to ${mail.latest.id} --payload '{\"verdict\": \"approved\", \"summary\": \"good\"}'" }
[[session.turn]]
text = "approved"
`

// mergeWorld is the large repository with item T-1 approved and swarm
// stopped (the snapshot approved), and what its merge must produce.
type mergeWorld struct {
	h        *harness
	approved string // snapshot
	old      string // main before the merge
	reviewed string // the reviewed commit
	want     map[string]string
	changed  int // files the merge changes
	killer   string
	realGit  string
}

func newMergeWorld(t *testing.T) *mergeWorld {
	t.Helper()
	dir, err := os.MkdirTemp(bigDir(), "swarm-reliability-merge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := newHarnessIn(t, dir, swarmConfig{agents: []string{"dev", "critic"}, big: true,
		scripts: map[string]string{"dev": mergeDevScript, "critic": mergeCriticScript},
		toml:    "[liveness]\nnudge_after = \"0s\"\n\n[[workflow]]\nname = \"review\"\nkind = \"dev-review\"\ndev = \"dev\"\nreviewer = \"critic\"\n"})
	h.git(h.root, "config", "core.trustctime", "false")
	w := &mergeWorld{h: h}
	if w.realGit, err = exec.LookPath("git"); err != nil {
		t.Fatal(err)
	}
	w.killer = filepath.Join(h.dir, "killgit")
	writeFile(t, filepath.Join(w.killer, "git"), killGitScript)
	if err := os.Chmod(filepath.Join(w.killer, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if r := h.swarm("workflow", "start", "review", "--item", "T-1", "--title", "the work", "--criterion", "it works", "--risk", "low"); r.code != 0 {
		t.Fatalf("start the item: %s", r)
	}
	up := h.up("--engine", "script")
	h.waitFor(2*time.Minute, "item T-1 to be approved", func() (bool, error) {
		if up.exited() {
			t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
		}
		return w.itemState() == "approved", nil
	})
	up.interrupt(t)
	// The operator commits on main meanwhile.
	writeFile(t, filepath.Join(h.root, "README.md"), "a repository for the reliability suite, edited by the operator\n")
	h.git(h.root, "commit", "-qam", "operator: README")
	w.old = h.git(h.root, "rev-parse", "main")
	w.reviewed = w.reviewedCommit()
	w.approved = h.snapshot("approved")
	t.Logf("item T-1 approved on %d files in %s", bigFiles, time.Since(t0).Round(time.Millisecond))
	return w
}

func (w *mergeWorld) itemState() string {
	r := w.h.swarm("workflow", "status", "review", "--json")
	if i := strings.Index(r.stdout, `"state": "`); i >= 0 {
		s := r.stdout[i+len(`"state": "`):]
		return s[:strings.IndexByte(s, '"')]
	}
	return ""
}

func (w *mergeWorld) reviewedCommit() string {
	r := w.h.swarm("workflow", "history", "T-1", "--json")
	i := strings.Index(r.stdout, "review at ")
	if i < 0 {
		w.h.t.Fatalf("no reviewed commit in the history: %s", r)
	}
	prefix := r.stdout[i+len("review at ") : i+len("review at ")+12]
	return w.h.git(w.h.root, "rev-parse", prefix+"^{commit}")
}

// checkAfterKill checks what an interrupted merge may leave: main at its
// old commit or at the merge, the item merged only if main holds it, no
// MERGE_HEAD; before the move, the checkout untouched and no lock; past it,
// every changed file of the checkout its old or its new version, the start
// of the new one or missing (a git killed while replacing it, whose
// index.lock the next run removes). It returns whether main had moved.
func (w *mergeWorld) checkAfterKill(t *testing.T, stage string) bool {
	t.Helper()
	h := w.h
	main := h.git(h.root, "rev-parse", "main")
	moved := main != w.old
	if moved && h.git(h.root, "rev-parse", "main^1", "main^2") != w.old+"\n"+w.reviewed {
		t.Fatalf("%s: main is at %s, neither %s nor its merge with %s", stage, main, w.old, w.reviewed)
	}
	if w.itemState() == "merged" && !moved {
		t.Fatalf("%s: item T-1 is recorded merged, but main does not hold it", stage)
	}
	if _, err := os.Stat(filepath.Join(h.root, ".git", "MERGE_HEAD")); err == nil {
		t.Fatalf("%s: MERGE_HEAD left", stage)
	}
	status := h.git(h.root, "-c", "core.quotepath=off", "status", "--porcelain", "--untracked-files=all", "--no-renames")
	// The operator's untracked files (swarm.toml) are none of the merge's.
	var paths []string
	for _, line := range strings.Split(status, "\n") {
		if len(line) < 4 {
			continue
		}
		if _, merges := w.want[line[3:]]; strings.HasPrefix(line, "?? ") && !merges {
			continue
		}
		if !moved {
			t.Fatalf("%s: main did not move, but the checkout changed: %s", stage, line)
		}
		paths = append(paths, line[3:])
	}
	if !moved {
		// Nothing before the move writes the checkout: not even a lock.
		if locks := h.gitLocks(); len(locks) > 0 {
			t.Fatalf("%s: main did not move, but git locks are left: %v", stage, locks)
		}
		return false
	}
	oldTree, newTree := h.tree(w.old), h.tree("main")
	hashes := w.hashFiles(t, paths)
	for _, p := range paths {
		blob := func(v string) string {
			if f := strings.Fields(v); len(f) == 2 {
				return f[1]
			}
			return ""
		}
		got := hashes[p] // "" when the file is missing
		if got == blob(oldTree[p]) || got == blob(newTree[p]) {
			continue
		}
		// git replaces a file by unlinking it first: killed in between,
		// a file the merge changes is missing.
		if got == "" && blob(oldTree[p]) != blob(newTree[p]) {
			continue
		}
		// A file git was writing when it was killed: the start of the new
		// version.
		if nb := blob(newTree[p]); nb != "" && got != "" {
			have, err := os.ReadFile(filepath.Join(h.root, p))
			want := h.git(h.root, "cat-file", "blob", nb)
			if err == nil && strings.HasPrefix(want+"\n", string(have)) {
				continue
			}
		}
		t.Fatalf("%s: %s is neither main's old nor its new version (blob %q)", stage, p, got)
	}
	return true
}

// hashFiles hashes the checkout's files at paths as git stores them; a
// missing file maps to "".
func (w *mergeWorld) hashFiles(t *testing.T, paths []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var present []string
	for _, p := range paths {
		if fi, err := os.Lstat(filepath.Join(w.h.root, p)); err == nil && fi.Mode().IsRegular() {
			present = append(present, p)
		} else {
			out[p] = ""
		}
	}
	if len(present) == 0 {
		return out
	}
	cmd := exec.Command("git", "hash-object", "--stdin-paths")
	cmd.Dir = w.h.root
	cmd.Env = w.h.env()
	cmd.Stdin = strings.NewReader(strings.Join(present, "\n") + "\n")
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("hash the checkout's files: %v", err)
	}
	hs := strings.Fields(string(res))
	if len(hs) != len(present) {
		t.Fatalf("hash the checkout's files: %d hashes for %d files", len(hs), len(present))
	}
	for i, p := range present {
		out[p] = hs[i]
	}
	return out
}

// finish runs `swarm workflow merge T-1` until the item is merged (at most
// three runs) and returns how many runs it took and the recovery lines.
func (w *mergeWorld) finish(t *testing.T, stage string) (int, []string) {
	t.Helper()
	var rec []string
	for attempt := 1; attempt <= 3; attempt++ {
		r := w.h.swarm("workflow", "merge", "T-1")
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "recovered: ") {
				rec = append(rec, l)
			}
		}
		if r.code == 0 || strings.Contains(r.stderr, "is merged already") {
			return attempt, rec
		}
		t.Logf("%s: swarm workflow merge attempt %d: %s", stage, attempt, r)
	}
	t.Fatalf("%s: swarm workflow merge did not succeed in 3 runs", stage)
	return 0, nil
}

// verify checks the merge is done once and whole: main is the one merge of
// the reviewed commit, its tree the uninterrupted run's, the checkout clean
// with every file, the item merged, no lock, no journal left. It returns
// the files lost or changed against that tree (0 when it passes).
func (w *mergeWorld) verify(t *testing.T, stage string) int {
	t.Helper()
	h := w.h
	var problems []string
	if got := h.git(h.root, "rev-parse", "main^1", "main^2"); got != w.old+"\n"+w.reviewed {
		problems = append(problems, fmt.Sprintf("main's parents are %q", got))
	}
	if n := h.git(h.root, "rev-list", "--count", "--merges", w.old+"..main"); n != "1" {
		problems = append(problems, n+" merges on main, want 1")
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
		problems = append(problems, fmt.Sprintf("%d files differ from the uninterrupted merge", lost))
	}
	if out := h.git(h.root, "status", "--porcelain", "--untracked-files=no"); out != "" {
		problems = append(problems, "the checkout is not clean: "+tail(out, 500))
	}
	if locks := h.gitLocks(); len(locks) > 0 {
		problems = append(problems, fmt.Sprintf("git locks left: %v", locks))
	}
	if s := w.itemState(); s != "merged" {
		problems = append(problems, "item T-1 is "+s)
	}
	if ents, _ := os.ReadDir(filepath.Join(h.root, ".swarm", "journal", "land")); len(ents) > 0 {
		problems = append(problems, fmt.Sprintf("%d landing journal entries left", len(ents)))
	}
	if len(problems) > 0 {
		t.Fatalf("%s: %s", stage, strings.Join(problems, "; "))
	}
	return lost
}

// TestR1WorkflowMergeKills interrupts `swarm workflow merge` with kill -9
// and Ctrl-C (SIGINT): half of the rounds at a random moment of the whole
// command, half inside the git commands of the landing (merge-tree,
// commit-tree, update-ref, the read-tree that brings the checkout
// forward). After each, the state must be one a re-run can finish (see
// checkAfterKill), and `swarm workflow merge T-1` run again must leave
// main with the one merge, every file, the item merged. RELIABILITY_MERGE_ROUNDS
// sets the rounds per signal (default 6).
func TestR1WorkflowMergeKills(t *testing.T) {
	rng := newRand(t)
	perSignal := 6
	if s := os.Getenv("RELIABILITY_MERGE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("RELIABILITY_MERGE_ROUNDS=%q: %v", s, err)
		}
		perSignal = n
	}
	w := newMergeWorld(t)
	h := w.h
	t0 := time.Now()
	if r := h.swarm("workflow", "merge", "T-1"); r.code != 0 {
		t.Fatalf("the uninterrupted merge failed: %s", r)
	}
	full := time.Since(t0)
	w.want = h.tree("main")
	w.changed = len(treeChanges(h.tree(w.old), w.want))
	w.verify(t, "uninterrupted")
	t.Logf("an uninterrupted swarm workflow merge changes %d files and takes %s", w.changed, full.Round(time.Millisecond))

	points := []struct {
		sub string
		nth int
	}{{"read-tree -m", 2}, {"update-ref", 1}, {"merge-tree", 1}, {"commit-tree", 1}}
	rounds, moved, inGit, reruns, recovered, lost := 0, 0, 0, 0, 0, 0
	for i := range 2 * perSignal {
		sig := []syscall.Signal{syscall.SIGKILL, syscall.SIGINT}[i%2]
		h.restore(w.approved)
		var stage string
		if i%4 < 2 {
			// A random moment of the whole command.
			delay := time.Duration(rng.Int64N(int64(full)))
			stage = fmt.Sprintf("round %d: %s at %s", i+1, sig, delay.Round(time.Millisecond))
			cmd := exec.Command(swarmBin, "--dir", h.root, "workflow", "merge", "T-1")
			cmd.Dir = h.root
			cmd.Env = h.env()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			fault := time.NewTimer(delay)
			select {
			case err := <-exited:
				fault.Stop()
				stage += fmt.Sprintf(" (it had finished: %v)", err)
			case <-fault.C: // the moment of the fault, chosen above
				_ = cmd.Process.Signal(sig)
				select {
				case <-exited:
				case <-time.After(time.Minute):
					_ = cmd.Process.Kill()
					<-exited
					t.Fatalf("%s: swarm workflow merge still ran a minute after the signal", stage)
				}
			}
		} else {
			p := points[(i/4)%len(points)]
			delay := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
			stage = fmt.Sprintf("round %d: %s after %s in the %d. 'git %s'", i+1, sig, delay.Round(time.Millisecond), p.nth, p.sub)
			sigName := map[syscall.Signal]string{syscall.SIGKILL: "KILL", syscall.SIGINT: "INT"}[sig]
			env, done := w.killEnv(p.sub, sigName, p.nth, delay, fmt.Sprint(i))
			r := h.swarmEnv(env, "workflow", "merge", "T-1")
			if _, err := os.Stat(done); err == nil {
				inGit++
			} else {
				t.Fatalf("%s: the wrapper did not fire: %s", stage, r)
			}
		}
		if w.checkAfterKill(t, stage) {
			moved++
		}
		n, rec := w.finish(t, stage)
		reruns += n
		recovered += len(rec)
		lost += w.verify(t, stage)
		rounds++
		t.Logf("%s: %d re-run(s), recovered: %v", stage, n, rec)
	}
	t.Logf("%d interrupted swarm workflow merge rounds (%d per signal; %d inside git; main had moved in %d), %d re-runs, %d recovery lines; files lost: %d",
		rounds, perSignal, inGit, moved, reruns, recovered, lost)
}

// killEnv is the environment that makes killGitScript fire.
func (w *mergeWorld) killEnv(sub, sig string, nth int, delay time.Duration, round string) ([]string, string) {
	dir := filepath.Join(w.h.dir, "kill-"+round)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		w.h.t.Fatal(err)
	}
	done := filepath.Join(dir, "done")
	return []string{
		"PATH=" + w.killer + string(os.PathListSeparator) + os.Getenv("PATH"),
		"R1_REAL_GIT=" + w.realGit,
		"R1_KILL_SUB=" + sub,
		"R1_KILL_SIG=" + sig,
		fmt.Sprintf("R1_KILL_NTH=%d", nth),
		fmt.Sprintf("R1_KILL_DELAY=%.3f", delay.Seconds()),
		"R1_KILL_COUNT=" + filepath.Join(dir, "count"),
		"R1_KILL_DONE=" + done,
	}, done
}
