package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/swarmhq/swarm/proc"
)

// The journal records, per agent, the state change a worktree operation is
// about to make, before it starts: a re-run that finds a state other than
// populated knows what an interrupted run (Ctrl-C, kill -9, a crash) left
// half done, and finishes or rolls it back (recover.go).
//
// It is one small JSON file per agent, <Journal>/<agent>.json (default
// .swarm/journal/<agent>.json), replaced atomically: written to a temp
// file, fsynced, renamed over the old one, and the directory fsynced. Not
// the Meta store, because:
//   - Meta is the SQLite database, and `swarm up` makes its first Manager
//     before the database is open (Meta nil), so a journal there would be
//     missing exactly when worktrees are created;
//   - each entry must be durable before the git step it announces starts,
//     and a file rename needs no transaction that a busy database could
//     refuse (DESIGN §11), nor a schema migration;
//   - an operator can read and, as a last resort, delete one file.
//
// An entry stays, at rest in state populated, while the worktree exists;
// it is deleted once the worktree is gone and nothing is left to finish.

// Journal states, in the order an agent's worktree goes through them.
const (
	statePopulating = "populating" // `worktree add --no-checkout` and the checkout are under way
	statePopulated  = "populated"  // checked out completely: agents may work in it
	stateMerging    = "merging"    // merging or squashing its branch into the base, in the main checkout
	stateMerged     = "merged"     // the merge or squash commit is on the base branch
	stateRemoving   = "removing"   // `git worktree remove` is under way
	stateRemoved    = "removed"    // the worktree is gone; the branch may be left to delete
)

// Operations that write journal entries.
const (
	opEnsure  = "ensure"
	opMerge   = "merge"
	opSquash  = "squash"
	opRemove  = "remove"
	opDiscard = "discard"
)

// journalVersion is the format of the journal files; a newer one is refused
// rather than misread.
const journalVersion = 1

// journal is one agent's entry.
type journal struct {
	Version int    `json:"version"`
	Agent   string `json:"agent"`
	State   string `json:"state"`
	Op      string `json:"op"`
	Branch  string `json:"branch"`
	Path    string `json:"path"`
	// Base is the base branch and BaseTip its commit when the merge
	// started; Tip is the agent branch's commit being merged (or checked
	// out, while populating).
	Base    string `json:"base,omitempty"`
	BaseTip string `json:"base_tip,omitempty"`
	Tip     string `json:"tip,omitempty"`
	// Merged is set once the branch's work is on the base branch, by this
	// operation: from then on the worktree is never auto-committed again,
	// since anything "uncommitted" there is damage, not work.
	Merged bool `json:"merged,omitempty"`
	// Commit is the merge or squash commit; Commits what it merged.
	Commit  string   `json:"commit,omitempty"`
	Commits []string `json:"commits,omitempty"`
	// Restoring is set while a recovery puts back the files an interrupted
	// removal deleted: git writes them in place, so a restore cut short
	// can leave one half written, which the next recovery then rewrites
	// rather than taking for the operator's change.
	Restoring bool `json:"restoring,omitempty"`
	// PID and PIDStart name the process that wrote the entry, so a re-run
	// can tell an interrupted operation from one still running.
	PID      int       `json:"pid"`
	PIDStart uint64    `json:"pid_start,omitempty"`
	Time     time.Time `json:"time"`
}

// journalPath is where agent's entry lives.
func (m *Manager) journalPath(agent string) string {
	return filepath.Join(m.journal, agent+".json")
}

// readJournal returns agent's entry; ok is false when there is none.
func (m *Manager) readJournal(agent string) (journal, bool, error) {
	return readEntry(m.journalPath(agent), "the journal of "+agent, m.Path(agent),
		func(j journal) (int, bool) { return j.Version, j.Agent == agent && j.State != "" })
}

