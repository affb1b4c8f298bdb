package promptpipe

import (
	"fmt"
	"strings"
)

// Integration is what the supervisor did to the agent's branch before the
// session and what its trial merges found (DESIGN §14): the Environment
// section names it, so the agent knows what changed under it and whom to
// talk to before a landing conflicts.
type Integration struct {
	Base string // the base branch
	// Merged is set when swarm merged the base into the agent's branch
	// before this session.
	Merged *BaseMerge
	// Behind is set when the branch is behind the base and swarm did not
	// merge it, with why.
	Behind *BaseBehind
	// BaseConflicts are the files a merge of the branch and the base
	// conflicts in (the last trial merge).
	BaseConflicts []string
	// Overlaps are the teammates whose branches changed files the agent's
	// branch changed.
	Overlaps []Overlap
}

// BaseMerge is a merge of the base into the agent's branch.
type BaseMerge struct {
	Commit      string // the base's commit merged, short
	Commits     int    // how many commits it brought (merges left out)
	Authors     []string
	FastForward bool // the branch had no commit of its own
}

// BaseBehind is a branch left behind the base.
type BaseBehind struct {
	Commit    string // the base's commit, short
	Commits   int
	Conflicts []string // merging conflicts in these files
	Dirty     bool     // the worktree had uncommitted changes
	Reason    string   // any other reason, one sentence
}

// Overlap is one teammate's branch changing files the agent's changed.
type Overlap struct {
	Teammate  string
	Files     []string // both changed
	Conflicts []string // of them, those a merge of the two branches conflicts in
}

// maxOverlapFiles bounds the files one line names.
const maxOverlapFiles = 10

// integration renders the Environment lines of in; "" when nil or empty.
func integration(in *Integration) string {
	if in == nil {
		return ""
	}
	var b strings.Builder
	base := oneLine(in.Base)
	if m := in.Merged; m != nil {
		how := "; `git log -1` shows the merge"
		if m.FastForward {
			how = " (a fast-forward: your branch had no commits of its own)"
		}
		fmt.Fprintf(&b, "Branch: swarm merged %s (%s) into your branch before this session%s.\n", base, commitsFrom(m.Commit, m.Commits, m.Authors), how)
	}
	if h := in.Behind; h != nil {
		what := commitsFrom(h.Commit, h.Commits, nil)
		switch {
		case len(h.Conflicts) > 0:
			fmt.Fprintf(&b, "Branch: %s is ahead of your branch (%s) and merging it conflicts in %s; swarm did not merge it. Resolve it: `git merge %s`, fix the files, commit.\n", base, what, files(h.Conflicts), base)
		case h.Dirty:
			fmt.Fprintf(&b, "Branch: %s is ahead of your branch (%s); swarm did not merge it because your worktree has uncommitted changes. Commit them: the next session starts up to date.\n", base, what)
		case h.Reason != "" && what == "":
			fmt.Fprintf(&b, "Branch: swarm could not bring your branch up to date with %s: %s.\n", base, oneLine(h.Reason))
		case h.Reason != "":
			fmt.Fprintf(&b, "Branch: %s is ahead of your branch (%s); swarm did not merge it: %s.\n", base, what, oneLine(h.Reason))
		}
	}
	if len(in.BaseConflicts) > 0 && (in.Behind == nil || len(in.Behind.Conflicts) == 0) {
		fmt.Fprintf(&b, "Conflict with %s: merging your branch into %s would conflict in %s (a trial merge; nothing was changed).\n", base, base, files(in.BaseConflicts))
	}
	for _, o := range in.Overlaps {
		fmt.Fprintf(&b, "Overlap: you and %s both changed %s", oneLine(o.Teammate), files(o.Files))
		if len(o.Conflicts) > 0 {
			fmt.Fprintf(&b, "; your branches conflict in %s", files(o.Conflicts))
		}
		fmt.Fprintf(&b, ". Agree with %s on who changes what before you go on.\n", oneLine(o.Teammate))
	}
	return b.String()
}

// commitsFrom says "abc1234: 3 commits from bob, carol".
func commitsFrom(commit string, n int, authors []string) string {
	s := oneLine(commit)
	if n > 0 {
		unit := "commits"
		if n == 1 {
			unit = "commit"
		}
		s += fmt.Sprintf(": %d %s", n, unit)
		if len(authors) > 0 {
			names := make([]string, len(authors))
			for i, a := range authors {
				names[i] = oneLine(a)
			}
			s += " from " + strings.Join(names, ", ")
		}
	}
	return s
}

// files names up to maxOverlapFiles files.
func files(fs []string) string {
	names := make([]string, 0, min(len(fs), maxOverlapFiles))
	for i, f := range fs {
		if i == maxOverlapFiles {
			return strings.Join(names, ", ") + fmt.Sprintf(" and %d more", len(fs)-i)
		}
		names = append(names, oneLine(f))
	}
	return strings.Join(names, ", ")
}
