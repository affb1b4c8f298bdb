package swarm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/sandbox"
	"github.com/swarmhq/swarm/worktree"
)

// recover moves every agent found in a non-terminal state back to
// Initializing, records its running sessions as crashed, requeues its
// delivered mail and kills the process groups the crash left behind, and
// every process carrying a crashed session's marker.
func (s *Supervisor) recover(ctx context.Context) error {
	for _, r := range s.allRunners() {
		if err := s.recoverAgent(ctx, r); err != nil {
			return fmt.Errorf("recover %s: %w", r.agent.Name, err)
		}
	}
	return nil
}

func (s *Supervisor) recoverAgent(ctx context.Context, r *runner) error {
	name := r.agent.Name
	if err := s.store.RegisterAgent(ctx, r.info()); err != nil {
		return err
	}
	a, err := s.store.Agent(ctx, name)
	if err != nil {
		return err
	}
	r.state, r.seq = a.State, a.SessionSeq
	// Session numbers only grow: never below a session already stored.
	switch last, err := s.store.LastSession(ctx, name, ""); {
	case err == nil && last.Seq > r.seq:
		r.seq = last.Seq
	case err != nil && !errors.Is(err, mailbox.ErrNoSuchSession):
		return err
	}
	// Level-based: whatever the agent's state, no session of it runs now,
	// so sessions left running are crashed and delivered mail is queued
	// again. Only a non-terminal state is also moved.
	var rec mailbox.Recovered
	err = r.inTx(ctx, func(tx mailbox.Tx) error {
		var err error
		if rec, err = tx.RecoverAgent(name); err != nil {
			return err
		}
		if r.state.Terminal() {
			return nil
		}
		if err := tx.ResetErrors(name); err != nil {
			return err
		}
		return r.moveTx(tx, lifecycle.Recover, lifecycle.Initializing, "recovered")
	})
	if err != nil {
		return err
	}
	var killed []int
	for _, sess := range rec.Sessions {
		for _, pg := range sess.Pgids {
			sent, err := proc.KillSessionGroup(pg, sessionMarker(name, sess.Seq))
			if err != nil {
				s.log.Warn("kill leftover process group", "agent", name, "session_seq", sess.Seq, "pgid", pg, "err", err)
			}
			if sent {
				killed = append(killed, pg)
			}
		}
	}
	for _, sess := range rec.Sessions {
		// What left the groups (setsid, a double fork) still carries the
		// session's marker; a sandbox's host directory stays behind too.
		if pids, gone := proc.EndMarked(endProcessesWait, sessionMarker(name, sess.Seq), rootMarker(s.opts.Layout.Root)); len(pids) > 0 {
			s.log.Info("killed processes a crashed session left behind", "agent", name, "session_seq", sess.Seq, "pids", pids, "gone", gone)
		}
		if _, err := sandbox.RemoveLeftover("", SessionID(name, sess.Seq)); err != nil {
			s.log.Warn("remove a crashed session's sandbox directory", "agent", name, "session_seq", sess.Seq, "err", err)
		}
	}
	if len(rec.Sessions) > 0 {
		// The killed sessions may have been inside a git commit: once
		// their processes are gone, a lock they left goes too.
		if proc.AwaitGroupsGone(killed, 10*time.Millisecond, 2*time.Second, time.Sleep) {
			if removed, err := s.opts.Worktrees.RemoveStaleLock(name); err != nil {
				s.log.Warn("remove stale git lock", "agent", name, "err", err)
			} else if removed {
				s.log.Info("removed a stale index.lock left by a crashed session", "agent", name)
			}
		} else {
			s.log.Warn("killed session processes still exist after 2s; leaving the worktree's git lock alone", "agent", name, "pgids", killed)
		}
	}
	if len(rec.Sessions) > 0 || rec.Requeued > 0 {
		s.bus.emit(lifecycle.Notice{Agent: name, Kind: lifecycle.NoticeInfo,
			Text: fmt.Sprintf("recovered after a crash: %d session(s) marked crashed, %d message(s) queued again", len(rec.Sessions), rec.Requeued)})
	}
	return nil
}

// RecoverWorktrees is the worktree half of recovery, for `swarm up` to run
// while it holds the lock and before any runner starts: it finishes or
// rolls back what an interrupted run (a killed `swarm down`, a crash during
// a first checkout) left half done in the agents' worktrees and the main
// checkout (worktree.Manager.Recover), and removes the temporary files the
// file tools of a crashed session left in its worktree (only names
// engine.IsTempName knows). It returns one line per thing done, to print
// (each is logged too), and the problems it could not solve, each saying
// what to do.
func RecoverWorktrees(ctx context.Context, m *worktree.Manager, st mailbox.Store, agents []string) ([]string, error) {
	rec, err := m.Recover(ctx, agents...)
	lines := make([]string, 0, len(rec))
	for _, r := range rec {
		lines = append(lines, r.String())
	}
	errs := []error{err}
	for _, agent := range agents {
		// Only a session that never ended (running, or marked crashed by a
		// recovery that then stopped) can have been killed mid-write.
		last, lerr := st.LastSession(ctx, agent, "")
		if errors.Is(lerr, mailbox.ErrNoSuchSession) {
			continue
		}
		if lerr != nil {
			errs = append(errs, lerr)
			continue
		}
		if last.State != mailbox.SessionRunning && last.State != mailbox.SessionCrashed {
			continue
		}
		removed, rerr := removeTempFiles(m.Path(agent))
		if rerr != nil {
			errs = append(errs, fmt.Errorf("%s: remove the file tools' leftover temporary files: %w", agent, rerr))
		}
		if len(removed) > 0 {
			line := fmt.Sprintf("%s: removed %d temporary file(s) that a write cut short by the crash of session %d left in its worktree (%s)", agent, len(removed), last.Seq, text.ListSome(removed, 5))
			slog.Warn(worktree.RecoveredLogMessage, "agent", agent, "what", line)
			lines = append(lines, line)
		}
	}
	return lines, errors.Join(errs...)
}

// removeTempFiles removes the file tools' temporary files under dir,
// skipping .git, and returns their paths relative to dir.
func removeTempFiles(dir string) ([]string, error) {
	var removed []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || !engine.IsTempName(d.Name()) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		removed = append(removed, rel)
		return nil
	})
	return removed, err
}
