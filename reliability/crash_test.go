//go:build reliability

package reliability

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The scripted agents of R1 form a ring. Every session each agent
//   - sends its ring neighbour a message from bash with `swarm send` (a
//     separate process) and, once that succeeded, appends the body to the
//     ledger (a note in its worktree: see notesDir);
//   - commits a line to a file in its worktree and appends the commit to the
//     commits note;
//   - sends operator and its other neighbour a message with the
//     send_message tool (in-process; the session log records the id);
//   - sleeps a little, and ends.
//
// Every body is wrapped in << >> so the prompts can be searched for them.
const r1Script = `after = "repeat"

[[session]]
[[session.turn]]
tool = "bash"
[session.turn.args]
command = '''b="<<{A} bash-to {P} s$SWARM_SESSION_SEQ $(date +%s%N)>>"; swarm send {P} "$b" >/dev/null && mkdir -p .r1 && printf '%s\n' "$b" >> .r1/ledger'''

[[session.turn]]
tool = "bash"
[session.turn.args]
command = '''echo "$SWARM_SESSION_SEQ $(date +%s%N)" >> work-{A}.txt && git add work-{A}.txt && git commit -q -m "work {A} s$SWARM_SESSION_SEQ" && mkdir -p .r1 && echo "{A} $(git rev-parse HEAD)" >> .r1/commits'''

[[session.turn]]
tool = "send_message"
args = { to = "operator", body = "<<{A} tool-to operator after ${mail.latest.id}>>" }

[[session.turn]]
tool = "send_message"
args = { to = "{Q}", body = "<<{A} tool-to {Q} after ${mail.latest.id}>>" }

[[session.turn]]
tool = "bash"
args = { command = "sleep 0.3" }

[[session.turn]]
text = "done"
`

var (
	tokenRE    = regexp.MustCompile(`<<[^<>\n]*>>`)
	toolSentRE = regexp.MustCompile(`sent (?:urgent )?message (\d+) to ([a-z][a-z0-9-]*)`)
)

// crashWorld is what R1 knows was sent and committed, and what the last
// check saw.
type crashWorld struct {
	h      *harness
	agents []string
	// The sessions' notes (harness.noteLines): "ledger" holds the bodies
	// `swarm send` stored from inside sessions, "commits" the
	// "<agent> <hash>" of commits made in sessions.

	mu       sync.Mutex
	external []string // bodies the operator-side sender stored
	sendErrs []string

	maxSeq  map[string]int64            // per agent, at the last check
	history map[string]map[int64]string // agent -> seq -> state at the last check
	stats   struct {
		sessions, completed, crashed, messages, commits int
		// summed over every check
		toolSends, doneChecked, requeued, groupsGone int
	}
}

type msgRow struct {
	id                int64
	from, to, body    string
	state             string
	seq               sql.NullInt64
	shown             int64
	sessionLogChecked bool
}

type sessRow struct {
	agent   string
	seq     int64
	state   string
	started int64
	prompt  string
	pgids   string
}

