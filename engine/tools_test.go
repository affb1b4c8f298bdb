package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mode"
)

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// sandboxFixture is a worktree next to an outside directory, with symlinks
// that lead out of it and one that stays in.
func sandboxFixture(t *testing.T) (wt, outside string) {
	t.Helper()
	wt = gitWorktree(t, "alice")
	outside = filepath.Join(t.TempDir(), "outside")
	writeFile(t, filepath.Join(outside, "secret.txt"), "secret\n")
	for link, target := range map[string]string{
		"link-out":    outside,                               // a symlinked directory that escapes
		"secret-link": filepath.Join(outside, "secret.txt"),  // a symlinked file that escapes
		"dangling":    filepath.Join(outside, "missing.txt"), // escapes to a file not yet there
		"src-link":    "src",                                 // stays inside
	} {
		if err := os.Symlink(target, filepath.Join(wt, link)); err != nil {
			t.Fatal(err)
		}
	}
	return wt, outside
}

func TestSandboxEscapes(t *testing.T) {
	wt, outside := sandboxFixture(t)
	s := newSession(wt, nil)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"dot-dot", "../outside.txt", "leaves the worktree through '..'"},
		{"dot-dot deep", "src/../../../x.txt", "leaves the worktree through '..'"},
		{"absolute elsewhere", filepath.Join(outside, "secret.txt"), "is outside the worktree"},
		{"absolute root", "/etc/passwd", "is outside the worktree"},
		{"symlink to outside file", "secret-link", "resolves through a symlink"},
		{"symlinked parent", "link-out/secret.txt", "resolves through a symlink"},
		{"new file under symlinked parent", "link-out/new/file.txt", "resolves through a symlink"},
		{"dangling symlink", "dangling", "cannot resolve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range fileToolCalls(tc.path) {
				r := runTool(t, s, c.tool, c.args)
				if !strings.Contains(r.Error, tc.want) || r.Output != "" {
					t.Errorf("%s %q: result %+v, want an error containing %q", c.tool, tc.path, r, tc.want)
				}
			}
		})
	}
	if got := readFile(t, filepath.Join(outside, "secret.txt")); got != "secret\n" {
		t.Errorf("outside file changed: %q", got)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside directory gained files: %v", entries)
	}
}

func TestSandboxAllows(t *testing.T) {
	wt, _ := sandboxFixture(t)
	s := newSession(wt, nil)
	for _, p := range []string{"src/main.go", "./src/main.go", "src-link/main.go", filepath.Join(wt, "src", "main.go"), "src/../src/main.go"} {
		if r := runTool(t, s, "read_file", map[string]any{"path": p}); r.Error != "" || !strings.Contains(r.Output, "package main") {
			t.Errorf("read %q: %+v", p, r)
		}
	}
	if r := runTool(t, s, "write_file", map[string]any{"path": "src-link/new/deep.txt", "content": "in"}); r.Error != "" {
		t.Errorf("write through an inside symlink: %+v", r)
	}
	if got := readFile(t, filepath.Join(wt, "src", "new", "deep.txt")); got != "in" {
		t.Errorf("deep.txt = %q", got)
	}
}

func TestSandboxWorktreeBehindSymlink(t *testing.T) {
	wt := gitWorktree(t, "alice")
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(wt, alias); err != nil {
		t.Fatal(err)
	}
	s := newSession(alias, nil)
	for _, p := range []string{"README.md", filepath.Join(alias, "README.md"), filepath.Join(wt, "README.md")} {
		if r := runTool(t, s, "read_file", map[string]any{"path": p}); r.Error != "" {
			t.Errorf("read %q via a symlinked worktree: %+v", p, r)
		}
	}
}

