package worktree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// leftovers sorts what a half-applied merge left in the main checkout.
type leftovers struct {
	mergeHead bool
	tracked   []string // changed tracked paths, each the merge's doing
	added     []string // untracked files the merge wrote, as on the branch
	foreign   []string // changes that are not the merge's ("XY path")
}

// mergeLeftovers compares the main checkout, whose HEAD is at j.BaseTip,
// with what merging j.Tip into it can produce. A change is the merge's when
// every version of the path, in the index and in the working tree, is the
// base's, the branch's, or (for a path both changed) git's clean 3-way
// merge of the two; a conflicted path counts when its index stages are the
// three versions. An untracked file is the merge's when it is exactly the
// branch's version of a file the base lacks; other untracked files are the
// operator's and are not touched.
func (m *Manager) mergeLeftovers(ctx context.Context, j journal) (leftovers, error) {
	var lo leftovers
	var err error
	if lo.mergeHead, err = m.ok(ctx, m.root, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err != nil {
		return lo, err
	}
	chs, err := m.status(ctx, m.root, "all", false)
	if err != nil {
		return lo, err
	}
	if len(chs) == 0 {
		return lo, nil
	}
	mb, err := m.run(ctx, m.root, "merge-base", j.BaseTip, j.Tip)
	if err != nil {
		return lo, fmt.Errorf("find where %s left %s: %w", j.Branch, j.Base, err)
	}
	base, err := m.treeBlobs(ctx, j.BaseTip)
	if err != nil {
		return lo, err
	}
	tip, err := m.treeBlobs(ctx, j.Tip)
	if err != nil {
		return lo, err
	}
	anc, err := m.treeBlobs(ctx, mb)
	if err != nil {
		return lo, err
	}
	index, err := m.indexBlobs(ctx)
	if err != nil {
		return lo, err
	}
	work, err := m.workBlobs(ctx, chs)
	if err != nil {
		return lo, err
	}
	for _, c := range chs {
		p := c.path
		if c.x == '?' {
			// A file the agent adds, as git writes it: whole, or (killed
			// while writing it) its start, empty included.
			if b, ok := tip[p]; ok && base[p] == "" && (work[p] == b || m.halfWritten(ctx, p, b)) {
				lo.added = append(lo.added, p)
			}
			continue
		}
		if strings.HasSuffix(p, "/") {
			lo.foreign = append(lo.foreign, c.String())
			continue
		}
		allowed := map[string]bool{base[p]: true, tip[p]: true}
		if unmerged(c) {
			ok := true
			for _, b := range index[p] {
				ok = ok && (b == base[p] || b == tip[p] || b == anc[p])
			}
			if ok {
				lo.tracked = append(lo.tracked, p)
			} else {
				lo.foreign = append(lo.foreign, c.String())
			}
			continue
		}
		if base[p] != "" && tip[p] != "" && anc[p] != "" && base[p] != anc[p] && tip[p] != anc[p] && base[p] != tip[p] {
			merged, err := m.mergeFile(ctx, anc[p], base[p], tip[p])
			if err != nil {
				return lo, err
			}
			if merged != "" {
				allowed[merged] = true
			}
		}
		idx := ""
		if bs := index[p]; len(bs) == 1 {
			idx = bs[0]
		}
		switch {
		case allowed[idx] && allowed[work[p]]:
			lo.tracked = append(lo.tracked, p)
		case allowed[idx] && base[p] != tip[p] && tip[p] != "" && m.halfWritten(ctx, p, tip[p]):
			// git writes a file in place: killed in the middle, it left the
			// start of the agent's version. Both versions are in git, so
			// the rollback loses nothing.
			lo.tracked = append(lo.tracked, p)
		case allowed[idx] && base[p] != tip[p] && work[p] == "":
			// git replaces a file by unlinking it and writing the new one:
			// killed in between, the file is missing. Both versions are
			// in git.
			lo.tracked = append(lo.tracked, p)
		default:
			lo.foreign = append(lo.foreign, c.String())
		}
	}
	return lo, nil
}

// maxHalfWritten bounds the files halfWritten compares.
const maxHalfWritten = 64 << 20

// halfWritten reports whether the main checkout's file p holds the start of
// blob, and no more: what a git killed while it wrote blob there leaves.
// An edit of the operator's is not a prefix of the agent's version.
func (m *Manager) halfWritten(ctx context.Context, p, blob string) bool {
	fi, err := os.Lstat(filepath.Join(m.root, p))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxHalfWritten {
		return false
	}
	have, err := os.ReadFile(filepath.Join(m.root, p))
	if err != nil {
		return false
	}
	want, err := m.runEnv(ctx, m.root, nil, "cat-file", "blob", blob)
	if err != nil {
		return false
	}
	return len(have) < len(want.Stdout) && bytes.HasPrefix(want.Stdout, have)
}

func unmerged(c change) bool {
	return c.x == 'U' || c.y == 'U' || c.x == 'A' && c.y == 'A' || c.x == 'D' && c.y == 'D'
}

// treeBlobs maps every path of commit's tree to its object.
func (m *Manager) treeBlobs(ctx context.Context, commit string) (map[string]string, error) {
	res, err := m.runEnv(ctx, m.root, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return nil, fmt.Errorf("read the files of %s: %w", text.Short(commit, 7), err)
	}
	out := map[string]string{}
	for _, rec := range strings.Split(string(res.Stdout), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			out[path] = f[2]
		}
	}
	return out, nil
}

