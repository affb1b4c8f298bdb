package worktree

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/swarmhq/swarm/internal/text"
)

// Recovery is one thing a run did, or found, about an operation that an
// interrupted run (Ctrl-C, kill -9, a crash) left half done: a checkout
// redone, a merge rolled back or found finished, files an interrupted
// removal deleted put back, a stale index.lock removed.
type Recovery struct {
	// Agent is the agent concerned; "" for the main checkout alone.
	Agent string
	// Text is one sentence for the operator, naming the agent and what was
	// done; print it as it is.
	Text string
}

// String is the line to print.
func (r Recovery) String() string { return r.Text }

// RecoveredLogMessage is the message of the log record each Recovery line
// is also logged with, for the callers that do not print them; a caller
// that prints them may leave those records out.
const RecoveredLogMessage = "recovered from an interrupted run"

// recoveries collects what a recovery did; every line is logged too, for
// the callers that do not print them.
type recoveries []Recovery

func (rs *recoveries) add(agent, format string, args ...any) {
	r := Recovery{Agent: agent, Text: fmt.Sprintf(format, args...)}
	slog.Warn(RecoveredLogMessage, "agent", agent, "what", r.Text)
	*rs = append(*rs, r)
}

// alreadyMerged reports, once, that an interrupted run had merged j's
// branch: the worktree is not saved nor merged again.
func (rs *recoveries) alreadyMerged(j journal) {
	what := "merged"
	if j.Op == opSquash {
		what = "squashed"
	}
	as := ""
	if j.Commit != "" {
		as = " as " + text.Short(j.Commit, 7)
	}
	text := fmt.Sprintf("%s: an interrupted run had already %s %s into %s%s; it is not saved nor merged again", j.Agent, what, j.Branch, j.Base, as)
	for _, r := range *rs {
		if r.Text == text {
			return
		}
	}
	rs.add(j.Agent, "%s", text)
}

// Recover finishes or rolls back what interrupted runs left half done, for
// every agent with a journal entry and for the agents named:
//   - a first checkout that never finished is redone completely;
//   - a merge or squash half applied in the main checkout is rolled back to
//     the base tip recorded before it started (only when every change
//     there is the merge's), or, when it had committed, recorded as done,
//     so the agent's worktree is not auto-committed and merged again;
//   - a merge whose commit landed before git cleared MERGE_HEAD gets its
//     MERGE_HEAD cleared (committing "again" would merge twice);
//   - a landing (land.go) that had not moved the base branch is dropped;
//     one that had gets the operator's checkout brought forward;
//   - an agent's branch being brought up to date (current.go) is finished
//     when its worktree holds only the merge's changes;
//   - files that an interrupted `git worktree remove` deleted are put back
//     from the index, so they do not look like the agent's deletions;
//   - stale index.lock files, of those worktrees and of the main checkout,
//     are removed when no running git holds them.
//
// It returns what it did, one line each, for the caller to print, and the
// problems it could not solve joined in one error (each says what to do);
// it carries on with the other agents after a problem. Call it when no
// other swarm process works on the repository: at the start of `swarm up`,
// and in `swarm down` once the supervisor has stopped. Ensure, Keep, Merge,
// Squash, Discard, Remove and AutoCommit recover their own agent (and the
// main checkout) first anyway, and report it in their results.
func (m *Manager) Recover(ctx context.Context, agents ...string) ([]Recovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rec recoveries
	var errs []error
	if err := m.clearBaseLock(ctx, &rec); err != nil {
		errs = append(errs, err)
	}
	if err := m.recoverBase(ctx, &rec); err != nil {
		errs = append(errs, err)
	}
	if _, err := m.recoverLandings(ctx, &rec, ""); err != nil {
		errs = append(errs, err)
	}
	if err := m.recoverCurrents(ctx, &rec); err != nil {
		errs = append(errs, err)
	}
	names, err := m.journaledAgents()
	if err != nil {
		errs = append(errs, err)
	}
	for _, a := range agents {
		if err := checkAgent(a); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, a)
	}
	sort.Strings(names)
	// One worktree list for every agent, read again only after a recovery
	// changed something.
	var entries []entry
	for i, agent := range names {
		if i > 0 && names[i-1] == agent {
			continue
		}
		// A worktree in place is read from its own files (own.go): with
		// the list, each agent's look was linear in the agents.
		info, ok := m.ownInfo(ctx, agent)
		var err error
		if !ok && entries == nil {
			entries, err = m.list(ctx)
		}
		if !ok && err == nil {
			info, err = m.inspectIn(ctx, agent, entries)
		}
		if err == nil {
			before := len(rec)
			var r recovered
			r, err = m.recoverAgent(ctx, &info, recoverAll, &rec)
			// Whatever recovery did (it says so in rec, or the journal had
			// an operation in progress) may have changed the list.
			if len(rec) != before || (r.have && inProgress(r.j.State)) {
				entries = nil
			}
		}
		if err != nil {
			entries = nil
			errs = append(errs, fmt.Errorf("recover %s: %w", agent, err))
		}
	}
	return rec, errors.Join(errs...)
}

