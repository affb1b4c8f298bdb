package promptpipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sync/errgroup"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/proc"
)

// osRelease is the kernel's release once read: it does not change while
// the process runs, and a `uname -r` per prompt was a process per session
// (P3's prompt build ran one beside bd and git status).
var osRelease struct {
	mu sync.Mutex
	v  string
}

// osVersion is `uname -r`: /proc's copy where there is one, else uname;
// remembered once read.
func osVersion(ctx context.Context, timeout time.Duration) (string, error) {
	osRelease.mu.Lock()
	v := osRelease.v
	osRelease.mu.Unlock()
	if v != "" {
		return v, nil
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		v = strings.TrimSpace(string(b))
	}
	if v == "" {
		res, err := proc.Run(ctx, proc.Spec{Timeout: timeout, Grace: 100 * time.Millisecond}, "uname", "-r")
		if err != nil {
			return "", err
		}
		v = strings.TrimSpace(string(res.Stdout))
	}
	osRelease.mu.Lock()
	osRelease.v = v
	osRelease.mu.Unlock()
	return v, nil
}

// recentCommits is how many commits the Environment section lists.
const recentCommits = 5

// Gather reads every source in parallel, each under its own timeout. It
// always returns; what failed is missing from the result and logged.
func (b *Builder) Gather(ctx context.Context, pc PromptContext) Sources {
	now := b.now()
	src := Sources{Env: EnvironmentInfo{
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Shell:    b.getenv("SHELL"),
		Cwd:      pc.Worktree,
		Date:     now,
	}}
	log := b.logger().With("agent", pc.Agent)
	drop := func(source string, err error) {
		if ctx.Err() != nil {
			// The caller gave up on the whole build; nothing is broken.
			log.Debug("prompt source cut short", "source", source, "error", err)
			return
		}
		log.Warn("prompt source dropped", "source", source, "error", err)
	}
	gitTimeout := b.gitTimeout()
	// Each goroutine writes only its own fields, and none returns an error:
	// one source failing must not cancel the others.
	var g errgroup.Group
	g.Go(func() error {
		v, err := osVersion(ctx, gitTimeout)
		if err != nil {
			drop("uname", err)
			return nil
		}
		src.Env.OSVersion = v
		return nil
	})
	g.Go(func() error {
		status, err := gitStatus(ctx, pc.Worktree, gitTimeout)
		if err != nil {
			drop("git_status", err)
			return nil
		}
		src.Env.GitStatus, src.Env.HasGitStatus = status, true
		return nil
	})
	g.Go(func() error {
		commits, err := within(ctx, gitTimeout, "git log", func() ([]string, error) {
			return readCommits(pc.Worktree, recentCommits)
		})
		if err != nil {
			drop("git_log", err)
			return nil
		}
		src.Env.RecentCommits, src.Env.HasCommits = commits, true
		return nil
	})
	g.Go(func() error {
		root := pc.Root
		if root == "" {
			root = pc.Worktree
		}
		text, err := os.ReadFile(filepath.Join(root, "AGENTS.md"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			drop("agents_md", err)
		default:
			src.ProjectInstructions = string(text)
		}
		return nil
	})
	if b.Tasks != nil {
		g.Go(func() error {
			late := fmt.Errorf("bd ready took longer than bd_timeout (%s): %w", b.bdTimeout(), context.DeadlineExceeded)
			tctx, cancel := context.WithTimeoutCause(ctx, b.bdTimeout(), late)
			defer cancel()
			tasks, err := b.Tasks.Ready(tctx)
			err = lateAs(tctx, err, late)
			switch {
			case errors.Is(err, beads.ErrNotInstalled):
				log.Debug("no task section: bd is not installed")
			case errors.Is(err, beads.ErrNoDatabase):
				log.Info("no task section: no beads database here (run 'bd init' to use beads)")
			case err != nil:
				drop("bd", err)
			default:
				src.Tasks = tasks
			}
			return nil
		})
	}
	if gs, ok := b.Tasks.(GraphSource); ok && b.Tasks != nil && needsGraph(pc) {
		g.Go(func() error {
			late := fmt.Errorf("bd list took longer than bd_timeout (%s): %w", b.bdTimeout(), context.DeadlineExceeded)
			tctx, cancel := context.WithTimeoutCause(ctx, b.bdTimeout(), late)
			defer cancel()
			graph, err := gs.List(tctx)
			err = lateAs(tctx, err, late)
			switch {
			case errors.Is(err, beads.ErrNotInstalled), errors.Is(err, beads.ErrNoDatabase):
			case err != nil:
				drop("bd list", err)
			default:
				src.Graph = graph
				src.HasGraph = true
			}
			return nil
		})
	}
	_ = g.Wait()
	return src
}

// GraphSource lists every open task with its dependencies (`bd list
// --json`): the layers, batches and trees of section 13 come from it.
type GraphSource interface {
	List(ctx context.Context) ([]beads.Issue, error)
}

// needsGraph reports whether the strategy plans from the task graph.
func needsGraph(pc PromptContext) bool {
	switch pc.Spec().EffectiveStrategy() {
	case mode.DAG, mode.IntelligentBatching, mode.Tree:
		return true
	}
	return false
}

// gitStatus runs `git status --short` in dir. GIT_OPTIONAL_LOCKS=0 keeps
// git from refreshing the index, which would take index.lock while the
// agent may be committing.
func gitStatus(ctx context.Context, dir string, timeout time.Duration) (string, error) {
	env := append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	res, err := proc.Run(ctx, proc.Spec{Dir: dir, Env: env, Timeout: timeout, Grace: 100 * time.Millisecond},
		"git", "status", "--short")
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(res.Stdout), "\n"), nil
}

// readCommits returns the newest n commits of HEAD as "<hash7> <subject>".
// An unborn HEAD (no commits yet) is an empty list, not an error.
func readCommits(dir string, n int) ([]string, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("open repository at %s: %w", dir, err)
	}
	head, err := r.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read HEAD: %w", err)
	}
	iter, err := r.Log(&git.LogOptions{From: head.Hash(), Order: git.LogOrderCommitterTime})
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	defer iter.Close()
	out := []string{}
	for len(out) < n {
		c, err := iter.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("read log: %w", err)
		}
		out = append(out, commitLine(c))
	}
	return out, nil
}

func commitLine(c *object.Commit) string {
	subject, _, _ := strings.Cut(strings.TrimSpace(c.Message), "\n")
	return c.Hash.String()[:7] + " " + strings.TrimSpace(subject)
}

// within runs f under a timeout. f cannot be cancelled (go-git takes no
// context), so on timeout it is abandoned to finish in the background;
// that only costs a read.
func within[T any](ctx context.Context, d time.Duration, what string, f func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("%s timed out after %s: %w", what, d, context.DeadlineExceeded))
	defer cancel()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// lateAs reports a call that failed once ctx's deadline had passed as late:
// the bd client applies the same bd_timeout to its own run, and which of
// the two timers the call noticed first is a matter of scheduling, not
// something to show the user.
func lateAs(ctx context.Context, err, late error) error {
	if err == nil || errors.Is(err, late) {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return late
	}
	return err
}