func TestReadFileRange(t *testing.T) {
	wt := gitWorktree(t, "alice")
	writeFile(t, filepath.Join(wt, "five.txt"), "one\ntwo\nthree\nfour\nfive\n")
	s := newSession(wt, nil)
	for _, tc := range []struct {
		args map[string]any
		want string
		err  string
	}{
		{map[string]any{"start_line": 2, "end_line": 3}, "two\nthree\n", ""},
		{map[string]any{"start_line": 4.0}, "four\nfive\n", ""},
		{map[string]any{"end_line": "1"}, "one\n", ""},
		{map[string]any{"start_line": 3, "end_line": 99}, "three\nfour\nfive\n", ""},
		{map[string]any{"start_line": 9}, "", "past the end of the file (5 lines)"},
		{map[string]any{"start_line": 3, "end_line": 2}, "", "before start_line"},
		{map[string]any{"start_line": 1.5}, "", "whole number"},
	} {
		tc.args["path"] = "five.txt"
		r := runTool(t, s, "read_file", tc.args)
		if r.Output != tc.want || (tc.err == "") != (r.Error == "") || !strings.Contains(r.Error, tc.err) {
			t.Errorf("%v: %+v, want %q / error %q", tc.args, r, tc.want, tc.err)
		}
	}
	if r := runTool(t, s, "read_file", map[string]any{"path": "src"}); !strings.Contains(r.Error, "is a directory") {
		t.Errorf("directory: %+v", r)
	}
	if r := runTool(t, s, "read_file", map[string]any{"path": "nope.txt"}); !strings.Contains(r.Error, "no such file") {
		t.Errorf("missing: %+v", r)
	}
	writeFile(t, filepath.Join(wt, "bin.dat"), "ab\x00cd")
	if r := runTool(t, s, "read_file", map[string]any{"path": "bin.dat"}); !strings.Contains(r.Error, "binary file") {
		t.Errorf("binary: %+v", r)
	}
	big := strings.Repeat("x", MaxToolOutput+10)
	writeFile(t, filepath.Join(wt, "big.txt"), big)
	if r := runTool(t, s, "read_file", map[string]any{"path": "big.txt"}); !strings.HasPrefix(r.Output, big[:MaxToolOutput]+"\n[... truncated") {
		t.Errorf("big file not truncated with a note: %q", r.Output[MaxToolOutput-5:])
	}
}

func TestEditFile(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	path := filepath.Join(wt, "f.go")
	writeFile(t, path, "a := 1\nb := 1\nc := 2\n")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		old, new, err string
	}{
		{"x := 9", "", "old text not found; read the file"},
		{" := 1", " := 3", "matches 2 places; include more surrounding lines"},
		{"c := 2 ", "", "different leading or trailing whitespace"},
		{"", "x", `"old" must not be empty`},
	} {
		r := runTool(t, s, "edit_file", map[string]any{"path": "f.go", "old": tc.old, "new": tc.new})
		if !strings.Contains(r.Error, tc.err) {
			t.Errorf("old %q: %+v, want error %q", tc.old, r, tc.err)
		}
	}
	if got := readFile(t, path); got != "a := 1\nb := 1\nc := 2\n" {
		t.Fatalf("failed edits changed the file: %q", got)
	}
	r := runTool(t, s, "edit_file", map[string]any{"path": "f.go", "old": "b := 1", "new": "b := 42"})
	if r.Error != "" || !strings.Contains(r.Output, "replaced 1 occurrence") {
		t.Fatalf("edit: %+v", r)
	}
	if got := readFile(t, path); got != "a := 1\nb := 42\nc := 2\n" {
		t.Errorf("after edit: %q", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("edit changed the mode to %v", fi.Mode().Perm())
	}
	if r := runTool(t, s, "edit_file", map[string]any{"path": "nope.go", "old": "a", "new": "b"}); !strings.Contains(r.Error, "no such file") {
		t.Errorf("missing file: %+v", r)
	}
}

