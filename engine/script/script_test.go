package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/gittest"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/mode"
)

// repoWithWorktree makes a repository with one commit and a linked
// worktree for agent, and returns both.
func repoWithWorktree(t *testing.T, agent string) (root, wt string) {
	t.Helper()
	return gittest.Worktree(t, agent, nil)
}

func write(t *testing.T, path, content string) { gittest.WriteFile(t, path, content) }

type recorder struct {
	mu   sync.Mutex
	from string
	sent []string
}

func (r *recorder) Send(_ context.Context, to, body string, urgent bool, replyTo int64) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, fmt.Sprintf("%s->%s urgent=%v reply_to=%d: %s", r.from, to, urgent, replyTo, body))
	return int64(len(r.sent)), nil
}

func session(agent, root, wt string, seq int64, log *bytes.Buffer) *engine.Session {
	s := &engine.Session{
		Agent: agent, ID: fmt.Sprintf("%s-%d", agent, seq), Seq: seq, Root: root, Worktree: wt,
		Agents: []string{"alice", "bob"}, Prompt: "You are " + agent + ".", Mode: mode.Code,
		Messenger: &recorder{from: agent},
	}
	if log != nil {
		s.Log = log
	}
	s.Env = engine.SessionEnv(os.Environ(), s)
	return s
}

const example = `after = "end"            # or "repeat"; default "end"
[[session]]
[[session.turn]]
wait = "2s"              # optional pause before the turn
tool = "bash"
args = { command = "sleep 60" }
[[session.turn]]
text = "done"
`