// TestR1CrashRecovery kills `swarm up` with SIGKILL at random moments of a
// scripted run, 20 times, while agents message each other and operator and
// commit in their worktrees and an operator-side process keeps sending
// (some of it urgent, which interrupts sessions). After each kill, and again
// after each restart has recovered, it checks the invariants.
func TestR1CrashRecovery(t *testing.T) {
	const rounds = 20
	rng := newRand(t)
	agents := []string{"alice", "bob", "carol"}
	scripts := map[string]string{}
	for i, a := range agents {
		p, q := agents[(i+1)%len(agents)], agents[(i+2)%len(agents)]
		scripts[a] = strings.NewReplacer("{A}", a, "{P}", p, "{Q}", q).Replace(r1Script)
	}
	h := newHarness(t, swarmConfig{agents: agents, scripts: scripts,
		toml: "[liveness]\nnudge_after = \"0s\"\nheartbeat = \"1s\"\n\n[errors]\nbackoff_min = \"50ms\"\nbackoff_max = \"500ms\"\n"})
	w := &crashWorld{h: h, agents: agents, maxSeq: map[string]int64{}, history: map[string]map[int64]string{}}

	// The operator keeps sending from outside, up or down.
	stop := make(chan struct{})
	senderDone := make(chan struct{})
	srng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	go func() {
		defer close(senderDone)
		w.operatorSender(srng, stop)
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-senderDone
	}()

	for round := 1; round <= rounds; round++ {
		up := h.up("--engine", "script")
		var recovered bool
		if round > 1 {
			// The restart must recover before it is killed again, or a kill
			// during recovery is not what this round tests; the kill
			// moments below still fall in start-up a quarter of the time.
			pre := w.snapshotRunning(t)
			h.waitFor(30*time.Second, "the restarted swarm to answer", func() (bool, error) {
				if up.exited() {
					t.Fatalf("round %d: swarm up exited:\n%s", round, tail(up.output(), 3000))
				}
				return h.running(up.pid())
			})
			w.checkRecovered(t, round, pre)
			recovered = true
		}
		// The fault: SIGKILL at a random moment. A quarter fall in the
		// first 300 ms (start-up, recovery, first prompts), the rest in
		// the run.
		d := time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
		if rng.IntN(4) > 0 {
			d = 300*time.Millisecond + time.Duration(rng.Int64N(int64(2200*time.Millisecond)))
		}
		fault := time.NewTimer(d)
		<-fault.C // the moment of the crash, chosen above; not waiting for anything
		if up.exited() {
			t.Fatalf("round %d: swarm up exited before the kill:\n%s", round, tail(up.output(), 3000))
		}
		up.kill9(t)
		w.check(t, fmt.Sprintf("round %d, after kill -9 at %s (recovered first: %v)", round, d.Round(time.Millisecond), recovered))
	}

	// The last restart: it must recover and get back to work.
	up := h.up("--engine", "script")
	pre := w.snapshotRunning(t)
	h.waitFor(30*time.Second, "the final swarm to answer", func() (bool, error) { return h.running(up.pid()) })
	w.checkRecovered(t, rounds+1, pre)
	base := map[string]int64{}
	for a, s := range w.maxSeq {
		base[a] = s
	}
	st := h.store(agents)
	defer func() {
		if t.Failed() {
			slog, _ := os.ReadFile(filepath.Join(h.root, ".swarm", "logs", "supervisor.log"))
			t.Logf("at the failure:\n%s\nthe supervisor log on leases, stops, recoveries and errors:\n%s", w.diagnose(st), grepLines(string(slog), "lease", "stop", "recover", "swarm up", "level=ERROR", "level=WARN"))
		}
	}()
	h.waitFor(60*time.Second, "every agent to complete a session after the last restart", func() (bool, error) {
		for _, a := range agents {
			var n int
			if err := st.DB().QueryRow(`SELECT count(*) FROM sessions WHERE agent = ? AND seq > ? AND state = 'completed'`, a, base[a]).Scan(&n); err != nil {
				return false, err
			}
			if n == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	st.Close()
	close(stop)
	<-senderDone
	up.interrupt(t)
	w.check(t, "after the final graceful stop")
	w.fsck(t, "after the final graceful stop")
	w.checkStopped(t)

	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sendErrs) > 0 {
		t.Errorf("%d operator sends failed, e.g.:\n%s", len(w.sendErrs), strings.Join(w.sendErrs[:min(3, len(w.sendErrs))], "\n"))
	}
	s := w.stats
	t.Logf("%d kill -9 rounds: %d sessions (%d completed, %d crashed), %d messages (%d sent from outside, %d from sessions' bash), %d commits; invariants held after every kill and every recovery",
		rounds, s.sessions, s.completed, s.crashed, s.messages, len(w.external), len(h.noteLines(agents, "ledger")), s.commits)
	t.Logf("summed over the checks: %d tool sends matched to their rows, %d done messages found in their completed session's prompt, %d messages left delivered by a crash found queued again, %d process groups of crashed sessions found gone",
		s.toolSends, s.doneChecked, s.requeued, s.groupsGone)
}

// operatorSender sends from outside with real `swarm send` processes, a
// fifth of them urgent, every 50-250 ms until stop.
func (w *crashWorld) operatorSender(rng *rand.Rand, stop <-chan struct{}) {
	for n := 1; ; n++ {
		to := w.agents[rng.IntN(len(w.agents))]
		body := fmt.Sprintf("<<operator-to %s #%d>>", to, n)
		args := []string{"send", to, body}
		if rng.IntN(5) == 0 {
			args = append(args, "--urgent")
		}
		r := w.h.swarmQuiet(args...)
		w.mu.Lock()
		if r.code == 0 {
			w.external = append(w.external, body)
		} else {
			w.sendErrs = append(w.sendErrs, r.String())
		}
		w.mu.Unlock()
		t := time.NewTimer(50*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond))))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C: // the pace of the operator's sends
		}
	}
}

