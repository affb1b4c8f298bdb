package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// MaxAutoDeletePercent is the share of the branch's tracked files that the
// uncommitted work in a worktree may delete before auto-commit refuses to
// save it. A worktree whose files were half removed (an interrupted `git
// worktree remove`) or half checked out (an interrupted first checkout)
// looks like that, and merging such a "save" deleted most of the base
// branch (issue 13). Real work that deletes this much is committed by hand.
const MaxAutoDeletePercent = 20

// change is one entry of `git status --porcelain -z`.
type change struct {
	x, y byte   // index and worktree status, as in git status --short
	path string // relative to the worktree; a directory ends in "/"
}

func (c change) String() string { return string([]byte{c.x, c.y}) + " " + c.path }

func (c change) deleted() bool { return c.x == 'D' || c.y == 'D' }

// status lists the changes in the worktree at dir. untracked is "no",
// "normal" or "all"; ignored adds the ignored files ("!!"). Renames are
// not detected, so a move shows as a deletion and a new file: callers that
// count deletions recount with rename detection before refusing. It takes
// no optional locks: an agent may be running git in there.
func (m *Manager) status(ctx context.Context, dir, untracked string, ignored bool) ([]change, error) {
	args := []string{"status", "--porcelain", "-z", "--no-renames", "--untracked-files=" + untracked}
	if ignored {
		args = append(args, "--ignored")
	}
	res, err := m.runEnv(ctx, dir, []string{"GIT_OPTIONAL_LOCKS=0"}, args...)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", dir, err)
	}
	var out []change
	for _, rec := range strings.Split(string(res.Stdout), "\x00") {
		if len(rec) < 4 {
			continue
		}
		out = append(out, change{x: rec[0], y: rec[1], path: rec[3:]})
	}
	return out, nil
}

// Uncommitted lists the uncommitted changes in agent's worktree, untracked
// files included (ignored ones are not), one "XY path" line each as in
// `git status --short`. No worktree means none.
func (m *Manager) Uncommitted(ctx context.Context, agent string) ([]string, error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	if _, err := m.worktreeDir(agent); err != nil {
		return nil, nil
	}
	return m.uncommitted(ctx, m.Path(agent))
}

func (m *Manager) uncommitted(ctx context.Context, path string) ([]string, error) {
	chs, err := m.status(ctx, path, "normal", false)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, c := range chs {
		out = append(out, c.String())
	}
	return out, nil
}

// Ignored lists the files and directories in agent's worktree that git
// ignores ("node_modules/", ".env"). Removing a worktree deletes them, and
// git says nothing about it; swarm lists them first, and keeps the
// worktree unless Options.DeleteIgnored is set.
func (m *Manager) Ignored(ctx context.Context, agent string) ([]string, error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	if _, err := m.worktreeDir(agent); err != nil {
		return nil, nil
	}
	return m.ignored(ctx, m.Path(agent))
}

func (m *Manager) ignored(ctx context.Context, path string) ([]string, error) {
	chs, err := m.status(ctx, path, "normal", true)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range chs {
		if c.x == '!' {
			out = append(out, c.path)
		}
	}
	return out, nil
}

// checkIgnored refuses to remove a worktree holding ignored files unless
// the Manager may delete them. It returns the list either way, for the
// report.
func (m *Manager) checkIgnored(ctx context.Context, info Info, what string) ([]string, error) {
	if !info.Valid() {
		return nil, nil
	}
	ign, err := m.ignored(ctx, info.Path)
	if err != nil || len(ign) == 0 || m.deleteIgnored {
		return ign, err
	}
	return ign, fmt.Errorf("%w: %s's worktree %s holds %s that git ignores, which removing it would delete: %s. Nothing was %s. Look at them (git -C %q status --ignored), move what you need, then run again with --delete-ignored",
		ErrIgnoredFiles, info.Agent, info.Path, text.Plural(len(ign), "file or directory", "files or directories"), text.ListSome(ign, 10), what, info.Path)
}

