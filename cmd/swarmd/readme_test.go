package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestReadme runs README.md's Quick start as a user would, in order, in a
// temporary repository: it reads the commands from the README, turns them
// into a testscript, and checks after each one what the README's comment
// says it does. The README is the source: a command added, removed or
// reworded there fails this test until readmeSteps says what to expect of
// it.
//
// Two lines cannot run literally in a test: `export GEMINI_API_KEY=...`
// (there is no key, so the test sets a fake one, which is what `swarm
// doctor` checks), and `swarm up`, which runs offline as the export line's
// comment says (`swarm up --engine script`) and in the background, as if in
// another terminal; backend plays a script (README: Scripted agents) with a
// long tool call for the urgent message to interrupt.
func TestReadme(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if first := firstCommand(t, string(readme)); first != "make demo" {
		t.Errorf("the README's first command is %q; issue 7 wants `make demo` first", first)
	}
	lines := quickStart(t, string(readme))
	script, err := journeyScript(lines)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "readme_journey.txtar"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, journeyParams(dir))
}

// firstCommand is the first line of the README's first ```sh block,
// without its comment.
func firstCommand(t *testing.T, readme string) string {
	_, rest, ok := strings.Cut(readme, "```sh\n")
	if !ok {
		t.Fatal("README.md has no ```sh block")
	}
	line, _, _ := strings.Cut(rest, "\n")
	cmd, _ := splitComment(line)
	return cmd
}

// quickLine is one line of the Quick start block.
type quickLine struct {
	Cmd     string // the command, "" for a comment-only line
	Comment string // what the README says about it
}

// key identifies a line in readmeSteps: the command and its comment, with
// runs of spaces folded.
func (l quickLine) key() string {
	k := strings.Join(strings.Fields(l.Cmd), " ")
	if l.Comment != "" {
		k += "  # " + strings.Join(strings.Fields(l.Comment), " ")
	}
	return k
}

// quickStart returns the lines of the first ```sh block under
// "## Quick start".
func quickStart(t *testing.T, readme string) []quickLine {
	_, sec, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no '## Quick start' section")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatal("README.md's Quick start has no ```sh block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README.md's Quick start block is not closed")
	}
	var out []quickLine
	for _, raw := range strings.Split(block, "\n") {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		cmd, comment := splitComment(raw)
		out = append(out, quickLine{Cmd: cmd, Comment: comment})
	}
	if len(out) == 0 {
		t.Fatal("README.md's Quick start block is empty")
	}
	return out
}

// splitComment splits a shell line at its first unquoted '#' that starts a
// word.
func splitComment(line string) (cmd, comment string) {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		}
	}
	return strings.TrimSpace(line), ""
}

