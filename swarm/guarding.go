package swarm

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/swarmhq/swarm/proc"
)

// This file is the supervisor's record of its sessions: when each ran, to
// charge a guard finding that blames nobody to every agent whose session
// overlapped it, and the process groups of those running, for a forced
// stop to kill.

// sessionBook records the sessions of one supervisor. Its zero value is
// ready; it is safe for concurrent use.
type sessionBook struct {
	mu       sync.Mutex
	tick     uint64 // moves at every session start and end
	windows  map[string][]window
	reported map[string]bool // dedupe key + "\x00" + agent, reported once
}

// window is one session, in ticks; end is 0 while it runs.
type window struct {
	seq        int64
	start, end uint64
	groups     []int
}

// maxWindows bounds the windows kept per agent: a finding is charged from
// the windows around the session that found it.
const maxWindows = 64

// open records the start of agent's session seq and returns its tick.
func (b *sessionBook) open(agent string, seq int64) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.windows == nil {
		b.windows = map[string][]window{}
	}
	b.tick++
	ws := append(b.windows[agent], window{seq: seq, start: b.tick})
	if len(ws) > maxWindows {
		ws = slices.Clone(ws[len(ws)-maxWindows:])
	}
	b.windows[agent] = ws
	return b.tick
}

// close records the end of agent's session seq.
func (b *sessionBook) close(agent string, seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ws := b.windows[agent]
	for i := range ws {
		if ws[i].seq == seq && ws[i].end == 0 {
			b.tick++
			ws[i].end = b.tick
			ws[i].groups = nil
		}
	}
}

// mark returns a new tick: every start and end recorded so far is before
// it.
func (b *sessionBook) mark() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick++
	return b.tick
}

// lastEnd is when agent's newest ended session before seq ended; 0 when
// none ran in this supervisor.
func (b *sessionBook) lastEnd(agent string, seq int64) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var end uint64
	for _, w := range b.windows[agent] {
		if w.seq < seq && w.end > end {
			end = w.end
		}
	}
	return end
}

// overlapping lists, in order, the agents of names with a session running
// at some time between the ticks from and to: started before to, and not
// ended by from. Ticks are unique, so a session that started at from (the
// finder's own) counts and one that ended there (the finder's previous)
// does not.
func (b *sessionBook) overlapping(names []string, from, to uint64) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, a := range names {
		for _, w := range b.windows[a] {
			if w.start < to && (w.end == 0 || w.end > from) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// addGroup records a process group of agent's running session seq.
func (b *sessionBook) addGroup(agent string, seq int64, pgid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ws := b.windows[agent]
	for i := range ws {
		if ws[i].seq == seq && ws[i].end == 0 && !slices.Contains(ws[i].groups, pgid) {
			ws[i].groups = append(ws[i].groups, pgid)
		}
	}
}

// running lists the process groups of the running sessions, each with the
// marker its processes carry.
func (b *sessionBook) running() (groups []int, markers []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for agent, ws := range b.windows {
		for _, w := range ws {
			if w.end != 0 {
				continue
			}
			for _, pg := range w.groups {
				groups = append(groups, pg)
				markers = append(markers, sessionMarker(agent, w.seq))
			}
		}
	}
	return groups, markers
}

// firstReport reports whether finding key has not been reported for agent
// yet, and marks it reported.
func (b *sessionBook) firstReport(key, agent string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reported == nil {
		b.reported = map[string]bool{}
	}
	k := key + "\x00" + agent
	if b.reported[k] {
		return false
	}
	b.reported[k] = true
	return true
}

// KillSessions kills the process group of every session running now
// (SIGKILL, each group only while one of its processes still carries the
// session's marker). A forced stop calls it before exiting, so no agent
// process outlives the supervisor; it is safe to call from any goroutine.
// It returns how many groups it signalled.
func (s *Supervisor) KillSessions() int {
	groups, markers := s.book.running()
	n := 0
	for i, pg := range groups {
		sent, err := proc.KillSessionGroup(pg, markers[i])
		if err != nil {
			s.log.Warn("kill process group", "pgid", pg, "err", err)
		}
		if sent {
			n++
		}
	}
	// And what left the groups (setsid, a double fork).
	for _, m := range slices.Compact(slices.Sorted(slices.Values(markers))) {
		proc.KillMarked(m, rootMarker(s.opts.Layout.Root))
	}
	return n
}

// charged lists the agents a finding is reported to: the configured agents
// it blames; when it blames none of them, every agent whose session ran at
// some time between the ticks from and to; when none did, the agent whose
// guard found it.
func (s *Supervisor) charged(f Finding, finder string, from, to uint64) []string {
	names := s.cfg.AgentNames()
	var out []string
	for _, a := range f.Blame() {
		if slices.Contains(names, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		out = s.book.overlapping(names, from, to)
	}
	if len(out) == 0 {
		out = []string{finder}
	}
	return out
}

// chargeFindings reports each finding, once per event and agent, to the
// agents it is charged to, and says whether any is charged to agent. seq
// is the session of the agent whose guard found them (0 when none ran).
func (r *runner) chargeFindings(ctx context.Context, found []Finding, seq int64, from, to uint64) bool {
	mine := false
	for _, f := range found {
		for _, a := range r.sup.charged(f, r.agent.Name, from, to) {
			if a == r.agent.Name {
				mine = true
			}
			if r.sup.book.firstReport(f.Dedupe(), a) {
				r.sup.log.Warn("base-branch guard finding", "agent", a, "found_by", r.agent.Name, "kind", f.Escalation(), "dedupe", f.Dedupe(), "finding", f.String())
				var at int64
				if a == r.agent.Name {
					at = seq
				}
				r.sup.reportFinding(ctx, a, at, f)
			}
		}
	}
	return mine
}

// checkGuard checks the session's guard once it ended, in any way, and
// reports what it found. It returns an error when the session must fail:
// a finding made during it that is charged to the agent, or a failure to
// look. Findings carried over from before the session (Prior) were
// reported when it started and do not fail it.
func (r *runner) checkGuard(ctx context.Context, s *session) error {
	found, err := s.guard.Check(bg(ctx))
	var fresh []Finding
	for _, f := range found {
		if !s.prior[f.Dedupe()] {
			fresh = append(fresh, f)
		}
	}
	mine := r.chargeFindings(ctx, fresh, s.seq, s.tick, r.sup.book.mark())
	switch {
	case mine:
		var texts []string
		for _, f := range fresh {
			texts = append(texts, f.String())
		}
		return fmt.Errorf("%s", joinSemi(texts))
	case err != nil:
		r.sup.log.Warn("base-branch guard could not check the session", "agent", r.agent.Name, "session_seq", s.seq, "err", err)
		return fmt.Errorf("could not check the session: %w", err)
	}
	return nil
}

func joinSemi(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}