// recoverMode says what the caller leaves for itself.
type recoverMode int

const (
	recoverAll        recoverMode = iota // finish everything, the checkout included
	recoverForEnsure                     // leave an unfinished checkout to Ensure (it checks out outside the lock)
	recoverForDiscard                    // leave a half-removed worktree to Discard, and redo no checkout
)

// recovered is the agent's state after recoverAgent.
type recovered struct {
	j    journal // the agent's entry; meaningful when have
	have bool
	// checkout is what is left to check out, in recoverForEnsure and
	// recoverForDiscard modes.
	checkout checkout
}

// merged reports whether the interrupted run had put the branch's work on
// the base branch.
func (r recovered) merged() bool { return r.have && r.j.Merged }

// recoverAgent finishes or rolls back what an interrupted run left half
// done in agent's worktree, under m.mu. info is updated when the worktree
// changed.
func (m *Manager) recoverAgent(ctx context.Context, info *Info, mode recoverMode, rec *recoveries) (recovered, error) {
	agent := info.Agent
	var r recovered
	var err error
	if r.j, r.have, err = m.readJournal(agent); err != nil {
		return r, err
	}
	if r.have && inProgress(r.j.State) && ownerRunning(r.j) {
		return r, fmt.Errorf("%w: process %d is %s %s's worktree right now (journal %s); wait for it to finish, or stop it, then run again",
			ErrBusy, r.j.PID, r.j.State, agent, m.journalPath(agent))
	}
	if info.Valid() {
		// A lock in use is left alone: it may be the operator's git, and a
		// step that needs the lock fails with an error naming its holder.
		if lock, removed, err := removeAgentLock(info.Path, false); err != nil {
			slog.Info("left an index.lock in place", "agent", agent, "err", err)
		} else if removed {
			rec.add(agent, "%s: removed the stale %s that a killed git left in its worktree", agent, lock)
		}
	}
	if r.have && r.j.State == stateMerging {
		if err := m.recoverBase(ctx, rec); err != nil {
			return r, err
		}
		if r.j, r.have, err = m.readJournal(agent); err != nil {
			return r, err
		}
	}
	changed := false
	if r.have {
		switch r.j.State {
		case statePopulating:
			switch {
			case !info.Registered:
				// `worktree add` never ran, or the worktree was pruned since:
				// Ensure creates it again, from the start.
				if err := m.clearJournal(agent); err != nil {
					return r, err
				}
				r.have = false
			case info.Valid() && populated(info.Path):
				// Checked out; only the journal entry saying so was lost.
				if r.j, err = m.setState(ctx, r.j, statePopulated); err != nil {
					return r, err
				}
			case info.Head != info.Branch:
				// `worktree add` itself was cut short: git left it locked
				// ("initializing") with no HEAD. Nothing was checked out
				// there, let alone worked on: remove it, and Ensure makes
				// it again.
				if _, err := m.run(ctx, m.root, "worktree", "remove", "--force", "--force", info.Path); err != nil {
					return r, fmt.Errorf("remove the half-made worktree of %s: %w; run 'git worktree remove --force --force %q' yourself", agent, err, info.Path)
				}
				if err := m.clearJournal(agent); err != nil {
					return r, err
				}
				r.have, changed = false, true
				rec.add(agent, "%s: removed its worktree %s, whose creation an interrupted run had cut short (nothing had been checked out there)", agent, info.Path)
			}
		case stateRemoving:
			if mode != recoverForDiscard {
				if r.j, err = m.restoreRemoving(ctx, *info, r.j, rec); err != nil {
					return r, err
				}
				changed = true
			}
		}
	}
	if changed {
		if *info, err = m.inspect(ctx, agent); err != nil {
			return r, err
		}
	}
	if !info.Valid() || populated(info.Path) {
		return r, nil
	}
	r.checkout = partial
	if (r.have && r.j.State == statePopulating) || !hasIndex(info.Path) {
		// The first checkout was cut short: no agent has worked here (Ensure
		// had not returned), so redoing it completely loses nothing, and
		// it is the only way to mend files it left truncated.
		r.checkout = redo
	}
	if mode != recoverAll {
		return r, nil
	}
	if err := m.populate(ctx, info.Path, r.checkout); err != nil {
		return r, fmt.Errorf("finish the checkout of %s: %w", agent, err)
	}
	if r.checkout == redo {
		rec.add(agent, "%s: redid the checkout of its worktree %s, which an interrupted run had left incomplete", agent, info.Path)
	}
	r.checkout = checkedOut
	if r.have {
		r.j, err = m.setState(ctx, r.j, statePopulated)
	}
	return r, err
}