func TestWriteFile(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	r := runTool(t, s, "write_file", map[string]any{"path": "a/b/c.txt", "content": "hi"})
	if r.Error != "" || r.Output != "wrote 2 bytes to a/b/c.txt" {
		t.Fatalf("write: %+v", r)
	}
	if got := readFile(t, filepath.Join(wt, "a", "b", "c.txt")); got != "hi" {
		t.Errorf("content %q", got)
	}
	if r := runTool(t, s, "write_file", map[string]any{"path": "src", "content": "x"}); !strings.Contains(r.Error, "is a directory") {
		t.Errorf("write over a directory: %+v", r)
	}
	if r := runTool(t, s, "write_file", map[string]any{"path": "e.txt", "content": ""}); r.Error != "" || !fileExists(filepath.Join(wt, "e.txt")) {
		t.Errorf("empty content: %+v", r)
	}
}

func TestListFiles(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	r := runTool(t, s, "list_files", nil)
	if r.Error != "" || r.Output != "README.md\nsrc/\n" {
		t.Errorf("list root = %q (%s); .git must be skipped", r.Output, r.Error)
	}
	r = runTool(t, s, "list_files", map[string]any{"path": "src", "recursive": true})
	if r.Output != "src/main.go\n" {
		t.Errorf("list src = %q (%s)", r.Output, r.Error)
	}
	r = runTool(t, s, "list_files", map[string]any{"recursive": "true"})
	if r.Output != "README.md\nsrc/\nsrc/main.go\n" {
		t.Errorf("recursive = %q (%s)", r.Output, r.Error)
	}
	for i := range maxListed + 5 {
		writeFile(t, filepath.Join(wt, "many", fmt.Sprintf("f%04d", i)), "")
	}
	r = runTool(t, s, "list_files", map[string]any{"path": "many"})
	if n := strings.Count(r.Output, "many/f"); n != maxListed || !strings.Contains(r.Output, "truncated at 1000 entries") {
		t.Errorf("listed %d entries, want the cap %d with a note", n, maxListed)
	}
	if r := runTool(t, s, "list_files", map[string]any{"path": "README.md"}); !strings.Contains(r.Error, "not a directory") {
		t.Errorf("list a file: %+v", r)
	}
}

func TestGrep(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	writeFile(t, filepath.Join(wt, "src", "util.go"), "package main\n\nfunc helper() int { return 1 }\n")
	writeFile(t, filepath.Join(wt, "bin.dat"), "func \x00 binary")
	r := runTool(t, s, "grep", map[string]any{"pattern": `^func \w+\(`})
	if r.Error != "" || r.Output != "src/main.go:3: func main() {}\nsrc/util.go:3: func helper() int { return 1 }\n" {
		t.Errorf("grep = %q (%s)", r.Output, r.Error)
	}
	r = runTool(t, s, "grep", map[string]any{"pattern": "package", "path": "src/util.go"})
	if r.Output != "src/util.go:1: package main\n" {
		t.Errorf("grep one file = %q (%s)", r.Output, r.Error)
	}
	if r := runTool(t, s, "grep", map[string]any{"pattern": "nothing-here"}); r.Output != "no matches\n" {
		t.Errorf("no match = %+v", r)
	}
	if r := runTool(t, s, "grep", map[string]any{"pattern": "func("}); !strings.Contains(r.Error, "bad pattern") {
		t.Errorf("bad pattern: %+v", r)
	}
	writeFile(t, filepath.Join(wt, "hits.txt"), strings.Repeat("hit\n", maxGrepHits+1))
	r = runTool(t, s, "grep", map[string]any{"pattern": "hit", "path": "hits.txt"})
	if n := strings.Count(r.Output, ": hit\n"); n != maxGrepHits || !strings.Contains(r.Output, "stopped at 200 matches") {
		t.Errorf("grep returned %d hits, want the cap with a note", n)
	}
}

func TestBashOutputCap(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	r := runTool(t, s, "bash", map[string]any{"command": "echo FIRST; seq 1 100000; echo LAST >&2"})
	if r.Error != "" {
		t.Fatalf("bash: %+v", r)
	}
	if !strings.HasPrefix(r.Output, "FIRST\n1\n2\n3\n") {
		t.Errorf("head lost: %q", r.Output[:40])
	}
	if !strings.HasSuffix(r.Output, "99999\n100000\nLAST\n[exit status 0]\n") {
		t.Errorf("tail lost: %q", r.Output[len(r.Output)-60:])
	}
	if !strings.Contains(r.Output, "bytes omitted: output is capped at 64 KiB, keeping the head and the tail") {
		t.Errorf("no truncation marker")
	}
	if len(r.Output) > MaxToolOutput+200 {
		t.Errorf("output is %d bytes, cap %d", len(r.Output), MaxToolOutput)
	}
}