// readEntry reads the journal entry at path (an agent's, a landing's, a
// catch-up's: each kind its own struct); ok is false when there is none.
// check gives the entry's format and whether it is whole. what names the
// entry in errors, and checkout is where to look at 'git status' when it
// is unreadable.
func readEntry[T any](path, what, checkout string, check func(T) (int, bool)) (T, bool, error) {
	var j T
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("read %s: %w", what, err)
	}
	err = json.Unmarshal(b, &j)
	version, whole := check(j)
	if err != nil || !whole {
		var zero T
		return zero, false, fmt.Errorf("%w: %s (%s) is unreadable (%v); look at it and at 'git -C %q status', then delete it", ErrInterrupted, what, path, err, checkout)
	}
	if version > journalVersion {
		var zero T
		return zero, false, fmt.Errorf("%w: %s (%s) was written by a newer swarm (format %d); use that version to finish what it started", ErrInterrupted, what, path, version)
	}
	return j, true, nil
}

// stamp is what every journal entry records of its writing: the format,
// and the process (pid and its start, so a re-run can tell an interrupted
// operation from one still running) at what time.
func (m *Manager) stamp() (version, pid int, start uint64, at time.Time) {
	pid = os.Getpid()
	start, _ = proc.StartTime(pid)
	return journalVersion, pid, start, m.now().UTC()
}

// writeEntry records the entry v durably at path, in dir (under the
// journal directory, created on the first write), so a crash right after
// leaves either the old entry or the new one, complete.
func (m *Manager) writeEntry(ctx context.Context, dir, path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = m.journalDir(ctx)
	}
	if err == nil && dir != m.journal {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = writeAtomic(path, append(b, '\n'))
	}
	return err
}

// writeJournal records j durably, so a crash right after leaves either the
// old entry or the new one, complete. The caller holds m.mu (the first
// write creates the directory and records it in m.excluded).
func (m *Manager) writeJournal(ctx context.Context, j journal) error {
	j.Version, j.PID, j.PIDStart, j.Time = m.stamp()
	j.Branch = Branch(j.Agent)
	j.Path = m.Path(j.Agent)
	if err := m.writeEntry(ctx, m.journal, m.journalPath(j.Agent), j); err != nil {
		return fmt.Errorf("journal %s: %w", j.Agent, err)
	}
	return nil
}

// setState rewrites j with a new state and returns it.
func (m *Manager) setState(ctx context.Context, j journal, state string) (journal, error) {
	j.State = state
	j.Restoring = false
	return j, m.writeJournal(ctx, j)
}

// clearJournal deletes agent's entry: nothing is left to recover.
func (m *Manager) clearJournal(agent string) error {
	err := os.Remove(m.journalPath(agent))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear the journal of %s: %w", agent, err)
	}
	if err == nil {
		return syncDir(m.journal)
	}
	return nil
}

// journalDir creates the journal directory, ignored by git like the rest
// of .swarm, once per Manager.
func (m *Manager) journalDir(ctx context.Context) error {
	if err := os.MkdirAll(m.journal, 0o755); err != nil {
		return err
	}
	return m.exclude(ctx, m.journal)
}

// journaledAgents lists the agents that have an entry, sorted.
func (m *Manager) journaledAgents() ([]string, error) {
	agents, err := journalNames(m.journal, checkAgent)
	if err != nil {
		return nil, fmt.Errorf("read the journal: %w", err)
	}
	return agents, nil
}

// journalNames lists the names of dir's regular <name>.json files that
// valid accepts, sorted; none when dir does not exist.
func journalNames(dir string, valid func(string) error) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && e.Type().IsRegular() && valid(name) == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// writeAtomic replaces path with data: temp file, fsync, rename, fsync of
// the directory.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ownerRunning reports whether the process that wrote j is still running,
// so its operation is in progress rather than interrupted (a zombie is
// not: it has ended). It needs /proc
// (Linux): the start time tells the writer from a process that reused its
// pid. Elsewhere, and for this very process, it reports false: a Manager
// serializes its own writes, and the callers run recovery only when no
// other swarm process works on the repository.
func ownerRunning(j journal) bool {
	if j.PID <= 0 || j.PID == os.Getpid() {
		return false
	}
	return proc.Running(j.PID, j.PIDStart)
}