// shellWords splits a command the way sh would for the simple quoting the
// README uses: words separated by blanks, "..." and '...' quoting.
func shellWords(cmd string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range cmd {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.ContainsRune(`\$;&|<>()`+"`", r):
			return nil, fmt.Errorf("%q: the journey test handles only plain words and quotes, not %q", cmd, r)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unclosed quote", cmd)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// tsQuote quotes a word for testscript, whose only quotes are single
// quotes (a quote inside is doubled).
func tsQuote(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t'\"#$") {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", "''") + "'"
}

// journeyScript builds the testscript: for each README line, its step from
// readmeSteps with {{run}} replaced by `exec` of the README's command and
// {{args}} by its arguments after `swarm`.
func journeyScript(lines []quickLine) (string, error) {
	var b strings.Builder
	b.WriteString("# Generated by readme_test.go from README.md's Quick start: each README\n")
	b.WriteString("# line, then the checks of what its comment says.\n\n")
	used := map[string]bool{}
	var unknown []string
	for _, l := range lines {
		if l.Cmd == "" {
			fmt.Fprintf(&b, "# README: # %s\n\n", l.Comment)
			continue
		}
		step, ok := readmeSteps[l.key()]
		if !ok {
			unknown = append(unknown, l.key())
			continue
		}
		used[l.key()] = true
		words, err := shellWords(l.Cmd)
		if err != nil {
			return "", err
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = tsQuote(w)
		}
		args := ""
		if len(words) > 0 && words[0] == "swarm" {
			args = strings.Join(quoted[1:], " ")
		}
		step = strings.ReplaceAll(step, "{{run}}", "exec "+strings.Join(quoted, " "))
		step = strings.ReplaceAll(step, "{{args}}", args)
		fmt.Fprintf(&b, "# README: %s\n%s\n\n", l.key(), strings.TrimSpace(step))
	}
	var stale []string
	for k := range readmeSteps {
		if !used[k] {
			stale = append(stale, k)
		}
	}
	slices.Sort(stale)
	if len(unknown) > 0 || len(stale) > 0 {
		return "", fmt.Errorf("README.md's Quick start and readmeSteps (readme_test.go) disagree:\n"+
			"  README lines with no step (add what the README says each does):\n    %s\n"+
			"  steps for lines the README no longer has (update or remove them):\n    %s",
			strings.Join(unknown, "\n    "), strings.Join(stale, "\n    "))
	}
	b.WriteString(journeyFiles)
	return b.String(), nil
}

// readmeSteps is what each Quick start line must do, keyed by the line as
// the README has it (command, two spaces, '#', its comment).
var readmeSteps = map[string]string{
	"cd myrepo  # a git repository with at least one commit, on a branch": `
# The test's repository is $WORK/repo: one commit, on main.
exec git rev-parse --abbrev-ref HEAD
stdout '^main$'
exec git rev-list --count HEAD
stdout '^1$'
`,

	"swarm init  # writes swarm.toml (agents backend and frontend), creates .swarm/swarm.db": `
{{run}}
stdout '^Initialized swarm in .*/repo$'
stdout '^  wrote +swarm\.toml \(agents: backend, frontend\)$'
stdout '^  created +\.swarm/swarm\.db$'
exists swarm.toml
exists .swarm/swarm.db
grep '^name = "backend"' swarm.toml
grep '^name = "frontend"' swarm.toml
`,

	"swarm doctor  # checks git, bd, the engines and the database; names what is missing": `
! {{run}}
stdout '^ok +git +git version '
stdout '^ok +database +\.swarm/swarm\.db: integrity_check ok$'
stdout '^FAIL +engine gemini +for backend, frontend: no API key: set GEMINI_API_KEY or GOOGLE_API_KEY'
[!exec:bd] stdout -count=1 '^FAIL '
`,

	"export GEMINI_API_KEY=...  # the Gemini engine's key (offline instead: swarm up --engine script)": `
# A fake key: enough for swarm doctor, which now passes. The test runs
# offline, as the comment says.
env GEMINI_API_KEY=readme-journey-fake-key
exec swarm doctor
stdout '^ok +engine gemini +ready for backend, frontend$'
stdout '^Everything swarm needs is here\.$'
`,

	"swarm up  # the supervisor, in the foreground; Ctrl-C stops gracefully": `
# Offline (swarm up --engine script), in the background as if in another
# terminal. backend plays a script whose session 1 is a long tool call;
# frontend has none, so it plays the built-in script.
mkdir .swarm/scripts
cp $WORK/backend.toml .swarm/scripts/backend.toml
exec swarm up --engine script --no-tui &up&
waitjson agents.0.state Running status --json
jsonq stdout running true
jsonq stdout agents.0.name backend
jsonq stdout agents.0.session_seq 1
`,

	"swarm status  # agents, states, sessions, mail": `
{{run}}
stdout '^swarm is running \(pid [1-9]\d*\)$'
stdout '^AGENT +STATE +SESSION +MODE +ENGINE +MAIL +ERRORS +TOKENS +COST +HEARTBEAT$'
stdout '^backend +Running( \S+)? +1 +execute/simple +script +0 +0/0 '
stdout '^frontend +\S+'
`,

	`swarm send backend "the /users endpoint returns 500"`: `
{{run}}
stdout '^sent #1 to backend \(queued\)$'
# Not urgent: backend goes on with its session; the mail waits for the next.
exec swarm status --json
jsonq stdout agents.0.state Running
jsonq stdout agents.0.session_seq 1
jsonq stdout agents.0.pending 1
`,

	`swarm send backend "stop: wrong table" --urgent  # interrupts backend now`: `
{{run}}
stdout '^sent urgent #2 to backend \(queued\): interrupted its running session$'
waitmatch 's1 +Running → Interrupting  urgent mail #2 from operator$' events --agent backend
# Session 2 gets both messages, fixes the bug, answers, and backend is idle.
waitjson agents.0.state Idle status --json
jsonq stdout agents.0.session_seq 2
jsonq stdout agents.0.pending 0
`,

	"swarm inbox backend  # what backend has, and what happened to each message": `
{{run}}
stdout '^ID +FROM +KIND +STATE +AGE +BODY$'
stdout '^1 +operator +message +done \(s2\) +\S+ +the /users endpoint returns 500$'
stdout '^2 +operator +message +done \(s2\) +\S+ +\[URGENT\] stop: wrong table$'
`,

	"swarm inbox operator  # what the agents told you": `
{{run}}
stdout '^3 +backend +message +queued +\S+ +fixed: /users reads the right table$'
exec swarm inbox operator --json
jsonq stdout 0.reply_to 2
jsonq stdout 0.thread_id 2
`,

	"swarm logs backend -f  # follow backend's current session": `
# It prints the newest session's log and keeps following until Ctrl-C.
follow '=== end: success' {{args}}
stdout '^=== session 2 of backend · engine script'
stdout '→ send_message \{.*"reply_to":"2"'
`,

	"swarm prompt backend  # the exact prompt backend would get now (nothing consumed)": `
{{run}}
stdout '^## Identity$'
stdout '^## Session Context$'
stdout '^Session number: 3 '
! stdout '^## Messages from teammates$'
exec swarm status --json
jsonq stdout agents.0.session_seq 2
`,

	"swarm events --agent backend  # every lifecycle transition": `
{{run}}
stdout 's0 +- → Initializing  start$'
stdout 's1 +Spawning → Running  SessionStarted$'
stdout 's1 +Running → Interrupting  urgent mail #2 from operator$'
stdout 's2 +BuildingPrompt → Spawning  session 2: 2 message\(s\)$'
stdout 's2 +Running → SessionComplete  session 2 completed$'
stdout 's2 +SessionComplete → Idle  NoWork$'
! stdout frontend
`,

	"swarm down  # stop; keep worktrees and branches for the next swarm up": `
{{run}}
stdout '^Stopped the supervisor\.$'
stdout '^backend: kept \.swarm/worktrees/backend on swarm/backend \(1 commit not on main\)$'
stdout '^frontend: kept \.swarm/worktrees/frontend on swarm/frontend \(0 commits not on main\)$'
wait up
stdout 'backend +Running → Interrupting  \(urgent mail #2 from operator\)'
stdout '^swarm stopped$'
exists .swarm/worktrees/backend/users.go
exec git branch --list 'swarm/*'
stdout 'swarm/backend'
exec swarm status
stdout '^swarm is not running'
`,

	"swarm down --merge  # stop, and merge every agent's branch into the base branch": `
{{run}}
stdout '^backend: merged swarm/backend into main as [0-9a-f]+ \(1 commit\); removed its worktree and branch$'
stdout '^frontend: nothing to merge; removed its worktree and branch$'
exists users.go
! exists .swarm/worktrees/backend
exec git log --oneline -1
stdout 'swarm: merge agent backend'
exec git branch --list 'swarm/*'
! stdout .
`,
}

// journeyFiles are the files the generated script uses.
const journeyFiles = `-- backend.toml --
# Session 1: a long tool call, for the urgent message to interrupt.
[[session]]
[[session.turn]]
tool = "bash"
args = { command = "sleep 60" }

# Session 2: fix it, commit on swarm/backend, answer in the urgent
# message's thread.
[[session]]
[[session.turn]]
tool = "write_file"
args = { path = "users.go", content = "package api\n" }
[[session.turn]]
tool = "bash"
args = { command = "git add users.go && git commit -q -m 'fix /users: read the right table'" }
[[session.turn]]
tool = "send_message"
args = { to = "${mail.latest.from}", reply_to = "${mail.latest.id}", body = "fixed: /users reads the right table" }
[[session.turn]]
text = "Fixed /users."
`

// TestReadmeParse covers the README reading on its own.
func TestReadmeParse(t *testing.T) {
	for _, tc := range []struct{ line, cmd, comment string }{
		{`swarm up                       # the supervisor`, "swarm up", "the supervisor"},
		{`swarm send b "a # not a comment" --urgent   # interrupts`, `swarm send b "a # not a comment" --urgent`, "interrupts"},
		{`# from another terminal:`, "", "from another terminal:"},
		{`export GEMINI_API_KEY=...`, "export GEMINI_API_KEY=...", ""},
	} {
		cmd, comment := splitComment(tc.line)
		if cmd != tc.cmd || comment != tc.comment {
			t.Errorf("splitComment(%q) = %q, %q; want %q, %q", tc.line, cmd, comment, tc.cmd, tc.comment)
		}
	}
	words, err := shellWords(`swarm send backend "the /users endpoint" --urgent 'it''s'`)
	if err != nil || !slices.Equal(words, []string{"swarm", "send", "backend", "the /users endpoint", "--urgent", "its"}) {
		t.Errorf("shellWords = %q, %v", words, err)
	}
	if _, err := shellWords(`swarm send backend "x" | cat`); err == nil {
		t.Error("shellWords accepted a pipe")
	}
	if got := tsQuote("stop: wrong table"); got != "'stop: wrong table'" {
		t.Errorf("tsQuote = %s", got)
	}
	if got := tsQuote("it's"); got != "'it''s'" {
		t.Errorf("tsQuote = %s", got)
	}
	// A README line the steps do not know fails with both lists.
	_, err = journeyScript([]quickLine{{Cmd: "swarm frobnicate", Comment: "new"}})
	if err == nil || !regexp.MustCompile(`(?s)no step.*swarm frobnicate  # new.*no longer has.*swarm init`).MatchString(err.Error()) {
		t.Errorf("journeyScript with an unknown line: %v", err)
	}
}