func TestHeadTail(t *testing.T) {
	h := newHeadTail(10)
	for _, c := range "abcdefghijklmnopqrstuvwxyz" {
		h.Write([]byte{byte(c)})
	}
	if got := h.String(); !strings.HasPrefix(got, "abcde\n[... 16 bytes omitted") || !strings.HasSuffix(got, "...]\nvwxyz") {
		t.Errorf("headTail = %q", got)
	}
	small := newHeadTail(10)
	small.Write([]byte("0123456789"))
	if got := small.String(); got != "0123456789" {
		t.Errorf("exactly the limit = %q", got)
	}
	utf := newHeadTail(8)
	utf.Write([]byte("ééééééééé")) // 18 bytes, two per rune
	if got := utf.String(); !strings.HasPrefix(got, "éé\n") || !strings.HasSuffix(got, "\néé") {
		t.Errorf("runes split: %q", got)
	}
}

func TestBashExitAndTimeout(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	var pgids []int
	s.OnProcess = func(pgid int) { pgids = append(pgids, pgid) }
	r := runTool(t, s, "bash", map[string]any{"command": "pwd; echo oops >&2; exit 3"})
	if r.Error != "" || r.Output != wt+"\noops\n[exit status 3]\n" {
		t.Errorf("exit 3: %+v", r)
	}
	if r := runTool(t, s, "bash", map[string]any{"command": "true"}); r.Output != "(no output)\n[exit status 0]\n" {
		t.Errorf("no output: %+v", r)
	}
	r = runTool(t, s, "bash", map[string]any{"command": "echo started; exec sleep 60", "timeout_seconds": 1})
	if !strings.Contains(r.Error, "timed out after 1s") || !strings.HasPrefix(r.Output, "started\n") {
		t.Errorf("timeout: %+v", r)
	}
	if len(pgids) != 3 {
		t.Fatalf("OnProcess called %d times, want 3", len(pgids))
	}
	if !groupGone(pgids[2]) {
		t.Errorf("timed-out group %d still alive", pgids[2])
	}
	if r := runTool(t, s, "bash", map[string]any{"command": "true", "timeout_seconds": 0}); !strings.Contains(r.Error, "between 1 and 3600") {
		t.Errorf("timeout 0: %+v", r)
	}
}

func TestBashBackgroundKilled(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	var pgid int
	s.OnProcess = func(p int) { pgid = p }
	// The background sleep closes its output, so the call returns at
	// once; it must not outlive the call.
	r := runTool(t, s, "bash", map[string]any{"command": "sleep 60 >/dev/null 2>&1 & echo bg"})
	if r.Error != "" || r.Output != "bg\n[exit status 0]\n" {
		t.Fatalf("bash: %+v", r)
	}
	if !groupGone(pgid) {
		t.Errorf("background process of group %d survived the call", pgid)
	}
}

