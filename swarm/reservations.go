package swarm

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
)

// This file is file reservations (DESIGN §14): advisory leases an agent
// takes on the files a glob matches, so teammates see them in their
// prompts; an exclusive one also makes the guard raise a reservation
// escalation when another agent's session commits to one of its files.
// The verbs take the caller (§13.1); the supervisor expires them and
// releases a retired agent's.

// GlobHelp says what a reservation glob is, for --help and errors.
const GlobHelp = "a path from the repository root with / separators, matched segment by segment as Go's path.Match does " +
	"(* and ? stay inside one segment, [a-z] classes), plus ** as a whole segment for any number of segments " +
	"(api/** is everything under api/); a trailing / means the same as /**"

// MaxReservationReason bounds a reservation's reason, in bytes: it is
// shown in every teammate's prompt.
const MaxReservationReason = 200

// NormalizeGlob checks a reservation glob and returns it in its stored
// form (a trailing / becomes /**, a leading ./ goes). Absolute paths, ..
// and . segments, empty segments and malformed patterns are refused.
func NormalizeGlob(g string) (string, error) {
	orig := g
	g = strings.TrimSpace(g)
	for strings.HasPrefix(g, "./") {
		g = strings.TrimPrefix(g, "./")
	}
	if strings.HasSuffix(g, "/") && g != "/" {
		g = strings.TrimRight(g, "/") + "/**"
	}
	bad := func(why string) error {
		return fmt.Errorf("reservation glob %q: %s; a glob is %s", orig, why, GlobHelp)
	}
	switch {
	case g == "":
		return "", bad("it is empty")
	case strings.HasPrefix(g, "/"):
		return "", bad("it is absolute: give a path from the repository root")
	case strings.Contains(g, "\\"):
		return "", bad(`it has a \ (separate segments with /; no escapes)`)
	case !utf8.ValidString(g) || strings.ContainsFunc(g, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", bad("it has control characters")
	case len(g) > 512:
		return "", bad("it is longer than 512 bytes")
	}
	for seg := range strings.SplitSeq(g, "/") {
		switch {
		case seg == "":
			return "", bad("it has an empty segment (//)")
		case seg == "." || seg == "..":
			return "", bad("it has a " + seg + " segment: reservations stay inside the repository")
		case seg == "**":
		case strings.Contains(seg, "**"):
			return "", bad("** must be a whole segment, as in api/**/*.go")
		default:
			if _, err := path.Match(seg, ""); err != nil {
				return "", bad("a malformed segment " + seg)
			}
		}
	}
	return g, nil
}

// GlobMatch reports whether the file (a path from the repository root)
// is one the normalized glob matches.
func GlobMatch(glob, file string) bool {
	return matchSegs(strings.Split(glob, "/"), strings.Split(file, "/"))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// ** takes zero or more whole segments.
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// GlobsOverlap reports whether some path could match both normalized
// globs: the test for two reservations covering a common file, whether
// or not such a file exists yet.
func GlobsOverlap(a, b string) bool {
	return segsOverlap(strings.Split(a, "/"), strings.Split(b, "/"), map[[2]int]bool{})
}

func segsOverlap(a, b []string, seen map[[2]int]bool) bool {
	key := [2]int{len(a), len(b)}
	if v, ok := seen[key]; ok {
		return v
	}
	seen[key] = false // a cycle proves nothing
	var ok bool
	switch {
	case len(a) == 0 && len(b) == 0:
		ok = true
	case len(a) > 0 && a[0] == "**":
		ok = segsOverlap(a[1:], b, seen) || len(b) > 0 && segsOverlap(a, b[1:], seen)
	case len(b) > 0 && b[0] == "**":
		ok = segsOverlap(a, b[1:], seen) || len(a) > 0 && segsOverlap(a[1:], b, seen)
	case len(a) == 0 || len(b) == 0:
		ok = false
	default:
		ok = segOverlap(a[0], b[0]) && segsOverlap(a[1:], b[1:], seen)
	}
	seen[key] = ok
	return ok
}

// segOverlap reports whether some one segment matches both patterns: the
// two patterns are walked together, a * of either taking what the other
// produces.
func segOverlap(a, b string) bool {
	ta, tb := tokens(a), tokens(b)
	seen := map[[2]int]bool{}
	var walk func(i, j int) bool
	walk = func(i, j int) bool {
		k := [2]int{i, j}
		if v, ok := seen[k]; ok {
			return v
		}
		seen[k] = false
		var ok bool
		switch {
		case i == len(ta) && j == len(tb):
			ok = true
		case i < len(ta) && ta[i] == "*" && walk(i+1, j):
			ok = true
		case j < len(tb) && tb[j] == "*" && walk(i, j+1):
			ok = true
		case i < len(ta) && j < len(tb) && ta[i] == "*" && tb[j] != "*":
			ok = walk(i, j+1) // a's star takes the character b produces
		case i < len(ta) && j < len(tb) && tb[j] == "*" && ta[i] != "*":
			ok = walk(i+1, j)
		case i < len(ta) && j < len(tb) && ta[i] != "*" && tb[j] != "*":
			ok = charsOverlap(ta[i], tb[j]) && walk(i+1, j+1)
		}
		seen[k] = ok
		return ok
	}
	return walk(0, 0)
}

// tokens splits a segment pattern into "*", "?", classes "[...]" and
// single characters.
func tokens(p string) []string {
	var out []string
	for i := 0; i < len(p); {
		switch p[i] {
		case '*':
			if len(out) == 0 || out[len(out)-1] != "*" {
				out = append(out, "*")
			}
			i++
		case '[':
			end := strings.IndexByte(p[i+1:], ']')
			if end < 0 {
				out = append(out, p[i:])
				return out
			}
			if end == 0 { // []...] keeps the first ] in the class
				if e2 := strings.IndexByte(p[i+2:], ']'); e2 >= 0 {
					end = e2 + 1
				}
			}
			out = append(out, p[i:i+end+2])
			i += end + 2
		default:
			_, n := utf8.DecodeRuneInString(p[i:])
			out = append(out, p[i:i+n])
			i += n
		}
	}
	return out
}

// charsOverlap reports whether one character matches both single-character
// tokens. Classes are compared over printable ASCII, and assumed to
// overlap when either names other characters.
func charsOverlap(a, b string) bool {
	switch {
	case a == "?" || b == "?":
		return true
	case a[0] != '[' && b[0] != '[':
		return a == b
	case a[0] != '[':
		ok, _ := path.Match(b, a)
		return ok
	case b[0] != '[':
		ok, _ := path.Match(a, b)
		return ok
	}
	for c := byte(0x20); c < 0x7f; c++ {
		s := string(c)
		okA, _ := path.Match(a, s)
		okB, _ := path.Match(b, s)
		if okA && okB {
			return true
		}
	}
	ascii := func(s string) bool { return !strings.ContainsFunc(s, func(r rune) bool { return r >= 0x7f }) }
	return !ascii(a) || !ascii(b)
}

// holding is " (until 12:30: why)" for a reservation.
func holding(r mailbox.Reservation, now time.Time) string {
	var parts []string
	if r.ExpiresAt != nil {
		parts = append(parts, "until "+untilText(*r.ExpiresAt, now))
	}
	s := strings.Join(parts, "")
	if r.Reason != "" {
		if s != "" {
			s += ": "
		}
		s += r.Reason
	}
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// untilText is t as a clock time in now's zone, with the date when it is
// not today's.
func untilText(t, now time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// Holding is holding for the verbs: " (until 12:30: why)".
func Holding(r mailbox.Reservation, now time.Time) string { return holding(r, now) }

// ReleaseRetired releases every reservation of an agent that was retired
// (or is gone from the swarm): nobody will commit under them any more.
func ReleaseRetired(ctx context.Context, st mailbox.Store, agent string, now time.Time) error {
	if _, err := st.ReleaseReservations(ctx, agent, nil, now); err != nil {
		return fmt.Errorf("release %s's file reservations: %w", agent, err)
	}
	return nil
}

// CrossingDraft is the reservation escalation for files that session seq
// of agent committed, when some lie under other agents' exclusive
// reservations among live: one draft naming the agent, the holders and the
// files, whose dedupe key is the same for the same crossing, so repeats
// only count it. ok is false when nothing was crossed.
func CrossingDraft(agent string, seq int64, files []string, live []mailbox.Reservation, now time.Time) (escalation.Draft, bool) {
	type crossing struct {
		r     mailbox.Reservation
		files []string
	}
	var crossed []crossing
	var all []string
	for _, r := range live {
		if r.Agent == agent || !r.Exclusive || !r.Live(now) {
			continue
		}
		var hit []string
		for _, f := range files {
			if GlobMatch(r.Glob, f) {
				hit = append(hit, f)
				if !slices.Contains(all, f) {
					all = append(all, f)
				}
			}
		}
		if len(hit) > 0 {
			crossed = append(crossed, crossing{r, hit})
		}
	}
	if len(crossed) == 0 {
		return escalation.Draft{}, false
	}
	slices.Sort(all)
	var holders, keys []string
	var detail []map[string]any
	for _, c := range crossed {
		holders = append(holders, fmt.Sprintf("%s's exclusive reservation of %s%s", c.r.Agent, c.r.Glob, holding(c.r, now)))
		keys = append(keys, c.r.Agent+":"+c.r.Glob)
		d := map[string]any{"agent": c.r.Agent, "glob": c.r.Glob, "reason": c.r.Reason, "files": c.files}
		if c.r.ExpiresAt != nil {
			d["expires_at"] = c.r.ExpiresAt.UTC()
		}
		detail = append(detail, d)
	}
	slices.Sort(keys)
	shown := all
	more := ""
	if len(shown) > 10 {
		shown, more = shown[:10], fmt.Sprintf(" and %d more", len(all)-10)
	}
	summary := fmt.Sprintf("session %d of %s committed %s under %s; ask them to agree who changes %s, then resolve this",
		seq, agent, strings.Join(shown, ", ")+more, strings.Join(holders, " and "), plural(len(all), "it", "them"))
	return escalation.Draft{
		Kind:     escalation.KindReservation,
		Severity: escalation.Warning,
		Agent:    agent,
		Ref:      escalation.SessionRef(SessionID(agent, seq)),
		Summary:  text.Truncate(summary, escalation.MaxSummary),
		Details:  details(map[string]any{"agent": agent, "session_seq": seq, "files": all, "reservations": detail}),
		// The same agent crossing the same reservations counts one row,
		// whichever session and files.
		DedupeKey: escalation.DefaultDedupeKey(escalation.KindReservation, agent, "", "crossed "+strings.Join(keys, " ")),
	}, true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// committer is the optional side of a Guard that lists the files the
// session's own commits changed (worktree.SessionGuard.Committed).
type committer interface {
	Committed(ctx context.Context) ([]string, error)
}

// checkReservations raises one reservation escalation when the session's
// commits changed files under another agent's exclusive reservation. It
// warns and holds nobody: reservations are advisory.
func (r *runner) checkReservations(ctx context.Context, s *session) {
	c, ok := s.guard.(committer)
	if !ok {
		return
	}
	files, err := c.Committed(bg(ctx))
	if err != nil {
		r.sup.log.Warn("list the files the session committed; reservations not checked", "agent", r.agent.Name, "session_seq", s.seq, "err", err)
		return
	}
	if len(files) == 0 {
		return
	}
	now := r.sup.clock.Now()
	live, err := r.sup.store.Reservations(bg(ctx), now, false)
	if err != nil {
		r.sup.log.Warn("read the file reservations; the session's commits not checked", "agent", r.agent.Name, "session_seq", s.seq, "err", err)
		return
	}
	if d, ok := CrossingDraft(r.agent.Name, s.seq, files, live, now); ok {
		r.sup.raise(ctx, d)
	}
}

// reservationSweep bounds how long the expiry service sleeps: a
// reservation taken by another process while it sleeps is expired within
// this.
const reservationSweep = time.Minute

// expireReservations is the service that releases reservations past their
// TTL, and at start those of agents no longer in the swarm (removed from
// swarm.toml while it was down). It sleeps until the next expiry.
func (s *Supervisor) expireReservations(ctx context.Context) error {
	s.releaseStrangers(ctx)
	timer := s.clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		timer.Reset(s.sweepReservations(ctx))
	}
}

// sweepReservations expires what is due and returns how long to sleep.
func (s *Supervisor) sweepReservations(ctx context.Context) time.Duration {
	now := s.clock.Now()
	n, err := s.store.ExpireReservations(ctx, now)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("expire file reservations", "err", err)
		}
		return reservationSweep
	}
	if n > 0 {
		s.log.Info("file reservations expired", "count", n)
	}
	live, err := s.store.Reservations(ctx, now, false)
	if err != nil {
		return reservationSweep
	}
	wait := reservationSweep
	for _, r := range live {
		if r.ExpiresAt != nil {
			wait = min(wait, max(r.ExpiresAt.Sub(now), 0))
		}
	}
	return wait
}

// releaseStrangers releases the reservations of agents the swarm no longer
// has: in none of swarm.toml's agents (and the stored spawned ones), nor
// spawned since. Not this supervisor's agents only: with `swarm up
// --agents`, or on another host, the others are still the swarm's.
func (s *Supervisor) releaseStrangers(ctx context.Context) {
	now := s.clock.Now()
	live, err := s.store.Reservations(ctx, now, false)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read file reservations", "err", err)
		}
		return
	}
	names := s.AgentNames()
	for _, a := range s.cfg.Agents {
		names = append(names, a.Name)
	}
	var gone []string
	for _, r := range live {
		if !slices.Contains(names, r.Agent) && !slices.Contains(gone, r.Agent) {
			gone = append(gone, r.Agent)
		}
	}
	for _, a := range gone {
		if err := ReleaseRetired(ctx, s.store, a, now); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("release the reservations of an agent no longer in the swarm", "agent", a, "err", err)
		} else if err == nil {
			s.log.Info("released the file reservations of an agent no longer in the swarm", "agent", a)
		}
	}
}
