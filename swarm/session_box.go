package swarm

// A session's containment and processes: the sandbox it runs in, the
// markers that find its processes wherever they went, and the credentials
// kept out of its environment.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/sandbox"
)

// sandboxFor builds the box of a session when a sandbox is in force (nil
// otherwise): the operator's checkout read-only, .swarm hidden but for the
// session's door, the worktree and the agent's branch writable.
func (s *Supervisor) sandboxFor(r *runner, es *engine.Session) (*sandbox.Box, error) {
	if !s.contain.Contained() {
		return nil, nil
	}
	hidden := []string{s.opts.Layout.State, operatorRuntimeDir()}
	// A database kept outside .swarm is hidden too, unless its directory
	// holds the checkout or the worktree.
	if dir := filepath.Dir(absPath(s.opts.Layout.DB)); !within(dir, s.opts.Layout.Root) && !within(dir, r.worktree) {
		hidden = append(hidden, dir)
	}
	box, err := sandbox.New(sandbox.Spec{
		Bwrap:    s.contain.Bwrap,
		Root:     s.opts.Layout.Root,
		Worktree: r.worktree,
		Branch:   r.branch,
		Door:     es.Door,
		Hidden:   hidden,
		Home:     envValue(es.Env, "HOME"),
		Path:     envValue(es.Env, "PATH"),
		Name:     es.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox of session %d: %w", r.seq, err)
	}
	return box, nil
}

// operatorRuntimeDir is where the operator's control socket goes when
// .swarm is too deep for a socket path (control's fallback): hidden from
// sessions like .swarm.
func operatorRuntimeDir() string {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = os.TempDir()
	}
	return filepath.Join(base, "swarm-"+strconv.Itoa(os.Getuid()))
}

// within reports whether dir is path or one of its ancestors.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// rootMarker is the environment entry every process of this swarm's
// sessions carries besides sessionMarker: session ids repeat across
// repositories.
func rootMarker(root string) string { return "SWARM_ROOT=" + root }

// endProcesses kills every process left of agent's session seq: those
// carrying its marker, wherever they went (setsid, a double fork), and
// reaps the orphans among them. In a sandbox the PID namespace already
// ended them; this is the net without one.
//
// Once none is left, the index.lock a git killed half way left in the
// agent's worktree is removed: a sandbox ends its processes with SIGKILL
// (git removes its lock on SIGTERM or SIGINT, never on SIGKILL), and with
// the lock there every later commit of the agent fails.
func (s *Supervisor) endProcesses(agent string, seq int64) {
	killed, gone := proc.EndMarked(endProcessesWait, sessionMarker(agent, seq), rootMarker(s.opts.Layout.Root))
	if len(killed) > 0 {
		s.log.Info("killed processes the session left behind", "agent", agent, "session_seq", seq, "pids", killed)
	}
	if !gone {
		s.log.Warn("processes the session left behind still exist after the kill; leaving the worktree's git lock alone", "agent", agent, "session_seq", seq, "pids", killed)
		return
	}
	if removed, err := s.opts.Worktrees.RemoveStaleLock(agent); err != nil {
		s.log.Warn("remove stale git lock", "agent", agent, "session_seq", seq, "err", err)
	} else if removed {
		s.log.Info("removed the index.lock a killed git of the session left", "agent", agent, "session_seq", seq)
	}
}

// withoutCredentials is a session environment without the database's URL
// or the PostgreSQL client's variables (PGPASSWORD, PGPASSFILE,
// PGSERVICE...): a session reaches the swarm through its door, never the
// database by itself.
func withoutCredentials(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "SWARM_DB_URL" || strings.HasPrefix(k, "PG") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// endProcessesWait bounds the wait for a session's killed processes.
const endProcessesWait = 2 * time.Second
