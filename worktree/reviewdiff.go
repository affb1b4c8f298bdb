package worktree

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// A review request carries the reviewed change's diff, cut to fit a
// message (DESIGN §13.3: reviews cover the whole change). It is cut at
// file boundaries, so every file is either shown whole or named as left
// out with its size, and the reviewer reads those with its read-only
// tools: an approval must never merge code the reviewer could not see.

// ReviewPatch is the diff of a reviewed commit against the base branch.
type ReviewPatch struct {
	// Base is the base branch, Commit the reviewed commit.
	Base, Commit string
	// Diff holds the files that fit, whole, in file order; when some did
	// not, it ends with a note naming them.
	Diff string
	// Size is the whole diff's size in bytes, Shown the bytes of it Diff
	// holds (without the note).
	Size, Shown int
	// Files counts the changed files; LeftOut lists those Diff leaves out.
	Files   int
	LeftOut []LeftOutFile
}

// Cut reports whether files were left out.
func (p ReviewPatch) Cut() bool { return len(p.LeftOut) > 0 }

// LeftOutFile is a file whose diff did not fit in the review request.
type LeftOutFile struct {
	Path string `json:"path"`
	// DiffBytes is the size of its diff; Bytes its size at the reviewed
	// commit, -1 when the commit deletes it.
	DiffBytes int `json:"diff_bytes"`
	Bytes     int `json:"bytes"`
}

// String is "path (diff 70123 bytes, file 68000 bytes at the commit)".
func (f LeftOutFile) String() string {
	at := "deleted by the commit"
	if f.Bytes >= 0 {
		at = "file " + bytesText(f.Bytes) + " at the commit"
	}
	return fmt.Sprintf("%s (diff %s, %s)", f.Path, bytesText(f.DiffBytes), at)
}

func bytesText(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.Itoa(n) + " bytes"
}

// reviewDiffArgs are the options of every diff a reviewer is shown:
// never an external diff or a textconv filter, which would run a program
// of the agent's choosing and show its output instead of the bytes.
var reviewDiffArgs = []string{"--no-color", "--no-ext-diff", "--no-textconv"}

// ReviewDiff is `git diff <base>...<commit>`: what commit changes since
// it left the base branch. Files are taken whole, in order, while they
// fit in max bytes; each one that does not is left out and named, with
// its size, in a note at the end of Diff.
func (m *Manager) ReviewDiff(ctx context.Context, commit string, max int) (ReviewPatch, error) {
	base, err := m.BaseBranch(ctx)
	if err != nil {
		return ReviewPatch{}, err
	}
	p := ReviewPatch{Base: base, Commit: commit}
	rng := "refs/heads/" + base + "..." + commit
	out, err := m.run(ctx, m.root, append(append([]string{"diff"}, reviewDiffArgs...), rng, "--")...)
	if err != nil {
		return p, fmt.Errorf("diff %s...%s: %w", base, text.Short(commit, 12), err)
	}
	if out != "" {
		out += "\n"
	}
	p.Size = len(out)
	paths, err := m.diffPaths(ctx, rng)
	if err != nil {
		return p, err
	}
	chunks := splitDiff(out)
	p.Files = len(paths)
	if len(chunks) != len(paths) {
		// Not split as expected: show what fits and name every file.
		cut := min(len(out), max)
		if i := strings.LastIndexByte(out[:cut], '\n'); i >= 0 && cut < len(out) {
			cut = i + 1
		}
		p.Diff, p.Shown = out[:cut], cut
		for _, path := range paths {
			p.LeftOut = append(p.LeftOut, LeftOutFile{Path: path, Bytes: -1})
		}
	} else {
		var b strings.Builder
		for i, c := range chunks {
			if b.Len()+len(c) > max {
				p.LeftOut = append(p.LeftOut, LeftOutFile{Path: paths[i], DiffBytes: len(c)})
				continue
			}
			b.WriteString(c)
		}
		p.Diff, p.Shown = b.String(), b.Len()
	}
	if !p.Cut() {
		return p, nil
	}
	if err := m.sizesAt(ctx, commit, p.LeftOut); err != nil {
		return p, err
	}
	p.Diff += p.note()
	return p, nil
}

// note is what Diff ends with when files were left out.
func (p ReviewPatch) note() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n[diff cut: it shows %d of %d bytes; %d of %d files are left out, and you must read them before you judge the change (the coordinator notes say how):\n",
		p.Shown, p.Size, len(p.LeftOut), p.Files)
	for _, f := range p.LeftOut {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	b.WriteString("]\n")
	return b.String()
}

