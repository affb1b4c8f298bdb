package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/swarmhq/swarm/proc"
)

// The read-only git tools (DESIGN §13.3: reviews cover the whole change).
// A session with no shell reads the commit it reviews with them: its diff
// against the base branch, and its files. They read only the commits of
// Session.Reviews, run git with no program of the repository's choosing
// (no hooks, fsmonitor, external diff or textconv), and never write.

// Review is a commit the session's agent is asked to review: a workflow
// item in review.
type Review struct {
	Item   string // the work item
	Dev    string // whose branch (swarm/<Dev>) the commit is on
	Commit string // the reviewed commit, a full hash
	Base   string // the base branch the diff is against
}

// gitToolTimeout bounds one git run of the read-only git tools.
const gitToolTimeout = time.Minute

type gitArgs struct {
	Commit, Path string
	Stat         bool
	Start, End   int
}

// review picks the review a call is about: the one whose commit starts
// with commit, or the only one when commit is "".
func (tb *toolbox) review(commit string) (Review, error) {
	rs := tb.s.Reviews
	if len(rs) == 0 {
		return Review{}, errors.New("you have no commit to review: these tools read only the commit a review_request sent to you names")
	}
	var names []string
	for _, r := range rs {
		names = append(names, fmt.Sprintf("%s (item %s)", r.Commit[:min(12, len(r.Commit))], r.Item))
	}
	commit = strings.TrimSpace(commit)
	if commit == "" {
		if len(rs) == 1 {
			return rs[0], nil
		}
		return Review{}, fmt.Errorf("you review several commits; give commit, one of: %s", strings.Join(names, ", "))
	}
	if len(commit) >= 4 {
		for _, r := range rs {
			if strings.HasPrefix(r.Commit, strings.ToLower(commit)) {
				return r, nil
			}
		}
	}
	return Review{}, fmt.Errorf("commit %q is not one you review; these tools read only: %s", commit, strings.Join(names, ", "))
}

// cleanRepoPath checks a path of the repository as the model wrote it.
func cleanRepoPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	p = strings.TrimPrefix(p, "./")
	if p == "" {
		return "", nil
	}
	c := path.Clean(p)
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q: give a path from the repository's root, such as api/users.go", p)
	}
	return c, nil
}

// gitDiff shows the reviewed commit's diff against the base branch, of
// one path or all.
func (tb *toolbox) gitDiff(ctx context.Context, a gitArgs) (string, error) {
	r, err := tb.review(a.Commit)
	if err != nil {
		return "", err
	}
	p, err := cleanRepoPath(a.Path)
	if err != nil {
		return "", err
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv"}
	if a.Stat {
		args = append(args, "--stat")
	}
	args = append(args, "refs/heads/"+r.Base+"..."+r.Commit, "--")
	if p != "" {
		args = append(args, ":(literal)"+p)
	}
	out, err := tb.git(ctx, args...)
	if err != nil {
		return "", err
	}
	if out == "" {
		what := "the commit changes nothing"
		if p != "" {
			what = "the commit does not change " + p
		}
		return what + fmt.Sprintf(" against %s.\n", r.Base), nil
	}
	return pageLines(out, a.Start, a.End, "git_diff")
}

// gitShow shows a file as the reviewed commit has it, or, with no path,
// the commit's message and the files it changes.
func (tb *toolbox) gitShow(ctx context.Context, a gitArgs) (string, error) {
	r, err := tb.review(a.Commit)
	if err != nil {
		return "", err
	}
	p, err := cleanRepoPath(a.Path)
	if err != nil {
		return "", err
	}
	if p == "" {
		out, err := tb.git(ctx, "show", "--no-color", "--stat", "--format=commit %H%nAuthor: %an <%ae>%n%n%B", r.Commit, "--")
		if err != nil {
			return "", err
		}
		return pageLines(out, a.Start, a.End, "git_show")
	}
	out, err := tb.git(ctx, "cat-file", "blob", r.Commit+":"+p)
	if err != nil {
		return "", fmt.Errorf("git_show %s: the commit %s has no file %s (git_diff with stat lists what it changes)", p, r.Commit[:min(12, len(r.Commit))], p)
	}
	if isBinary([]byte(out)) {
		return "", fmt.Errorf("git_show %s: binary file (%d bytes); git_show shows text only", p, len(out))
	}
	return pageLines(out, a.Start, a.End, "git_show")
}

// git runs one read-only git command in the repository root.
func (tb *toolbox) git(ctx context.Context, args ...string) (string, error) {
	tctx, cancel := context.WithTimeout(ctx, gitToolTimeout)
	defer cancel()
	full := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=", "--no-pager"}, args...)
	cmd := exec.CommandContext(tctx, "git", full...)
	proc.Configure(cmd, tb.bashGrace())
	cmd.Dir = tb.s.Root
	cmd.Env = append(withoutKey(tb.env, "GIT_DIR"), "GIT_OPTIONAL_LOCKS=0", "GIT_EXTERNAL_DIFF=", "GIT_PAGER=cat")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return "", errCancelled
	case tctx.Err() != nil:
		return "", fmt.Errorf("git %s timed out after %s", args[0], gitToolTimeout)
	case err != nil:
		return "", fmt.Errorf("git %s failed: %s", args[0], oneLine(errb.String(), 300))
	}
	return out.String(), nil
}

// pageLines returns lines start to end of text (1-based, inclusive; 0 is
// unset), cut at MaxToolOutput with a note saying how to read on.
func pageLines(text string, start, end int, tool string) (string, error) {
	if start > 0 || end > 0 {
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		s, e := max(start, 1), end
		if e == 0 || e > len(lines) {
			e = len(lines)
		}
		if s > len(lines) {
			return "", fmt.Errorf("%s: start_line %d is past the end (%d lines)", tool, s, len(lines))
		}
		text = strings.Join(lines[s-1:e], "")
	}
	if len(text) > MaxToolOutput {
		cut := truncUTF8(text, MaxToolOutput)
		if i := strings.LastIndexByte(cut, '\n'); i > 0 {
			cut = cut[:i+1]
		}
		shown := strings.Count(cut, "\n")
		return cut + fmt.Sprintf("\n[... truncated: %d of %d bytes shown; pass start_line %d (and end_line) to read on ...]\n", len(cut), len(text), max(start, 1)+shown), nil
	}
	return text, nil
}