// indexBlobs maps every path of the main checkout's index to its objects,
// one per stage.
func (m *Manager) indexBlobs(ctx context.Context) (map[string][]string, error) {
	res, err := m.runEnv(ctx, m.root, []string{"GIT_OPTIONAL_LOCKS=0"}, "ls-files", "-s", "-z")
	if err != nil {
		return nil, fmt.Errorf("read the index of %s: %w", m.root, err)
	}
	out := map[string][]string{}
	for _, rec := range strings.Split(string(res.Stdout), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			out[path] = append(out[path], f[1])
		}
	}
	return out, nil
}

// workBlobs hashes the working-tree files that chs names (a path ending
// in "/", a nested repository, is no file) as git would store them; a
// missing file maps to "".
func (m *Manager) workBlobs(ctx context.Context, chs []change) (map[string]string, error) {
	var paths []string
	for _, c := range chs {
		if !strings.HasSuffix(c.path, "/") {
			paths = append(paths, c.path)
		}
	}
	out := map[string]string{}
	var files []string
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Join(m.root, p))
		switch {
		case err != nil:
			out[p] = ""
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(m.root, p))
			if err != nil {
				return nil, err
			}
			h, err := m.runStdin(ctx, m.root, target, "hash-object", "--stdin")
			if err != nil {
				return nil, err
			}
			out[p] = h
		case fi.Mode().IsRegular() && !strings.Contains(p, "\n") && !strings.HasPrefix(p, `"`):
			files = append(files, p)
		default:
			out[p] = "?" + p // a directory or an odd name: matches nothing
		}
	}
	if len(files) == 0 {
		return out, nil
	}
	// --stdin-paths applies the path's attributes (clean filters), as
	// `git add` would.
	hashes, err := m.runStdin(ctx, m.root, strings.Join(files, "\n")+"\n", "hash-object", "--stdin-paths")
	if err != nil {
		return nil, fmt.Errorf("hash the files in %s: %w", m.root, err)
	}
	hs := strings.Split(hashes, "\n")
	if len(hs) != len(files) {
		return nil, fmt.Errorf("hash the files in %s: %d hashes for %d files", m.root, len(hs), len(files))
	}
	for i, p := range files {
		out[p] = hs[i]
	}
	return out, nil
}

// mergeFile returns the object git's clean 3-way merge of the three blobs
// would store, or "" when they conflict.
func (m *Manager) mergeFile(ctx context.Context, anc, ours, theirs string) (string, error) {
	dir, err := os.MkdirTemp("", "swarm-merge-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	names := make([]string, 3)
	for i, blob := range []string{ours, anc, theirs} {
		res, err := m.runEnv(ctx, m.root, nil, "cat-file", "blob", blob)
		if err != nil {
			return "", err
		}
		names[i] = filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(names[i], res.Stdout, 0o600); err != nil {
			return "", err
		}
	}
	res, err := m.runEnv(ctx, m.root, nil, "merge-file", "-p", names[0], names[1], names[2])
	if err != nil {
		return "", nil // conflicts (or binary): no clean result to match
	}
	return m.runStdin(ctx, m.root, string(res.Stdout), "hash-object", "--stdin")
}
