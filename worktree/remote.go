package worktree

import (
	"context"
	"fmt"
	"strings"
)

// Push publishes the agent's branch to remote, so that work done on this
// host can be merged from any other ([worktree] push). The branch is the
// agent's alone, and a branch made again after a merge does not descend
// from the pushed one, so the push forces.
func (m *Manager) Push(ctx context.Context, remote, agent string) error {
	ref := "refs/heads/" + Branch(agent)
	if ok, err := m.ok(ctx, m.root, "rev-parse", "--verify", "--quiet", ref); err != nil || !ok {
		return err // no branch yet: nothing to publish
	}
	if _, err := m.runRemote(ctx, m.root, "push", "--quiet", "--force", "--no-verify", remote, "+"+ref+":"+ref); err != nil {
		return fmt.Errorf("push %s to %s: %w", Branch(agent), remote, err)
	}
	return nil
}

// Fetched is what Fetch did for one agent.
type Fetched struct {
	Agent string
	// What is "created" (the branch was only on the remote),
	// "fast-forwarded", "up to date", "kept" (the local branch has work
	// the remote lacks, or a worktree here has it checked out), or
	// "absent" (not on the remote).
	What string
	Old  string
	New  string
}

func (f Fetched) String() string {
	switch f.What {
	case "created":
		return fmt.Sprintf("%s: fetched %s at %s", f.Agent, Branch(f.Agent), short(f.New))
	case "fast-forwarded":
		return fmt.Sprintf("%s: fetched %s, %s..%s", f.Agent, Branch(f.Agent), short(f.Old), short(f.New))
	}
	return fmt.Sprintf("%s: %s", f.Agent, f.What)
}

// Fetch brings the agents' branches from remote before a merge: a branch
// that exists only there is created here, and one the remote is ahead of
// is fast-forwarded. A local branch with work the remote lacks, or one
// checked out in a worktree here, is left as it is.
func (m *Manager) Fetch(ctx context.Context, remote string, agents []string) ([]Fetched, error) {
	var out []Fetched
	for _, a := range agents {
		ref := "refs/heads/" + Branch(a)
		ls, err := m.run(ctx, m.root, "ls-remote", "--heads", remote, ref)
		if err != nil {
			return out, fmt.Errorf("list %s's branches: %w", remote, err)
		}
		theirs, _, found := strings.Cut(strings.TrimSpace(ls), "\t")
		if !found || theirs == "" {
			out = append(out, Fetched{Agent: a, What: "absent"})
			continue
		}
		if _, err := m.runRemote(ctx, m.root, "fetch", "--quiet", "--no-tags", remote, ref); err != nil {
			return out, fmt.Errorf("fetch %s from %s: %w", Branch(a), remote, err)
		}
		mine, has, err := m.revParse(ctx, m.root, ref)
		if err != nil {
			return out, err
		}
		switch {
		case !has:
			if _, err := m.run(ctx, m.root, "update-ref", ref, theirs, ""); err != nil {
				return out, fmt.Errorf("create %s: %w", Branch(a), err)
			}
			out = append(out, Fetched{Agent: a, What: "created", New: theirs})
		case mine == theirs:
			out = append(out, Fetched{Agent: a, What: "up to date", Old: mine, New: theirs})
		default:
			info, err := m.Inspect(ctx, a)
			if err != nil {
				return out, err
			}
			ahead, err := m.isAncestor(ctx, mine, theirs)
			if err != nil {
				return out, err
			}
			if !ahead || info.Registered {
				out = append(out, Fetched{Agent: a, What: "kept", Old: mine, New: theirs})
				continue
			}
			if _, err := m.run(ctx, m.root, "update-ref", ref, theirs, mine); err != nil {
				return out, fmt.Errorf("fast-forward %s: %w", Branch(a), err)
			}
			out = append(out, Fetched{Agent: a, What: "fast-forwarded", Old: mine, New: theirs})
		}
	}
	return out, nil
}