// diagnose describes each agent's state and last sessions, and the
// unresolved escalations, for a failure message.
func (w *crashWorld) diagnose(st *testStore) string {
	var b strings.Builder
	rows, err := st.DB().Query(`SELECT name, state, session_seq, consecutive_errors, total_errors FROM agents ORDER BY name`)
	if err != nil {
		return err.Error()
	}
	for rows.Next() {
		var name, state string
		var seq, ce, te int64
		if err := rows.Scan(&name, &state, &seq, &ce, &te); err != nil {
			break
		}
		fmt.Fprintf(&b, "agent %s: %s, session %d, errors %d/%d\n", name, state, seq, ce, te)
	}
	rows.Close()
	rows, err = st.DB().Query(`SELECT agent, seq, state, error FROM sessions ORDER BY id DESC LIMIT 12`)
	if err == nil {
		for rows.Next() {
			var agent, state string
			var msg sql.NullString
			var seq int64
			if rows.Scan(&agent, &seq, &state, &msg) == nil {
				fmt.Fprintf(&b, "  session %s/%d %s %s\n", agent, seq, state, msg.String)
			}
		}
		rows.Close()
	}
	// The agents' last transitions, oldest first.
	rows, err = st.DB().Query(`SELECT agent, from_state, to_state, cause, session_seq, at FROM (
		SELECT * FROM events WHERE subject_kind = 'agent' ORDER BY id DESC LIMIT 40) ORDER BY id`)
	if err == nil {
		for rows.Next() {
			var agent, to, cause string
			var from sql.NullString
			var seq sql.NullInt64
			var at int64
			if rows.Scan(&agent, &from, &to, &cause, &seq, &at) == nil {
				fmt.Fprintf(&b, "  event %s %s: %s → %s (%s) seq %d\n", time.Unix(0, at).UTC().Format("15:04:05.000"), agent, from.String, to, cause, seq.Int64)
			}
		}
		rows.Close()
	}
	rows, err = st.DB().Query(`SELECT id, kind, agent, summary FROM escalations WHERE state <> 'resolved'`)
	if err == nil {
		for rows.Next() {
			var id int64
			var kind, summary string
			var agent sql.NullString
			if rows.Scan(&id, &kind, &agent, &summary) == nil {
				fmt.Fprintf(&b, "  escalation %d %s %s: %s\n", id, kind, agent.String, summary)
			}
		}
		rows.Close()
	}
	return b.String()
}

// grepLines keeps the lines of text that contain any of words (the last
// 80 of them): what a failure's diagnosis needs of a long log.
func grepLines(text string, words ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out[max(0, len(out)-80):], "\n")
}

func readLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// db opens the swarm's database; close it with the returned func.
func (w *crashWorld) db(t *testing.T) (*sql.DB, func()) {
	t.Helper()
	st := w.h.store(w.agents)
	return st.DB(), func() { st.Close() }
}

