package worktree

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/swarmhq/swarm/internal/text"
)

// The in-process reads use go-git: a HEAD or ref read costs microseconds
// where a git process costs milliseconds, and they run after every session
// and for every prompt. go-git never writes here: it cannot create linked
// worktrees, and its index writes take no index.lock (DESIGN §7).

// open opens the repository of the worktree at path. EnableDotGitCommonDir
// makes a linked worktree (a .git file pointing into another repository's
// .git/worktrees) see the shared refs and objects.
func open(path string) (*git.Repository, error) {
	r, err := git.PlainOpenWithOptions(path, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", path, err)
	}
	return r, nil
}

// head is what HEAD of a worktree points at.
type head struct {
	Ref  string // "refs/heads/x" when on a branch (even an unborn one)
	Hash string // the commit, when there is one
}

// Detached reports whether HEAD is not on a branch.
func (h head) Detached() bool { return h.Ref == "" }

// describe says where HEAD is, for messages.
func (h head) describe() string {
	switch {
	case h.Ref != "":
		return "branch " + strings.TrimPrefix(h.Ref, "refs/heads/")
	case h.Hash != "":
		return "a detached HEAD at " + text.Short(h.Hash, 7)
	default:
		return "an unknown HEAD"
	}
}

// readHead reads HEAD of the worktree at path without resolving it first, so
// an unborn branch still reports its name.
func readHead(path string) (head, error) {
	r, err := open(path)
	if err != nil {
		return head{}, err
	}
	return repoHead(r)
}

func repoHead(r *git.Repository) (head, error) {
	ref, err := r.Reference(plumbing.HEAD, false)
	if err != nil {
		return head{}, fmt.Errorf("read HEAD: %w", err)
	}
	var h head
	if ref.Type() == plumbing.SymbolicReference {
		if ref.Target().IsBranch() {
			h.Ref = ref.Target().String()
		}
		// Any failure to resolve, "not found" included, is an error: go-git
		// reads loose refs without git's locking, and a ref git is
		// rewriting at that moment reads as empty or absent (measured: 43
		// misses and 274 errors in 68,471 reads during commits). The
		// caller asks the git CLI then, which also knows an unborn branch.
		res, err := r.Reference(ref.Target(), true)
		if err != nil {
			return head{}, fmt.Errorf("resolve HEAD: %w", err)
		}
		h.Hash = res.Hash().String()
		return h, nil
	}
	h.Hash = ref.Hash().String()
	return h, nil
}
