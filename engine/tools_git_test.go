package engine

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/mode"
)

// A reviewer with no shell reads the commit it reviews, all of it: the
// diff of a file a cut review request left out, the file at the commit,
// the commit's summary. It reads nothing else: no other commit, no path
// outside the repository, and a later commit on the branch is not what
// it reads.
func TestGitToolsReadTheReviewedCommit(t *testing.T) {
	root, dev := gittest.Worktree(t, "dev", map[string]string{"README.md": "hello\n"})
	gittest.Git(t, root, "worktree", "add", "-q", "-b", "swarm/critic", filepath.Join(root, ".swarm", "worktrees", "critic"))
	writeFile(t, filepath.Join(dev, "filler.txt"), strings.Repeat("filler\n", 10000))
	writeFile(t, filepath.Join(dev, "zz/backdoor.go"), "package zz\n\nfunc Backdoor() {}\n")
	gittest.Git(t, dev, "add", ".")
	gittest.Git(t, dev, "commit", "-q", "-m", "dev: the work")
	reviewed := gittest.Git(t, dev, "rev-parse", "HEAD")
	writeFile(t, filepath.Join(dev, "zz/backdoor.go"), "package zz\n// later\n")
	gittest.Git(t, dev, "commit", "-qam", "dev: after the review")

	s := newSession(filepath.Join(root, ".swarm", "worktrees", "critic"), nil)
	s.Agent, s.Mode = "critic", mode.Review
	s.Root = root
	run := func(tool string, args map[string]any) ToolResult { t.Helper(); return runTool(t, s, tool, args) }

	if r := run(mode.GitDiff, map[string]any{"path": "zz/backdoor.go"}); !strings.Contains(r.Error, "no commit to review") {
		t.Fatalf("with no review: %+v", r)
	}
	s.Reviews = []Review{{Item: "T-1", Dev: "dev", Commit: reviewed, Base: "main"}}

	r := run(mode.GitDiff, map[string]any{"path": "zz/backdoor.go"})
	if r.Error != "" || !strings.Contains(r.Output, "+func Backdoor() {}") || strings.Contains(r.Output, "later") || strings.Contains(r.Output, "filler") {
		t.Fatalf("git_diff of the file: %+v", r)
	}
	r = run(mode.GitShow, map[string]any{"path": "./zz/backdoor.go", "commit": reviewed[:8]})
	if r.Error != "" || r.Output != "package zz\n\nfunc Backdoor() {}\n" {
		t.Fatalf("git_show of the file: %+v", r)
	}
	r = run(mode.GitShow, map[string]any{})
	if r.Error != "" || !strings.Contains(r.Output, "dev: the work") || !strings.Contains(r.Output, "zz/backdoor.go") {
		t.Fatalf("git_show of the commit: %+v", r)
	}
	r = run(mode.GitDiff, map[string]any{"stat": true})
	if r.Error != "" || !strings.Contains(r.Output, "filler.txt") || !strings.Contains(r.Output, "2 files changed") {
		t.Fatalf("git_diff --stat: %+v", r)
	}
	// A big diff is paged, saying how to read on.
	r = run(mode.GitDiff, map[string]any{"path": "filler.txt"})
	if r.Error != "" || !strings.Contains(r.Output, "[... truncated: ") || !strings.Contains(r.Output, "pass start_line ") {
		t.Fatalf("git_diff of the filler: %.300q / %s", r.Output, r.Error)
	}
	if r = run(mode.GitDiff, map[string]any{"path": "filler.txt", "start_line": 10003, "end_line": 10010}); r.Error != "" || strings.Count(r.Output, "+filler\n") != 4 {
		t.Fatalf("git_diff's last lines: %q / %s", r.Output, r.Error)
	}

	later := gittest.Git(t, dev, "rev-parse", "HEAD")
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"commit": later, "path": "zz/backdoor.go"}, "is not one you review"},
		{map[string]any{"commit": "HEAD", "path": "zz/backdoor.go"}, "is not one you review"},
		{map[string]any{"path": "../../etc/passwd"}, "from the repository's root"},
		{map[string]any{"path": "/etc/passwd"}, "from the repository's root"},
		{map[string]any{"path": "nope.go"}, "has no file nope.go"},
	} {
		if r := run(mode.GitShow, tc.args); !strings.Contains(r.Error, tc.want) {
			t.Fatalf("git_show %v: %+v, want an error with %q", tc.args, r, tc.want)
		}
	}
	// A code-mode session has a shell, and not these tools.
	s.Mode = mode.Code
	if r := run(mode.GitShow, map[string]any{"path": "zz/backdoor.go"}); !strings.Contains(r.Error, "not allowed in code mode") {
		t.Fatalf("code mode: %+v", r)
	}
}
