package worktree

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestOverlapsNamesSharedFilesAndConflicts: alpha and beta both changed
// api.go (differently: a conflict) and beta also docs.md, which alpha did
// not touch; gamma changed only its own file; main changed x.go, which
// alpha changed too. alpha's overlaps name beta and api.go, and the
// conflict with main in x.go; nothing in any worktree or ref moves.
func TestOverlapsNamesSharedFilesAndConflicts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.commitAs("Test Operator", ".", "api.go", "package api\n", "api")
	f.commitAs("Test Operator", ".", "x.go", "package x\n", "x")
	a, b, g := f.ensure("alpha"), f.ensure("beta"), f.ensure("gamma")
	f.commitAs("swarm/alpha", a.Path, "api.go", "package api // alpha\n", "alpha: api")
	f.commitAs("swarm/alpha", a.Path, "x.go", "package x // alpha\n", "alpha: x")
	f.commitAs("swarm/beta", b.Path, "api.go", "package api // beta\n", "beta: api")
	f.commitAs("swarm/beta", b.Path, "docs.md", "docs\n", "beta: docs")
	f.commitAs("swarm/gamma", g.Path, "gamma.txt", "gamma\n", "gamma: own file")
	f.commitAs("Test Operator", ".", "x.go", "package x // main\n", "main: x")
	refs := f.git(".", "for-each-ref")
	var cache OverlapCache
	got, err := f.m.Overlaps(context.Background(), "alpha", []string{"beta", "gamma", "nobody"}, &cache)
	if err != nil {
		t.Fatal(err)
	}
	want := Overlap{Agent: "alpha", Base: "main", Changed: []string{"api.go", "x.go"}, BaseConflicts: []string{"x.go"},
		Teammates: []PairOverlap{{Agent: "beta", Files: []string{"api.go"}, Conflicts: []string{"api.go"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Overlaps =\n%+v\nwant\n%+v", got, want)
	}
	// beta's side of the same pair, from the cache for alpha's files.
	back, err := f.m.Overlaps(context.Background(), "beta", []string{"alpha", "gamma"}, &cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Teammates) != 1 || back.Teammates[0].Agent != "alpha" || len(back.BaseConflicts) != 0 {
		t.Fatalf("beta's Overlaps = %+v", back)
	}
	if f.git(".", "for-each-ref") != refs {
		t.Fatal("a trial merge moved a ref")
	}
	for _, wt := range []Worktree{a, b, g} {
		if st := f.git(wt.Path, "status", "--porcelain"); st != "" {
			t.Fatalf("a trial merge touched %s:\n%s", wt.Path, st)
		}
	}
	if st := f.git(".", "status", "--porcelain"); st != "" {
		t.Fatalf("a trial merge touched the checkout:\n%s", st)
	}
}

// BenchmarkOverlaps20k measures one agent's early warning on a 20,000-file
// repository against 10 teammates, three of whom changed a file it
// changed: the cost after each session. `go test -run '^$' -bench
// Overlaps20k ./worktree/`.
func BenchmarkOverlaps20k(b *testing.B) {
	env, root := repo20k(b)
	m, err := New(context.Background(), Options{Root: root, Env: env})
	if err != nil {
		b.Fatal(err)
	}
	var mates []string
	for i := range 11 {
		agent := fmt.Sprintf("a%d", i)
		wt, err := m.Ensure(context.Background(), agent)
		if err != nil {
			b.Fatal(err)
		}
		// Each changes its own file; a1..a3 also d000/f000.txt, as a0 does.
		own := filepath.Join(wt.Path, fmt.Sprintf("d%03d", 10+i), "f050.txt")
		if err := os.WriteFile(own, []byte(agent+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		if i <= 3 {
			if err := os.WriteFile(filepath.Join(wt.Path, "d000", "f000.txt"), []byte(agent+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		gitEnvB(b, env, wt.Path, "commit", "-qam", agent)
		if i > 0 {
			mates = append(mates, agent)
		}
	}
	b.ResetTimer()
	for range b.N {
		// No cache: the worst case, every teammate's branch moved.
		ov, err := m.Overlaps(context.Background(), "a0", mates, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(ov.Teammates) != 3 {
			b.Fatalf("Overlaps = %+v", ov)
		}
	}
}

func noIdentityEnvB(b *testing.B) []string {
	home := b.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=op", "GIT_AUTHOR_EMAIL=op@example.com", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@example.com")
}

func gitEnvB(b *testing.B, env []string, dir string, args ...string) {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// repo20k makes a repository of 20,000 files in 200 directories on main.
func repo20k(b *testing.B) ([]string, string) {
	b.Helper()
	env := noIdentityEnvB(b)
	root := filepath.Join(b.TempDir(), "repo")
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	gitEnvB(b, env, root, "init", "-q", "-b", "main")
	for d := range 200 {
		for i := range 100 {
			p := filepath.Join(root, fmt.Sprintf("d%03d", d), fmt.Sprintf("f%03d.txt", i))
			if i == 0 {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d/%d\n", d, i)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	gitEnvB(b, env, root, "add", ".")
	gitEnvB(b, env, root, "commit", "-q", "-m", "20,000 files")
	return env, root
}

// BenchmarkKeepCurrent20k measures bringing an agent's branch up to date
// before its session on a 20,000-file repository: main gains one commit
// (untimed), then KeepCurrent merges it into the branch and switches the
// worktree (timed). `go test -run '^$' -bench KeepCurrent20k ./worktree/`.
func BenchmarkKeepCurrent20k(b *testing.B) {
	env, root := repo20k(b)
	m, err := New(context.Background(), Options{Root: root, Env: env})
	if err != nil {
		b.Fatal(err)
	}
	wt, err := m.Ensure(context.Background(), "a0")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt.Path, "d001", "f001.txt"), []byte("a0\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	gitEnvB(b, env, wt.Path, "commit", "-qam", "a0")
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		p := filepath.Join(root, fmt.Sprintf("d%03d", 100+i%100), "f007.txt")
		if err := os.WriteFile(p, []byte(fmt.Sprintf("main %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		gitEnvB(b, env, root, "commit", "-qam", fmt.Sprintf("main %d", i))
		b.StartTimer()
		res, err := m.KeepCurrent(context.Background(), "a0")
		if err != nil || !res.Merged() {
			b.Fatalf("KeepCurrent = %+v, %v", res, err)
		}
	}
	b.StopTimer()
	// The check every session start makes when nothing moved.
	start := time.Now()
	for range 3 {
		if res, err := m.KeepCurrent(context.Background(), "a0"); err != nil || res.Merged() {
			b.Fatalf("KeepCurrent = %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/3, "ms/up-to-date-check")
}