// splitDiff cuts a patch into one chunk per file, each starting at its
// "diff --git" line.
func splitDiff(out string) []string {
	if out == "" {
		return nil
	}
	var chunks []string
	start := 0
	for i := 0; ; {
		j := strings.Index(out[i:], "\ndiff --git ")
		if j < 0 {
			break
		}
		j += i + 1
		chunks = append(chunks, out[start:j])
		start, i = j, j
	}
	return append(chunks, out[start:])
}

// diffPaths lists the paths the diff of rng changes, in the diff's order
// (a rename by its new path).
func (m *Manager) diffPaths(ctx context.Context, rng string) ([]string, error) {
	res, err := m.runEnv(ctx, m.root, nil, append(append([]string{"diff"}, reviewDiffArgs...), "--numstat", "-z", rng, "--")...)
	if err != nil {
		return nil, fmt.Errorf("list the files of %s: %w", rng, err)
	}
	fields := strings.Split(string(res.Stdout), "\x00")
	var paths []string
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f == "" {
			continue
		}
		// "added\tdeleted\tpath", or "added\tdeleted\t" then old and new.
		parts := strings.SplitN(f, "\t", 3)
		if len(parts) < 3 {
			continue
		}
		if parts[2] != "" {
			paths = append(paths, parts[2])
			continue
		}
		if i+2 < len(fields) {
			paths = append(paths, fields[i+2])
		}
		i += 2
	}
	return paths, nil
}

// sizesAt fills in each file's size at commit (-1 when it is not there).
func (m *Manager) sizesAt(ctx context.Context, commit string, files []LeftOutFile) error {
	args := []string{"ls-tree", "-l", "-z", commit, "--"}
	for _, f := range files {
		args = append(args, ":(literal)"+f.Path)
	}
	res, err := m.runEnv(ctx, m.root, nil, args...)
	if err != nil {
		return fmt.Errorf("read the sizes of the files left out: %w", err)
	}
	sizes := map[string]int{}
	for _, e := range strings.Split(string(res.Stdout), "\x00") {
		// "<mode> <type> <object> <size>\t<path>"
		meta, path, ok := strings.Cut(e, "\t")
		if !ok {
			continue
		}
		fs := strings.Fields(meta)
		if len(fs) == 4 {
			if n, err := strconv.Atoi(fs[3]); err == nil {
				sizes[path] = n
			}
		}
	}
	for i := range files {
		files[i].Bytes = -1
		if n, ok := sizes[files[i].Path]; ok {
			files[i].Bytes = n
		}
	}
	return nil
}

// ReviewedDiff is what a reviewer reads of a commit it reviews: git diff
// <base>...<commit>, of paths only when given (literal paths, no
// patterns). commit must be on swarm/<agent>, so the read stays on the
// change under review.
type ReviewedDiff struct {
	Agent  string   `json:"agent"`
	Branch string   `json:"branch"`
	Base   string   `json:"base"`
	Commit string   `json:"commit"`
	Paths  []string `json:"paths,omitempty"`
	Diff   string   `json:"diff"`
}

// ReviewedDiff reads the diff of commit, which must be on swarm/<agent>,
// against the base branch, with git's flags (--stat, --color=...).
func (m *Manager) ReviewedDiff(ctx context.Context, agent, commit string, paths []string, flags ...string) (ReviewedDiff, error) {
	d := ReviewedDiff{Agent: agent, Branch: Branch(agent), Paths: paths}
	_, base, err := m.diffable(ctx, agent)
	if err != nil {
		return d, err
	}
	d.Base = base
	if strings.HasPrefix(commit, "-") {
		return d, fmt.Errorf("%q is not a commit: give the hash the review request names", commit)
	}
	full, ok, err := m.revParse(ctx, m.root, commit)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, fmt.Errorf("no commit %q in this repository: give the hash the review request names", commit)
	}
	if on, err := m.ok(ctx, m.root, "merge-base", "--is-ancestor", full, branchRef(agent)); err != nil || !on {
		if err == nil {
			err = fmt.Errorf("commit %s is not on %s: give the commit the review request names, and the agent whose branch it is", text.Short(full, 12), d.Branch)
		}
		return d, err
	}
	d.Commit = full
	args := append(append(append([]string{"diff"}, reviewDiffArgs...), flags...), "refs/heads/"+base+"..."+full, "--")
	for _, p := range paths {
		args = append(args, ":(literal)"+p)
	}
	if d.Diff, err = m.run(ctx, m.root, args...); err != nil {
		return d, fmt.Errorf("diff %s...%s: %w", base, text.Short(full, 12), err)
	}
	return d, nil
}