// checkSave refuses, before anything is staged, uncommitted work that is
// more likely damage than work: a nested repository (it would be committed
// as a gitlink, a pointer to commits no other clone has), or deletions of
// more than MaxAutoDeletePercent of the branch's files, or of any file when
// the worktree was never completely checked out. The work stays where it
// is. chs is the worktree's status with all untracked files.
func (m *Manager) checkSave(ctx context.Context, agent, path string, chs []change, complete bool) error {
	var nested []string
	deleted := 0
	for _, c := range chs {
		switch {
		case c.x == '?' && strings.HasSuffix(c.path, "/"):
			// With --untracked-files=all git lists files, and a directory
			// only when it is a repository of its own.
			nested = append(nested, strings.TrimSuffix(c.path, "/"))
		case c.deleted():
			deleted++
		}
	}
	staged, err := m.stagedGitlinks(ctx, path, "")
	if err != nil {
		return err
	}
	nested = append(nested, staged...)
	if len(nested) > 0 {
		return m.nestedError(agent, path, nested)
	}
	if deleted == 0 {
		return nil
	}
	total, err := m.trackedCount(ctx, path)
	if err != nil {
		return err
	}
	if !complete {
		return fmt.Errorf("%w: %s's worktree %s was never completely checked out, so its %d missing of %d files are not the agent's deletions; swarm committed nothing. Run 'swarm up' to finish the checkout, or look with 'git -C %q status'",
			ErrUnsafeAutoCommit, agent, path, deleted, total, path)
	}
	if deleted*100 <= total*MaxAutoDeletePercent {
		return nil
	}
	// Moving files shows as deletions above; count again with rename
	// detection before refusing.
	deleted, nested, err = m.stageCheck(ctx, path)
	if err != nil {
		return err
	}
	if len(nested) > 0 {
		return m.nestedError(agent, path, nested)
	}
	if deleted*100 <= total*MaxAutoDeletePercent {
		return nil
	}
	return fmt.Errorf("%w: the uncommitted changes in %s's worktree %s delete %d of the %d files of %s (more than %d%%), which looks like a damaged worktree rather than work; swarm committed nothing and left them there. Look with 'git -C %q status'. If the deletions are intended, commit them yourself (git -C %q add -A && git -C %q commit); if not, restore the files (git -C %q restore .); then run again",
		ErrUnsafeAutoCommit, agent, path, deleted, total, Branch(agent), MaxAutoDeletePercent, path, path, path, path)
}

func (m *Manager) nestedError(agent, path string, nested []string) error {
	full := make([]string, len(nested))
	for i, n := range nested {
		full[i] = filepath.Join(path, n)
	}
	return fmt.Errorf("%w: %s's worktree holds %s of its own: %s. Committing it would record only a pointer to its commits (a gitlink), which the merge would carry to the base branch without its files. Move it out of the worktree (or delete its .git if its history does not matter), then run again; look with 'git -C %q status'",
		ErrUnsafeAutoCommit, agent, text.Plural(len(nested), "git repository", "git repositories"), strings.Join(full, ", "), path)
}

// stagedGitlinks lists the gitlinks (mode 160000) that the index, or the
// index file idx when set, adds compared with HEAD: nested repositories
// someone staged.
func (m *Manager) stagedGitlinks(ctx context.Context, path, idx string) ([]string, error) {
	_, links, err := m.diffIndex(ctx, path, idx, false)
	return links, err
}

// diffIndex compares the index (or idx) with HEAD: the files it deletes
// (renames not counted when renames is set) and the gitlinks it adds.
func (m *Manager) diffIndex(ctx context.Context, path, idx string, renames bool) (int, []string, error) {
	var env []string
	if idx != "" {
		env = []string{"GIT_INDEX_FILE=" + idx}
	}
	args := []string{"diff", "--cached", "--raw", "-z", "--no-abbrev", "--no-renames"}
	if renames {
		args[len(args)-1] = "-M"
	}
	res, err := m.runEnv(ctx, path, env, append(args, "HEAD", "--")...)
	if err != nil {
		return 0, nil, fmt.Errorf("compare the changes in %s with HEAD: %w", path, err)
	}
	// Records: ":oldmode newmode old new status\0path\0" (and a second
	// path for renames and copies).
	f := strings.Split(string(res.Stdout), "\x00")
	deleted := 0
	var links []string
	for i := 0; i < len(f); i++ {
		meta := strings.Fields(strings.TrimPrefix(f[i], ":"))
		if len(meta) < 5 {
			continue
		}
		st := meta[4]
		paths := 1
		if st[0] == 'R' || st[0] == 'C' {
			paths = 2
		}
		if i+paths >= len(f) {
			break
		}
		name := f[i+paths]
		i += paths
		switch {
		case st == "D":
			deleted++
		case meta[1] == "160000" && meta[0] != "160000":
			links = append(links, name)
		}
	}
	return deleted, links, nil
}

// stageCheck stages everything into a copy of the worktree's index, so the
// real one is untouched, and counts the deletions with rename detection
// and the gitlinks it would add.
func (m *Manager) stageCheck(ctx context.Context, path string) (int, []string, error) {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return 0, nil, fmt.Errorf("%s is not a linked worktree (no .git file)", path)
	}
	tmp := filepath.Join(gitdir, "swarm-check-index")
	defer os.Remove(tmp)
	if b, err := os.ReadFile(filepath.Join(gitdir, "index")); err == nil {
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return 0, nil, fmt.Errorf("copy the index of %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, nil, fmt.Errorf("copy the index of %s: %w", path, err)
	}
	if _, err := m.runEnv(ctx, path, []string{"GIT_INDEX_FILE=" + tmp}, "add", "-A"); err != nil {
		return 0, nil, fmt.Errorf("check the changes in %s: %w", path, err)
	}
	return m.diffIndex(ctx, path, tmp, true)
}

// trackedCount counts the files on the worktree's branch (HEAD).
func (m *Manager) trackedCount(ctx context.Context, path string) (int, error) {
	res, err := m.runEnv(ctx, path, nil, "ls-tree", "-r", "-z", "--name-only", "HEAD")
	if err != nil {
		return 0, fmt.Errorf("count the files of %s: %w", path, err)
	}
	return strings.Count(string(res.Stdout), "\x00"), nil
}
