package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/worktree"
)

type p5Details struct {
	Agents     int     `json:"agents"`
	RepoFiles  int     `json:"repo_files"`
	RepoKiB    int     `json:"repo_kib"`
	Ensure     dist    `json:"ensure"`
	Plain      dist    `json:"git_worktree_add"`
	RatioP50   float64 `json:"ratio_p50"`
	RatioMean  float64 `json:"ratio_mean"`
	EnsureMean float64 `json:"ensure_mean_ms"`
	PlainMean  float64 `json:"plain_mean_ms"`
}

// p5 creates agents' worktrees with worktree.Manager.Ensure (what `swarm up`
// does per agent: inspect, exclude check, `git worktree add -b`) and, in
// alternation on the same repository, plain `git worktree add -b` of the
// same branch shape, and compares the medians.
func (b *bench) p5(ctx context.Context) error {
	n := 20
	if b.quick {
		n = 5
	}
	det, err := b.p5Repo(ctx, "p5", n, 300)
	if err != nil {
		return err
	}
	small, err := b.p5Repo(ctx, "p5-small", n, 3)
	if err != nil {
		return err
	}
	b.details["P5"] = det
	b.details["P5_small_repo"] = small
	b.add(row{ID: "P5", Figure: fmt.Sprintf("worktree per agent: Ensure / plain `git worktree add`, p50 (%d each, %d-file repo)", n, det.RepoFiles),
		Value: det.Ensure.P50, Unit: "ms", Text: fmt.Sprintf("%.1f / %.1f ms", det.Ensure.P50, det.Plain.P50)})
	b.check(row{ID: "P5", Figure: "  ratio (medians)", Value: det.RatioP50, Unit: "ratio", Text: fmt.Sprintf("%.2f (mean %.2f)", det.RatioP50, det.RatioMean)},
		"≤ 1.2", det.RatioP50 <= 1.2)
	b.add(row{ID: "P5", Figure: fmt.Sprintf("  same on a %d-file repo (checkout nearly free): p50, ratio", small.RepoFiles), Value: small.RatioP50, Unit: "ratio",
		Text: fmt.Sprintf("%.1f / %.1f ms, %.2f", small.Ensure.P50, small.Plain.P50, small.RatioP50)})
	return nil
}

// p5Repo measures Ensure against plain `git worktree add` in a new
// repository of files files.
func (b *bench) p5Repo(ctx context.Context, name string, n, files int) (p5Details, error) {
	const size = 2048
	var det p5Details
	repo, err := b.newRepo(name, files, size)
	if err != nil {
		return det, err
	}
	// As `swarm init` leaves it: .swarm/ is excluded.
	if err := appendFile(filepath.Join(repo, ".git", "info", "exclude"), "\n.swarm/\n"); err != nil {
		return det, err
	}
	m, err := worktree.New(ctx, worktree.Options{Root: repo, Env: b.env()})
	if err != nil {
		return det, err
	}
	if err := m.Preflight(ctx); err != nil {
		return det, err
	}
	if _, err := m.BaseBranch(ctx); err != nil {
		return det, err
	}
	plainDir := filepath.Join(repo, ".swarm", "plain")
	plain := func(i int) error {
		cmd := exec.Command("git", "worktree", "add", "-b", fmt.Sprintf("plain/agent-%02d", i), filepath.Join(plainDir, fmt.Sprintf("agent-%02d", i)), "refs/heads/main")
		cmd.Dir = repo
		cmd.Env = b.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git worktree add: %v: %s", err, out)
		}
		return nil
	}
	ensure := func(i int) error {
		_, err := m.Ensure(ctx, fmt.Sprintf("agent-%02d", i))
		return err
	}
	// One of each first: the exclude file, the directories, the caches.
	if err := ensure(0); err != nil {
		return det, err
	}
	if err := plain(0); err != nil {
		return det, err
	}
	var es, ps []time.Duration
	var eSum, pSum time.Duration
	type step struct {
		fn     func(int) error
		ensure bool
	}
	for i := 1; i <= n; i++ {
		order := []step{{ensure, true}, {plain, false}}
		if i%2 == 0 {
			order[0], order[1] = order[1], order[0]
		}
		for _, s := range order {
			t0 := time.Now()
			if err := s.fn(i); err != nil {
				return det, err
			}
			d := time.Since(t0)
			if s.ensure {
				es, eSum = append(es, d), eSum+d
			} else {
				ps, pSum = append(ps, d), pSum+d
			}
		}
	}
	det = p5Details{Agents: n, RepoFiles: files, RepoKiB: files * size / 1024, Ensure: summarize(es), Plain: summarize(ps)}
	det.RatioP50 = round(det.Ensure.P50/det.Plain.P50, 2)
	det.RatioMean = round(float64(eSum)/float64(pSum), 2)
	det.EnsureMean, det.PlainMean = ms(eSum/time.Duration(n)), ms(pSum/time.Duration(n))
	return det, nil
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