func (w *crashWorld) load(t *testing.T, db *sql.DB) ([]msgRow, []sessRow, map[string]int64) {
	t.Helper()
	rows, err := db.Query(`SELECT id, sender, recipient, body, state, session_seq, shown FROM messages ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var ms []msgRow
	for rows.Next() {
		var m msgRow
		if err := rows.Scan(&m.id, &m.from, &m.to, &m.body, &m.state, &m.seq, &m.shown); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read messages: %v", err)
	}
	rows.Close()
	rows, err = db.Query(`SELECT agent, seq, state, started_at, prompt, pgids FROM sessions ORDER BY agent, seq`)
	if err != nil {
		t.Fatal(err)
	}
	var ss []sessRow
	for rows.Next() {
		var s sessRow
		if err := rows.Scan(&s.agent, &s.seq, &s.state, &s.started, &s.prompt, &s.pgids); err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read sessions: %v", err)
	}
	rows.Close()
	agentSeq := map[string]int64{}
	rows, err = db.Query(`SELECT name, session_seq FROM agents`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		var s int64
		if err := rows.Scan(&n, &s); err != nil {
			t.Fatal(err)
		}
		agentSeq[n] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read agents: %v", err)
	}
	rows.Close()
	return ms, ss, agentSeq
}

// messagesSection is the "Messages from teammates" section of a prompt.
func messagesSection(prompt string) string {
	_, rest, ok := strings.Cut(prompt, "\n## Messages from teammates\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// check asserts the invariants on the database and the repository as they
// are now, with no supervisor running.
func (w *crashWorld) check(t *testing.T, stage string) {
	t.Helper()
	fail := func(format string, a ...any) { t.Fatalf(stage+": "+format, a...) }
	db, done := w.db(t)
	defer done()
	var ic string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ic); err != nil || ic != "ok" {
		fail("PRAGMA integrity_check = %q, %v", ic, err)
	}
	// What was sent is noted before the database is read: a send that
	// finishes after the read would otherwise look lost. (The sender keeps
	// sending while the checks run.)
	w.mu.Lock()
	external := slices.Clone(w.external)
	w.mu.Unlock()
	ledger := w.h.noteLines(w.agents, "ledger")
	ms, ss, agentSeq := w.load(t, db)

	// Every message ever sent exists: from outside, from sessions' bash,
	// and from the send_message tool (its result line in the session log).
	byBody := map[string][]msgRow{}
	byID := map[int64]msgRow{}
	for _, m := range ms {
		byBody[m.body] = append(byBody[m.body], m)
		byID[m.id] = m
	}
	for _, b := range external {
		if got := len(byBody[b]); got != 1 {
			fail("operator message %q is stored %d times, want once", b, got)
		}
	}
	for _, b := range ledger {
		if got := len(byBody[b]); got != 1 {
			fail("session-sent message %q is stored %d times, want once", b, got)
		}
	}
	for _, a := range w.agents {
		logs, _ := filepath.Glob(filepath.Join(w.h.root, ".swarm", "logs", a, "*.log"))
		for _, lf := range logs {
			data, _ := os.ReadFile(lf)
			for _, sm := range toolSentRE.FindAllStringSubmatch(string(data), -1) {
				var id int64
				fmt.Sscan(sm[1], &id)
				m, ok := byID[id]
				if !ok || m.from != a || m.to != sm[2] {
					fail("%s says it sent message %d to %s; stored: %+v (found %v)", lf, id, sm[2], m, ok)
				}
				w.stats.toolSends++
			}
		}
	}

	// Sessions: numbered 1..N per agent, started in order, N recorded on
	// the agent, never fewer than before, and history never rewritten.
	sessions := map[string]map[int64]sessRow{}
	for _, s := range ss {
		if sessions[s.agent] == nil {
			sessions[s.agent] = map[int64]sessRow{}
		}
		sessions[s.agent][s.seq] = s
	}
	for _, a := range w.agents {
		n := int64(len(sessions[a]))
		var prevStart int64
		for seq := int64(1); seq <= n; seq++ {
			s, ok := sessions[a][seq]
			if !ok {
				fail("%s has %d sessions but no session %d", a, n, seq)
			}
			if s.started < prevStart {
				fail("%s session %d started before session %d", a, seq, seq-1)
			}
			prevStart = s.started
			if old, ok := w.history[a][seq]; ok && old != "running" && old != s.state {
				fail("%s session %d was %s and is now %s", a, seq, old, s.state)
			}
		}
		if agentSeq[a] != n {
			fail("agent %s records session %d, the sessions table has %d", a, agentSeq[a], n)
		}
		if n < w.maxSeq[a] {
			fail("%s's sessions went from %d down to %d", a, w.maxSeq[a], n)
		}
	}

	// Delivery: done mail belongs to a completed session, delivered mail to
	// the running session (or the one being prepared); and no message is
	// shown to two completed sessions.
	for _, m := range ms {
		if !slices.Contains(w.agents, m.to) {
			continue
		}
		if !tokenRE.MatchString(m.body) {
			fail("message %d to %s has no <<token>>: %q", m.id, m.to, m.body)
		}
		switch m.state {
		case "done":
			s, ok := sessions[m.to][m.seq.Int64]
			if !ok || s.state != "completed" {
				fail("message %d is done in %s session %d, which is %q", m.id, m.to, m.seq.Int64, s.state)
			}
			if !strings.Contains(messagesSection(s.prompt), m.body) {
				fail("message %d (%q) is done in %s session %d, whose prompt does not show it", m.id, m.body, m.to, m.seq.Int64)
			}
			w.stats.doneChecked++
		case "delivered":
			s, ok := sessions[m.to][m.seq.Int64]
			if ok && s.state != "running" || !ok && m.seq.Int64 != agentSeq[m.to]+1 {
				fail("message %d is delivered to %s session %d, which is %q (agent at %d)", m.id, m.to, m.seq.Int64, s.state, agentSeq[m.to])
			}
		case "queued":
			if m.seq.Valid {
				fail("queued message %d has session %d", m.id, m.seq.Int64)
			}
		}
	}
	for _, a := range w.agents {
		shown := map[string]int{}
		for _, s := range sessions[a] {
			if s.state != "completed" {
				continue
			}
			for _, tok := range tokenRE.FindAllString(messagesSection(s.prompt), -1) {
				shown[tok]++
			}
		}
		for tok, n := range shown {
			stored := 0
			for _, m := range byBody[tok] {
				if m.to == a {
					stored++
				}
			}
			if n > stored {
				fail("%q was shown %d times to completed sessions of %s, but only %d such message(s) exist", tok, n, a, stored)
			}
		}
	}

	// Work committed in the worktrees is on the agents' branches.
	onBranch := map[string]map[string]bool{}
	for _, a := range w.agents {
		onBranch[a] = map[string]bool{}
		out, err := w.h.gitErr(w.h.root, "rev-list", "swarm/"+a, "--")
		if err != nil {
			if len(sessions[a]) == 0 {
				continue
			}
			fail("%v", err)
		}
		for _, hsh := range strings.Fields(out) {
			onBranch[a][hsh] = true
		}
	}
	commits := w.h.noteLines(w.agents, "commits")
	for _, l := range commits {
		a, hsh, _ := strings.Cut(l, " ")
		if !onBranch[a][hsh] {
			fail("%s's commit %s is not on swarm/%s", a, hsh, a)
		}
	}

	// Remember what was seen, for "only grows" and "never rewritten".
	w.stats.sessions, w.stats.completed, w.stats.crashed = len(ss), 0, 0
	for _, s := range ss {
		switch s.state {
		case "completed":
			w.stats.completed++
		case "crashed":
			w.stats.crashed++
		}
	}
	w.stats.messages, w.stats.commits = len(ms), len(commits)
	for _, a := range w.agents {
		w.maxSeq[a] = int64(len(sessions[a]))
		w.history[a] = map[int64]string{}
		for seq, s := range sessions[a] {
			w.history[a][seq] = s.state
		}
	}
}

// runningState is what a crash left: running sessions and delivered mail.
type runningState struct {
	sessions  map[string]int64 // "agent/seq" -> started_at, for sessions left running
	pgids     []string
	delivered map[int64]msgRow
}

// snapshotRunning reads what the last crash left, before the restart's
// recovery touches it (recovery runs only once the new supervisor holds
// the lock, after its start-up checks; reading first is safe because the
// supervisor needs the write lock to recover and these reads take none).
func (w *crashWorld) snapshotRunning(t *testing.T) runningState {
	t.Helper()
	db, done := w.db(t)
	defer done()
	ms, ss, _ := w.load(t, db)
	rs := runningState{sessions: map[string]int64{}, delivered: map[int64]msgRow{}}
	for _, s := range ss {
		if s.state == "running" {
			rs.sessions[fmt.Sprintf("%s/%d", s.agent, s.seq)] = s.started
			rs.pgids = append(rs.pgids, s.pgids)
		}
	}
	for _, m := range ms {
		if m.state == "delivered" {
			rs.delivered[m.id] = m
		}
	}
	return rs
}

// checkRecovered asserts what recovery did with what the crash left: the
// running sessions are crashed, their process groups gone, and their mail
// queued again with one more showing (or already delivered anew).
func (w *crashWorld) checkRecovered(t *testing.T, round int, pre runningState) {
	t.Helper()
	w.fsck(t, fmt.Sprintf("round %d, after recovery", round))
	db, done := w.db(t)
	defer done()
	for key, started := range pre.sessions {
		a, seqText, _ := strings.Cut(key, "/")
		var state string
		var st int64
		if err := db.QueryRow(`SELECT state, started_at FROM sessions WHERE agent = ? AND seq = ?`, a, seqText).Scan(&state, &st); err != nil {
			t.Fatalf("round %d: session %s after recovery: %v", round, key, err)
		}
		if state != "crashed" || st != started {
			t.Fatalf("round %d: session %s was left running by the crash and is %s after recovery, want crashed", round, key, state)
		}
	}
	for id, old := range pre.delivered {
		var seq sql.NullInt64
		var shown int64
		if err := db.QueryRow(`SELECT session_seq, shown FROM messages WHERE id = ?`, id).Scan(&seq, &shown); err != nil {
			t.Fatalf("round %d: message %d after recovery: %v", round, id, err)
		}
		if seq.Valid && seq.Int64 <= old.seq.Int64 || shown < old.shown+1 {
			t.Fatalf("round %d: message %d was delivered to session %d (shown %d) at the crash; after recovery: session %v, shown %d",
				round, id, old.seq.Int64, old.shown, seq, shown)
		}
		w.stats.requeued++
	}
	var groups []int
	for _, p := range pre.pgids {
		for _, f := range strings.FieldsFunc(p, func(r rune) bool { return r == '[' || r == ']' || r == ',' || r == ' ' }) {
			var pg int
			if _, err := fmt.Sscan(f, &pg); err == nil && pg > 1 {
				groups = append(groups, pg)
			}
		}
	}
	err := waitUntil(10*time.Second, func() (bool, error) {
		for _, pg := range groups {
			if err := syscall.Kill(-pg, 0); err == nil || !errors.Is(err, syscall.ESRCH) {
				if groupHasLive(pg) {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("round %d: process groups %v of crashed sessions still alive after recovery", round, groups)
	}
	w.stats.groupsGone += len(groups)
}

// groupHasLive reports whether a process group has a live (not zombie)
// member.
func groupHasLive(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[2] == fmt.Sprint(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// fsck runs git fsck on the repository once its recovery is done (right
// after a kill -9 the repository may legitimately hold what recovery
// repairs: a worktree add cut half way), with every git writer of the
// swarm frozen: git fsck racing a commit can see the commit before its
// tree. A session the kill left running is frozen too: the recovery that
// ends it comes after.
func (w *crashWorld) fsck(t *testing.T, stage string) {
	t.Helper()
	thaw := freeze(w.h.root)
	defer thaw()
	// --name-objects says where a missing object is referenced from.
	if _, err := w.h.gitErr(w.h.root, "fsck", "--no-progress", "--no-dangling", "--name-objects"); err != nil {
		t.Fatalf("%s: git fsck: %v", stage, err)
	}
}

// checkStopped asserts what a graceful stop leaves: nothing running,
// nothing delivered, every agent Stopped, no stale lock in a worktree.
func (w *crashWorld) checkStopped(t *testing.T) {
	t.Helper()
	db, done := w.db(t)
	defer done()
	var running, delivered, notStopped int
	if err := db.QueryRow(`SELECT count(*) FROM sessions WHERE state = 'running'`).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE state = 'delivered'`).Scan(&delivered); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM agents WHERE state <> 'Stopped'`).Scan(&notStopped); err != nil {
		t.Fatal(err)
	}
	if running+delivered+notStopped > 0 {
		t.Fatalf("after a graceful stop: %d running sessions, %d delivered messages, %d agents not Stopped", running, delivered, notStopped)
	}
	for _, a := range w.agents {
		wt := filepath.Join(w.h.root, ".swarm", "worktrees", a)
		if out, err := w.h.gitErr(wt, "status", "--porcelain"); err != nil {
			t.Errorf("git status in %s's worktree: %v", a, err)
		} else if out != "" {
			t.Logf("%s's worktree is not clean (a commit cut by a kill): %s", a, out)
		}
		if _, err := os.Stat(filepath.Join(w.h.root, ".git", "worktrees", a, "index.lock")); err == nil {
			t.Errorf("%s's worktree has a stale index.lock: the next commit there will fail", a)
		}
	}
}

// swarmQuiet is swarm for the background sender: it never fails the test
// from its goroutine; the caller records the result.
func (h *harness) swarmQuiet(args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h.runCtx(ctx, nil, args...)
}