// inProgress reports whether state is the middle of an operation rather
// than a resting state.
func inProgress(state string) bool {
	return state == statePopulating || state == stateMerging || state == stateRemoving
}

// hasIndex reports whether the linked worktree at path has an index: a
// checkout writes it last, so one cut short leaves none.
func hasIndex(path string) bool {
	gitdir, ok := linkedGitDir(path)
	if !ok {
		return true
	}
	_, err := os.Stat(filepath.Join(gitdir, "index"))
	return err == nil
}

// restoreRemoving deals with a worktree that an interrupted run was
// removing. `git worktree remove` only deletes, so a worktree whose only
// changes are deleted tracked files gets them back from its index (it was
// clean when the removal started: Remove and Merge check that). A worktree
// whose .git is gone already is pruned and its remains moved aside.
// Anything else is left as it is, with an error saying what to look at.
func (m *Manager) restoreRemoving(ctx context.Context, info Info, j journal, rec *recoveries) (journal, error) {
	agent := info.Agent
	back := statePopulated
	if j.Merged {
		back = stateMerged
	}
	switch {
	case info.Valid():
		chs, err := m.status(ctx, info.Path, "normal", false)
		if err != nil {
			return j, err
		}
		var deleted []string
		var other []string
		for _, c := range chs {
			switch {
			case c.x == ' ' && c.y == 'D':
				deleted = append(deleted, c.path)
			case c.x == ' ' && c.y == 'M' && j.Restoring:
				// A file swarm's own restore was writing when it was
				// cut short: the worktree was clean when the removal
				// began (git refuses to remove it otherwise), so the
				// index holds its content.
				deleted = append(deleted, c.path)
			default:
				other = append(other, c.String())
			}
		}
		if len(deleted) > 0 && len(other) > 0 {
			return j, fmt.Errorf("%w: an interrupted run was removing %s's worktree %s, which now lacks %s and also holds changes that removing does not make (%s); swarm left it as it is. Look with 'git -C %q status': commit what you want to keep, put the rest back (git -C %q restore .), then run again",
				ErrInterrupted, agent, info.Path, text.Plural(len(deleted), "file", "files"), text.ListSome(other, 10), info.Path, info.Path)
		}
		if len(deleted) > 0 {
			if !j.Restoring {
				j.Restoring = true
				if err := m.writeJournal(ctx, j); err != nil {
					return j, err
				}
			}
			if _, err := m.runStdin(ctx, info.Path, strings.Join(deleted, "\x00")+"\x00", "checkout-index", "-f", "-z", "--stdin"); err != nil {
				return j, fmt.Errorf("put back the files of %s: %w", agent, err)
			}
			rec.add(agent, "%s: put back %s that an interrupted removal had deleted from its worktree %s (they were committed; swarm does not save them as deletions)", agent, text.Plural(len(deleted), "file", "files"), info.Path)
		}
		return m.setState(ctx, j, back)
	case info.Registered:
		// The removal got as far as the .git file: git cannot work there
		// any more. Forget the worktree and keep what is left of it.
		if err := m.unlock(ctx, info); err != nil {
			return j, err
		}
		if _, err := m.run(ctx, m.root, "worktree", "prune"); err != nil {
			return j, fmt.Errorf("prune the worktree of %s: %w", agent, err)
		}
		fallthrough
	default:
		if info.Exists {
			dst, err := m.moveAside(ctx, agent, info.Path)
			if err != nil {
				return j, err
			}
			if dst != "" {
				rec.add(agent, "%s: moved what an interrupted removal left of its worktree to %s (its branch %s holds the committed work)", agent, dst, info.Branch)
			}
		}
		return m.setState(ctx, j, stateRemoved)
	}
}
