package worktree

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/swarmhq/swarm/internal/text"
)

// Early warnings (DESIGN §14): after each session, the agent's branch is
// trial-merged in memory (`git merge-tree --write-tree`: objects only, no
// index, file or ref is touched) with the base branch, and with each
// teammate's branch that changed some of the same files, so both agents
// hear of an overlap long before a landing conflicts. It stays cheap on a
// big repository: a branch's changed files are one tree diff against its
// merge base with the base branch (`git diff --name-only base...branch`,
// whose cost follows the changed subtrees, not the repository), remembered
// per pair of tips in an OverlapCache; a merge runs only for a pair whose
// changed files intersect.

// Overlap is what the trial merges found about one agent's branch.
type Overlap struct {
	Agent string
	Base  string
	// Changed lists the files the branch changed since it left the base,
	// sorted.
	Changed []string
	// BaseConflicts lists the files a merge of the branch and the base
	// conflicts in.
	BaseConflicts []string
	// Teammates are the teammates whose branches changed some of the same
	// files, in the order asked.
	Teammates []PairOverlap
}

// PairOverlap is one teammate's overlap with the agent.
type PairOverlap struct {
	Agent string
	// Files both branches changed; Conflicts those of them a merge of the
	// two branches conflicts in.
	Files     []string
	Conflicts []string
}

// OverlapCache remembers the files each branch tip changed since it left
// a base tip, so an agent's early warning diffs only the branches that
// moved. Its zero value is ready; it is safe for concurrent use.
type OverlapCache struct {
	mu    sync.Mutex
	files map[string][]string // "<base tip> <tip>" → changed files
}

// maxOverlapCache bounds the cache; past it, it starts again.
const maxOverlapCache = 4096

func (c *OverlapCache) get(key string) ([]string, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[key]
	return f, ok
}

func (c *OverlapCache) put(key string, files []string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil || len(c.files) >= maxOverlapCache {
		c.files = map[string][]string{}
	}
	c.files[key] = files
}

// Overlaps trial-merges agent's branch with the base branch and with the
// branches of teammates that changed the same files (see the top of this
// file). A teammate without a branch is skipped. cache may be nil.
func (m *Manager) Overlaps(ctx context.Context, agent string, teammates []string, cache *OverlapCache) (Overlap, error) {
	res := Overlap{Agent: agent}
	if err := checkAgent(agent); err != nil {
		return res, err
	}
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return res, err
	}
	res.Base = base
	tips, err := m.tips(ctx, base)
	if err != nil {
		return res, err
	}
	baseTip, tip := tips["refs/heads/"+base], tips[branchRef(agent)]
	if baseTip == "" || tip == "" {
		return res, nil
	}
	if res.Changed, err = m.changedSince(ctx, baseTip, tip, cache); err != nil || len(res.Changed) == 0 {
		return res, err
	}
	if err := m.mergeTreeSupported(ctx); err != nil {
		return res, err
	}
	if _, res.BaseConflicts, err = m.mergeTree(ctx, tip, baseTip); err != nil {
		return res, err
	}
	for _, mate := range teammates {
		other := tips[branchRef(mate)]
		if mate == agent || checkAgent(mate) != nil || other == "" {
			continue
		}
		theirs, err := m.changedSince(ctx, baseTip, other, cache)
		if err != nil {
			return res, err
		}
		both := intersect(res.Changed, theirs)
		if len(both) == 0 {
			continue
		}
		_, conflicts, err := m.mergeTree(ctx, tip, other)
		if err != nil {
			return res, err
		}
		// Only the files both changed: a conflict elsewhere comes from
		// the base one of them merged, which BaseConflicts reports.
		res.Teammates = append(res.Teammates, PairOverlap{Agent: mate, Files: both, Conflicts: intersect(both, conflicts)})
	}
	return res, nil
}

// tips reads the base branch's tip and every agent branch's in one git
// call.
func (m *Manager) tips(ctx context.Context, base string) (map[string]string, error) {
	out, err := m.run(ctx, m.root, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"+BranchPrefix, "refs/heads/"+base)
	if err != nil {
		return nil, fmt.Errorf("read the branches: %w", err)
	}
	tips := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if hash, ref, ok := strings.Cut(line, " "); ok {
			tips[ref] = hash
		}
	}
	return tips, nil
}

// changedSince lists, sorted, the files tip changed since its merge base
// with baseTip.
func (m *Manager) changedSince(ctx context.Context, baseTip, tip string, cache *OverlapCache) ([]string, error) {
	key := baseTip + " " + tip
	if files, ok := cache.get(key); ok {
		return files, nil
	}
	res, err := m.runEnv(ctx, m.root, nil, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", baseTip+"..."+tip, "--")
	if err != nil {
		return nil, fmt.Errorf("list the files %s changed: %w", text.Short(tip, 7), err)
	}
	var files []string
	for _, f := range strings.Split(string(res.Stdout), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	cache.put(key, files)
	return files, nil
}

// intersect returns the strings of sorted a that are in b.
func intersect(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	in := make(map[string]bool, len(b))
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if in[s] {
			out = append(out, s)
		}
	}
	return out
}