func TestParseExample(t *testing.T) {
	f, err := Parse([]byte(example), "alice.toml")
	if err != nil {
		t.Fatal(err)
	}
	if f.After != AfterEnd || len(f.Sessions) != 1 || len(f.Sessions[0].Turns) != 2 {
		t.Fatalf("parsed %+v", f)
	}
	t0, t1 := f.Sessions[0].Turns[0], f.Sessions[0].Turns[1]
	if t0.Wait != 2*time.Second || t0.Tool != "bash" || t0.Args["command"] != "sleep 60" || t0.Line != 3 {
		t.Errorf("turn 1 = %+v", t0)
	}
	if t1.Text != "done" || t1.Tool != "" || t1.Line != 7 {
		t.Errorf("turn 2 = %+v", t1)
	}
	if f, err := Parse(nil, "empty.toml"); err != nil || f.After != AfterEnd || len(f.Sessions) != 0 {
		t.Errorf("empty file: %+v, %v", f, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"unknown top key", "afer = \"end\"\n", `x.toml:1: unknown key "afer"`},
		{"unknown turn key", "[[session]]\n[[session.turn]]\ntext = \"a\"\nwiat = \"1s\"\n", `x.toml:4: unknown key "wiat" in [[session.turn]]; did you mean "wait"?`},
		{"bad after", "\n\nafter = \"loop\"\n", `x.toml:3: after must be "end", "repeat" or "mail", got "loop"`},
		{"bad wait", "[[session]]\n[[session.turn]]\nwait = \"2 secs\"\ntext = \"a\"\n", `x.toml:3: bad wait "2 secs"`},
		{"negative wait", "[[session]]\n[[session.turn]]\nwait = \"-1s\"\ntext = \"a\"\n", `x.toml:3: wait "-1s" must not be negative`},
		{"tool and text", "[[session]]\n[[session.turn]]\ntool = \"bash\"\ntext = \"a\"\n", "x.toml:2: a turn has either tool or text, not both"},
		{"empty turn", "[[session]]\n[[session.turn]]\n[[session.turn]]\nwait = \"1s\"\n", "x.toml:3: a turn needs tool"},
		{"unknown tool", "[[session]]\n[[session.turn]]\ntext = \"a\"\n[[session]]\n[[session.turn]]\ntool = \"rm\"\n", `x.toml:6: unknown tool "rm"`},
		{"args on text", "[[session]]\n[[session.turn]]\ntext = \"a\"\nargs = { x = 1 }\n", "x.toml:4: args belong to a tool turn"},
		{"placeholder typo", "[[session]]\n[[session.turn]]\ntool = \"send_message\"\nargs = { to = \"${mail.latest.sender}\", body = \"${HOME} ok\" }\n", "x.toml:2: unknown placeholder ${mail.latest.sender}"},
		{"syntax", "[[session]\n", "x.toml:1:"},
		{"wrong type", "[[session]]\n[[session.turn]]\ntext = 3\n", "x.toml:3:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "x.toml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	f, err := Parse([]byte(`
[[session]]
[[session.turn]]
text = "Plan: look around."
[[session.turn]]
text = "Then search."
[[session.turn]]
tool = "list_files"
[[session.turn]]
tool = "grep"
args = { pattern = "hello" }
[[session.turn]]
text = "Found it."
`), "s.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := &model{block: f.Sessions[0], wait: sleep}
	var turns []engine.Turn
	var got []string
	for range 4 {
		resp, err := m.Generate(context.Background(), engine.Request{Turns: turns})
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, p := range resp.Turn.Parts {
			if p.Call != nil {
				parts = append(parts, "call "+p.Call.Name+" "+p.Call.ID)
			} else {
				parts = append(parts, p.Text)
			}
		}
		got = append(got, strings.Join(parts, " | "))
		turns = append(turns, engine.Turn{Role: engine.RoleUser}, resp.Turn)
	}
	want := []string{"Plan: look around. | Then search. | call list_files script-1", "call grep script-2", "Found it.", ""}
	if !slices.Equal(got, want) {
		t.Errorf("model turns = %q\nwant %q", got, want)
	}
}

const demo = `
[[session]]
[[session.turn]]
text = "Writing the notes."
[[session.turn]]
tool = "write_file"
args = { path = "notes.md", content = "# Notes\n" }
[[session.turn]]
tool = "bash"
args = { command = "cat notes.md; exit 2" }
[[session.turn]]
tool = "read_file"
args = { path = "../escape.txt" }
[[session.turn]]
tool = "send_message"
args = { to = "bob", body = "notes are in", urgent = true }
[[session.turn]]
text = "Done."
`

func TestDeterminism(t *testing.T) {
	run := func() (engine.Result, string, []string) {
		root, wt := repoWithWorktree(t, "alice")
		write(t, filepath.Join(root, ".swarm", "scripts", "alice.toml"), demo)
		var log bytes.Buffer
		s := session("alice", root, wt, 1, &log)
		res := New(Options{}).Run(context.Background(), s)
		return res, log.String(), s.Messenger.(*recorder).sent
	}
	r1, log1, sent1 := run()
	r2, log2, sent2 := run()
	if r1.Outcome != engine.Success || r1.Turns != 5 || r1.Usage.InputTokens == 0 || r1.Usage.OutputTokens == 0 {
		t.Fatalf("result = %+v\n%s", r1, log1)
	}
	if fmt.Sprint(r1) != fmt.Sprint(r2) || log1 != log2 || !slices.Equal(sent1, sent2) {
		t.Errorf("runs differ:\n%+v\n%+v\n--- log 1\n%s\n--- log 2\n%s", r1, r2, log1, log2)
	}
	for _, want := range []string{
		"Writing the notes.\n  → write_file",
		"# Notes\n    [exit status 2]",
		"← read_file error: path \"../escape.txt\" leaves the worktree",
		"  Done.\n",
	} {
		if !strings.Contains(log1, want) {
			t.Errorf("log lacks %q:\n%s", want, log1)
		}
	}
	if want := []string{"alice->bob urgent=true reply_to=0: notes are in"}; !slices.Equal(sent1, want) {
		t.Errorf("sent %q", sent1)
	}
}

func TestAfter(t *testing.T) {
	dir := t.TempDir()
	two := "[[session]]\n[[session.turn]]\ntext = \"one\"\n[[session]]\n[[session.turn]]\ntext = \"two\"\n"
	write(t, filepath.Join(dir, "ender.toml"), two)
	write(t, filepath.Join(dir, "looper.toml"), "after = \"repeat\"\n"+two)
	e := New(Options{Dir: dir}).(engine.WorkSource)
	for _, tc := range []struct {
		agent string
		seq   int64
		want  bool
	}{
		{"ender", 1, true}, {"ender", 2, true}, {"ender", 3, false},
		{"looper", 1, true}, {"looper", 3, true}, {"looper", 100, true},
		{"nobody", 1, false},
	} {
		if got := e.HasWork(tc.agent, tc.seq); got != tc.want {
			t.Errorf("HasWork(%s, %d) = %v, want %v", tc.agent, tc.seq, got, tc.want)
		}
	}
	eng := e.(engine.Engine)
	play := func(agent string, seq int64) string {
		root, wt := repoWithWorktree(t, agent)
		var log bytes.Buffer
		s := session(agent, root, wt, seq, &log)
		s.Mail = []engine.Mail{{ID: 4, From: "bob", Body: "hi"}}
		if res := eng.Run(context.Background(), s); res.Outcome != engine.Success {
			t.Fatalf("%s session %d: %+v", agent, seq, res)
		}
		return log.String()
	}
	for _, tc := range []struct {
		agent string
		seq   int64
		want  string
	}{
		{"ender", 2, "  two\n"},
		{"ender", 3, "Read 1 message(s) from bob."}, // past the end: the built-in reads the mail
		{"looper", 3, "  one\n"},
		{"looper", 4, "  two\n"},
	} {
		if got := play(tc.agent, tc.seq); !strings.Contains(got, tc.want) {
			t.Errorf("%s session %d log lacks %q:\n%s", tc.agent, tc.seq, tc.want, got)
		}
	}
}

func TestBuiltin(t *testing.T) {
	root, wt := repoWithWorktree(t, "alice")
	var log bytes.Buffer
	s := session("alice", root, wt, 1, &log)
	s.Mail = []engine.Mail{{ID: 1, From: "bob", Body: "a"}, {ID: 2, From: "operator", Body: "b", Urgent: true}, {ID: 3, From: "bob", Body: "c"}}
	e := New(Options{Root: root})
	res := e.Run(context.Background(), s)
	if res.Outcome != engine.Success || res.Turns != 1 {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(log.String(), "Read 3 message(s) from bob, operator.") {
		t.Errorf("log:\n%s", log.String())
	}
	if sent := s.Messenger.(*recorder).sent; len(sent) != 0 {
		t.Errorf("the built-in script replied: %q", sent)
	}
	if e.(engine.WorkSource).HasWork("alice", 2) {
		t.Error("the built-in script reports work of its own")
	}
	log.Reset()
	s.Mail = nil
	if res := e.Run(context.Background(), s); res.Outcome != engine.Success || !strings.Contains(log.String(), "No messages") {
		t.Errorf("no mail: %+v\n%s", res, log.String())
	}
}

func TestMailPlaceholders(t *testing.T) {
	root, wt := repoWithWorktree(t, "alice")
	path := filepath.Join(t.TempDir(), "reply.toml")
	write(t, path, `
[[session]]
[[session.turn]]
tool = "send_message"
args = { to = "${mail.latest.from}", body = "re ${mail.latest.id}: on it (${HOME} stays)", reply_to = "${mail.latest.id}" }
[[session.turn]]
text = "Replied to ${mail.latest.from}."
`)
	e := New(Options{Paths: map[string]string{"alice": path}})
	var log bytes.Buffer
	s := session("alice", root, wt, 1, &log)
	s.Mail = []engine.Mail{{ID: 9, From: "bob", Body: "newest"}, {ID: 3, From: "operator", Body: "older", Urgent: true}}
	if res := e.Run(context.Background(), s); res.Outcome != engine.Success {
		t.Fatalf("%+v\n%s", res, log.String())
	}
	want := []string{"alice->bob urgent=false reply_to=9: re 9: on it (${HOME} stays)"}
	if got := s.Messenger.(*recorder).sent; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	if !strings.Contains(log.String(), "Replied to bob.") {
		t.Errorf("log:\n%s", log.String())
	}
	// With no mail the placeholders are empty: the send fails as a tool
	// error, and the session still ends normally.
	log.Reset()
	s.Mail = nil
	s.Messenger = &recorder{from: "alice"}
	if res := e.Run(context.Background(), s); res.Outcome != engine.Success || !strings.Contains(log.String(), `send_message error: send_message: argument "to" must not be empty`) {
		t.Errorf("no mail: %+v\n%s", res, log.String())
	}
}

func TestWaitInjected(t *testing.T) {
	root, wt := repoWithWorktree(t, "alice")
	write(t, filepath.Join(root, ".swarm", "scripts", "alice.toml"), example)
	var waits []time.Duration
	e := New(Options{Wait: func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}})
	s := session("alice", root, wt, 1, nil)
	s.Mode = mode.Review // bash is refused; the script carries on
	res := e.Run(context.Background(), s)
	if res.Outcome != engine.Success || res.Turns != 2 || !slices.Equal(waits, []time.Duration{2 * time.Second}) {
		t.Errorf("result %+v, waits %v", res, waits)
	}
}

func TestWaitCancelled(t *testing.T) {
	root, wt := repoWithWorktree(t, "alice")
	write(t, filepath.Join(root, ".swarm", "scripts", "alice.toml"), "[[session]]\n[[session.turn]]\nwait = \"1h\"\ntext = \"never\"\n")
	waiting := make(chan struct{})
	e := New(Options{Wait: func(ctx context.Context, d time.Duration) error {
		close(waiting)
		return sleep(ctx, d) // the real wait, interrupted
	}})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	urgent := errors.New("urgent")
	done := make(chan engine.Result)
	go func() { done <- e.Run(ctx, session("alice", root, wt, 1, nil)) }()
	<-waiting
	cancel(urgent)
	res := <-done
	if res.Outcome != engine.Cancelled || !errors.Is(res.Cause, urgent) {
		t.Errorf("result %+v, want Cancelled by the urgent cause", res)
	}
}

func TestBoundaryInterject(t *testing.T) {
	root, wt := repoWithWorktree(t, "alice")
	write(t, filepath.Join(root, ".swarm", "scripts", "alice.toml"), `
[[session]]
[[session.turn]]
tool = "bash"
args = { command = "echo long job" }
[[session.turn]]
text = "finished"
`)
	var log bytes.Buffer
	s := session("alice", root, wt, 1, &log)
	s.Interject = func(context.Context) []string { return []string{"[URGENT] From operator: also update the docs"} }
	res := New(Options{}).Run(context.Background(), s)
	if res.Outcome != engine.Success {
		t.Fatalf("%+v", res)
	}
	if !strings.Contains(log.String(), "[interjected at the tool boundary]\n  [URGENT] From operator: also update the docs\n\n[model 2]\n  finished") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestScriptErrors(t *testing.T) {
	root, wt := repoWithWorktree(t, "alice")
	missing := filepath.Join(root, "scripts", "nope.toml")
	e := New(Options{Paths: map[string]string{"alice": missing}, Logger: slog.New(slog.DiscardHandler)})
	var log bytes.Buffer
	res := e.Run(context.Background(), session("alice", root, wt, 1, &log))
	if res.Outcome != engine.Failed || !strings.Contains(res.Err.Error(), "script for agent alice") || !strings.Contains(log.String(), "script error") {
		t.Errorf("missing explicit script: %+v\n%s", res, log.String())
	}
	if e.(engine.WorkSource).HasWork("alice", 1) {
		t.Error("HasWork true for an unreadable script")
	}

	write(t, filepath.Join(root, ".swarm", "scripts", "bob.toml"), "[[session]]\n[[session.turn]]\ntool = \"bsh\"\n")
	write(t, filepath.Join(root, ".swarm", "scripts", "carol.toml"), "[[session]]\n[[session.turn]]\ntext = \"ok\"\n")
	err := New(Options{Root: root}).(engine.Preflight).Preflight(context.Background())
	if err == nil || !strings.Contains(err.Error(), "bob.toml:3: unknown tool \"bsh\"") || strings.Contains(err.Error(), "carol") {
		t.Errorf("preflight = %v", err)
	}
	res = New(Options{}).Run(context.Background(), session("bob", root, wt, 1, nil))
	if res.Outcome != engine.Failed || !strings.Contains(res.Err.Error(), "bob.toml:3") {
		t.Errorf("bad script run: %+v", res)
	}
	if err := New(Options{Root: t.TempDir()}).(engine.Preflight).Preflight(context.Background()); err != nil {
		t.Errorf("preflight with no scripts: %v", err)
	}
}

func TestName(t *testing.T) {
	if n := New(Options{}).Name(); n != "script" {
		t.Errorf("Name = %q", n)
	}
	if n := New(Options{Name: "scripted"}).Name(); n != "scripted" {
		t.Errorf("Name = %q", n)
	}
}

// Session N plays block N: the log says which, and warns when a session is
// past the last block, as for a script written after the agent had run.
func TestPlanInTheLog(t *testing.T) {
	root, wt := repoWithWorktree(t, "ender")
	dir := filepath.Join(root, ".swarm", "scripts")
	two := "[[session]]\n[[session.turn]]\ntext = \"one\"\n[[session]]\n[[session.turn]]\ntext = \"two\"\n"
	write(t, filepath.Join(dir, "ender.toml"), two)
	write(t, filepath.Join(dir, "looper.toml"), "after = \"repeat\"\n"+two)
	e := New(Options{Root: root})
	for _, tc := range []struct {
		agent string
		seq   int64
		want  string
	}{
		{"ender", 2, "script: session 2 of ender plays block 2 of 2 of .swarm/scripts/ender.toml\n"},
		{"ender", 6, "script: warning: session 6 of ender is past the last of the 2 block(s) of .swarm/scripts/ender.toml: the built-in script plays (it reads its mail and ends). Session N plays block N, and ender has run 5 session(s) already: write the blocks to play next as block 6 on, or set after = \"repeat\"\n"},
		{"looper", 3, "script: session 3 of looper plays block 1 of 2 of .swarm/scripts/looper.toml (after = \"repeat\")\n"},
		{"nobody", 1, "script: session 1 of nobody plays the built-in script (it reads its mail and ends): there is no .swarm/scripts/nobody.toml\n"},
	} {
		var log bytes.Buffer
		s := session(tc.agent, root, wt, tc.seq, &log)
		s.Model = "gemini-2.5-flash" // the default model: a script names none
		if res := e.Run(context.Background(), s); res.Outcome != engine.Success {
			t.Fatalf("%s session %d: %+v", tc.agent, tc.seq, res)
		}
		if !strings.Contains(log.String(), tc.want) {
			t.Errorf("%s session %d log lacks %q:\n%s", tc.agent, tc.seq, tc.want, log.String())
		}
		if strings.Contains(log.String(), "gemini") {
			t.Errorf("the script engine's log names a Gemini model:\n%s", log.String())
		}
		p, err := e.(*Engine).Plan(tc.agent, tc.seq)
		if err != nil || "script: "+p.String()+"\n" != tc.want {
			t.Errorf("Plan(%s, %d) = %q, %v", tc.agent, tc.seq, p, err)
		}
	}
}

func TestAfterMailHasNoWorkOfItsOwn(t *testing.T) {
	f, err := Parse([]byte("after = \"mail\"\n[[session]]\n[[session.turn]]\ntext = \"a\"\n[[session]]\n[[session.turn]]\ntext = \"b\"\n"), "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 5; seq++ {
		if f.HasWork(seq) {
			t.Errorf("session %d has work of its own", seq)
		}
		b, ok := f.Block(seq)
		want := []string{"a", "b"}[(seq-1)%2]
		if !ok || b.Turns[0].Text != want {
			t.Errorf("session %d plays %+v, want the block of %q", seq, b, want)
		}
	}
}