func TestBashEnvironment(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	s.Env = SessionEnv(append(os.Environ(), "GEMINI_API_KEY=sk-gemini", "GITHUB_TOKEN=ghp-x", "MY_SERVICE_API_KEY=k",
		"DATABASE_URL=postgres://app:hunter2@db/app", "NPM_AUTH=n"), s)
	s.EnvPass = []string{"NPM_AUTH"} // [env] pass
	r := runTool(t, s, "bash", map[string]any{"command": "env"})
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	for _, want := range []string{"SWARM_AGENT=alice", "SWARM_SESSION_SEQ=1", "BD_ACTOR=alice", "GIT_AUTHOR_NAME=swarm/alice", "NPM_AUTH=n"} {
		if !strings.Contains(r.Output, want+"\n") {
			t.Errorf("env lacks %s", want)
		}
	}
	for _, bad := range []string{"GEMINI_API_KEY", "GITHUB_TOKEN", "MY_SERVICE_API_KEY", "sk-gemini", "hunter2"} {
		if strings.Contains(r.Output, bad) {
			t.Errorf("env leaks %s", bad)
		}
	}
	// With no explicit environment the session variables are still set.
	t.Setenv("GEMINI_API_KEY", "sk-from-process")
	s.Env = nil
	r = runTool(t, s, "bash", map[string]any{"command": "env"})
	if !strings.Contains(r.Output, "SWARM_AGENT=alice\n") || strings.Contains(r.Output, "sk-from-process") {
		t.Errorf("default env: %s", r.Output)
	}
}

func TestSendMessage(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	msgr := &fakeMessenger{from: s.Agent}
	s.Messenger = msgr
	r := runTool(t, s, "send_message", map[string]any{"to": "bob", "body": "the API is ready", "urgent": true, "reply_to": 7.0})
	if r.Error != "" || r.Output != "sent urgent message 101 to bob" {
		t.Fatalf("send: %+v", r)
	}
	r = runTool(t, s, "send_message", map[string]any{"to": "operator", "body": "done", "reply_to": ""})
	if r.Output != "sent message 102 to operator" {
		t.Fatalf("send: %+v", r)
	}
	want := []sent{{From: "alice", To: "bob", Body: "the API is ready", Urgent: true, ReplyTo: 7}, {From: "alice", To: "operator", Body: "done"}}
	if fmt.Sprint(msgr.sent) != fmt.Sprint(want) {
		t.Errorf("sent %+v\nwant %+v", msgr.sent, want)
	}
	if r := runTool(t, s, "send_message", map[string]any{"to": "alice", "body": "me"}); !strings.Contains(r.Error, "you are alice") {
		t.Errorf("send to self: %+v", r)
	}
	msgr.err = errors.New(`unknown recipient "carol"`)
	if r := runTool(t, s, "send_message", map[string]any{"to": "carol", "body": "hi"}); !strings.Contains(r.Error, `send_message to carol failed: unknown recipient "carol"`) {
		t.Errorf("messenger error: %+v", r)
	}
	s.Messenger = nil
	if r := runTool(t, s, "send_message", map[string]any{"to": "bob", "body": "hi"}); !strings.Contains(r.Error, "messaging is not wired") {
		t.Errorf("no messenger: %+v", r)
	}
}

func TestBeadsTools(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	board := &fakeBoard{}
	s.Tasks = board
	m := &fakeModel{reply: sequence(
		callTurn(call(mode.BDClaim, map[string]any{"id": "bd-2"})),
		callTurn(call(mode.BDClaim, map[string]any{"id": "bd-1"}), call(mode.BDShow, map[string]any{"id": "bd-404"})),
		callTurn(call(mode.BDClose, map[string]any{"id": "bd-1", "reason": "shipped"}), call(mode.BDShow, map[string]any{"id": "bd-1"})),
	)}
	res := (&Loop{Model: m}).Run(context.Background(), s)
	if res.Outcome != Success {
		t.Fatalf("a lost claim must not end the session: %+v", res)
	}
	lost := resultsOf(t, m, 2)[0]
	if !strings.Contains(lost.Error, "bd_claim bd-2 failed: bd exited with status 1: Error: issue bd-2 is already claimed by bob") {
		t.Errorf("lost claim = %+v", lost)
	}
	r3 := resultsOf(t, m, 3)
	if !strings.HasPrefix(r3[0].Output, "claimed bd-1\n[\n  {\n") || !strings.Contains(r3[1].Error, `no issue found matching "bd-404"`) {
		t.Errorf("claim/show = %+v", r3)
	}
	r4 := resultsOf(t, m, 4)
	if !strings.HasPrefix(r4[0].Output, "closed bd-1") || !strings.Contains(r4[1].Output, "Add the users endpoint") {
		t.Errorf("close/show = %+v", r4)
	}
	want := "claim bd-2|claim bd-1|show bd-404|close bd-1 shipped|show bd-1"
	if got := strings.Join(board.calls, "|"); got != want {
		t.Errorf("board calls %q, want %q", got, want)
	}
}

type fakeEscalator struct {
	reqs []EscalationRequest
	res  EscalationResult
	err  error
}

func (f *fakeEscalator) Escalate(_ context.Context, r EscalationRequest) (EscalationResult, error) {
	f.reqs = append(f.reqs, r)
	return f.res, f.err
}

func TestEscalateTool(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	esc := &fakeEscalator{res: EscalationResult{ID: 3, Count: 1, Created: true, Hold: true}}
	s.Escalator = esc
	r := runTool(t, s, "escalate", map[string]any{"summary": " which schema? ", "hold": true, "severity": "critical",
		"ref": "msg:4", "details": map[string]any{"options": []any{"a", "b"}}})
	if r.Error != "" || !strings.HasPrefix(r.Output, "escalation 3 opened") || !strings.Contains(r.Output, "You are held") {
		t.Fatalf("escalate: %+v", r)
	}
	got := esc.reqs[0]
	if got.Summary != "which schema?" || !got.Hold || got.Severity != "critical" || got.Ref != "msg:4" || string(got.Details) != `{"options":["a","b"]}` {
		t.Fatalf("request = %+v (details %s)", got, got.Details)
	}
	// Details may come as JSON text; a repeat reports the count.
	esc.res = EscalationResult{ID: 3, Count: 2}
	r = runTool(t, s, "escalate", map[string]any{"summary": "which schema?", "details": `{"a": 1}`, "approval": "true"})
	if r.Error != "" || !strings.Contains(r.Output, "already open: counted (2 times)") || strings.Contains(r.Output, "held") {
		t.Fatalf("repeat: %+v", r)
	}
	if got := esc.reqs[1]; string(got.Details) != `{"a": 1}` || !got.Approval {
		t.Fatalf("request = %+v", got)
	}
	for args, want := range map[string]map[string]any{
		`argument "details" must be a JSON object`:           {"summary": "x", "details": "not json"},
		`argument "details" must be an object, got a number`: {"summary": "x", "details": 3.0},
		`severity must be info, warning or critical`:         {"summary": "x", "severity": "dire"},
		`missing required argument "summary"`:                {"hold": true},
	} {
		if r := runTool(t, s, "escalate", want); !strings.Contains(r.Error, args) {
			t.Errorf("%v: %+v", want, r)
		}
	}
	if len(esc.reqs) != 2 {
		t.Errorf("bad calls reached the escalator: %+v", esc.reqs)
	}
	s.Escalator = nil
	if r := runTool(t, s, "escalate", map[string]any{"summary": "x"}); !strings.Contains(r.Error, "swarm escalate") {
		t.Errorf("no escalator: %+v", r)
	}
}

type fakeProtocol struct {
	sent []ProtocolMessage
	acks []string
	err  error
}

func (f *fakeProtocol) Send(_ context.Context, m ProtocolMessage) (ProtocolSent, error) {
	if f.err != nil {
		return ProtocolSent{}, f.err
	}
	f.sent = append(f.sent, m)
	return ProtocolSent{ID: 7, MsgID: m.Type + "-" + m.TaskID + "-1763900000123", To: m.To, AckTimeout: m.AckTimeout}, nil
}

func (f *fakeProtocol) Ack(_ context.Context, ref string, all bool) ([]ProtocolSent, error) {
	if f.err != nil {
		return nil, f.err
	}
	if all {
		ref = "*"
	}
	f.acks = append(f.acks, ref)
	return []ProtocolSent{{ID: 8, MsgID: "ack-T-1-1763900000124", To: "lead"}}, nil
}

func TestProtocolTools(t *testing.T) {
	wt := gitWorktree(t, "alice")
	s := newSession(wt, nil)
	p := &fakeProtocol{}
	s.Protocol = p
	// Who may dispatch is the verb's rule (swarm.Protocol.Send, with the
	// session's caller: TestSendChecksTheCaller), not the tool's.
	s.Mode = mode.Delegate
	r := runTool(t, s, "send_protocol", map[string]any{"type": "task_dispatch", "to": "bob", "task_id": "T-1",
		"payload":     map[string]any{"description": "x && y < z", "acceptance_criteria": []any{"a"}},
		"context_ref": []any{"task_result-T-1-1763900000000"}, "ack_timeout_seconds": 120})
	if r.Error != "" || !strings.HasPrefix(r.Output, "sent task_dispatch-T-1-1763900000123 (message 7) to bob") || !strings.Contains(r.Output, "within 2m0s") {
		t.Fatalf("send_protocol: %+v", r)
	}
	got := p.sent[0]
	if got.Type != "task_dispatch" || got.AckTimeout != 2*time.Minute || len(got.ContextRef) != 1 ||
		string(got.Payload) != `{"acceptance_criteria":["a"],"description":"x && y < z"}` {
		t.Fatalf("message = %+v (payload %s)", got, got.Payload)
	}
	// A reply needs neither to nor task_id; the payload may come as text.
	r = runTool(t, s, "send_protocol", map[string]any{"type": "task_result", "reply_to": "12", "payload": `{"status": "completed"}`})
	if r.Error != "" || p.sent[1].ReplyTo != "12" || string(p.sent[1].Payload) != `{"status": "completed"}` {
		t.Fatalf("reply: %+v, %+v", r, p.sent[1])
	}
	for want, args := range map[string]map[string]any{
		`give "to"`:                                 {"type": "task_dispatch", "task_id": "T-1", "payload": map[string]any{}},
		`give "task_id"`:                            {"type": "task_dispatch", "to": "bob", "payload": map[string]any{}},
		`missing required argument "payload"`:       {"type": "task_dispatch", "to": "bob", "task_id": "T-1"},
		`ack_timeout_seconds must be between`:       {"type": "ping", "to": "bob", "task_id": "team-x", "payload": map[string]any{}, "ack_timeout_seconds": 0},
		`"context_ref" must be an array of strings`: {"type": "ping", "to": "bob", "task_id": "T", "payload": map[string]any{}, "context_ref": []any{1.0}},
	} {
		if r := runTool(t, s, "send_protocol", args); !strings.Contains(r.Error, want) {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if len(p.sent) != 2 {
		t.Errorf("bad calls reached the service: %+v", p.sent)
	}
	// A refusal from the service goes back whole: every failing field.
	p.err = errors.New("payload.acceptance_criteria: must contain at least 1 item\npayload.branch: must not be blank")
	if r := runTool(t, s, "send_protocol", map[string]any{"type": "task_dispatch", "to": "bob", "task_id": "T-1", "payload": map[string]any{}}); !strings.Contains(r.Error, "nothing was sent") || !strings.Contains(r.Error, "payload.branch") {
		t.Errorf("refusal: %+v", r)
	}
	p.err = nil

	if r := runTool(t, s, "ack", map[string]any{"msg_id": "task_dispatch-T-1-1"}); r.Error != "" || !strings.Contains(r.Output, "acknowledged") || p.acks[0] != "task_dispatch-T-1-1" {
		t.Fatalf("ack: %+v", r)
	}
	if r := runTool(t, s, "ack", map[string]any{"all": true}); r.Error != "" || p.acks[1] != "*" {
		t.Fatalf("ack all: %+v", r)
	}
	for _, args := range []map[string]any{{}, {"msg_id": "x", "all": true}} {
		if r := runTool(t, s, "ack", args); !strings.Contains(r.Error, `either "msg_id"`) {
			t.Errorf("%v: %+v", args, r)
		}
	}
	s.Protocol = nil
	if r := runTool(t, s, "ack", map[string]any{"all": true}); !strings.Contains(r.Error, "swarm ack") {
		t.Errorf("no protocol: %+v", r)
	}
}
