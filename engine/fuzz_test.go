package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mode"
)

// FuzzToolArgs feeds arbitrary JSON arguments to every tool's parser. It
// must never panic, and what it accepts must satisfy each tool's rules.
func FuzzToolArgs(f *testing.F) {
	f.Add("bash", []byte(`{"command":"go test ./...","timeout_seconds":30}`))
	f.Add("read_file", []byte(`{"path":"a.go","start_line":"2","end_line":4.0}`))
	f.Add("edit_file", []byte(`{"path":"a.go","old":"x","new":""}`))
	f.Add("send_message", []byte(`{"to":"bob","body":"hi","urgent":"true","reply_to":12}`))
	f.Add("list_files", []byte(`{"recursive":null}`))
	f.Add("bd_close", []byte(`{"id":"bd-1","reason":7}`))
	f.Fuzz(func(t *testing.T, tool string, raw []byte) {
		var args map[string]any
		if json.Unmarshal(raw, &args) != nil {
			return
		}
		parsed, err := parseArgs(tool, args)
		if err != nil {
			if !strings.HasPrefix(err.Error(), tool+": ") && !strings.HasPrefix(err.Error(), "unknown tool") {
				t.Fatalf("error does not name the tool: %v", err)
			}
			return
		}
		switch a := parsed.(type) {
		case bashArgs:
			if strings.TrimSpace(a.Command) == "" || a.Timeout < time.Second || a.Timeout > MaxBashTimeout {
				t.Fatalf("accepted %+v", a)
			}
		case readArgs:
			if a.Path == "" || a.Start < 0 || a.End < 0 || (a.Start > 0 && a.End > 0 && a.End < a.Start) {
				t.Fatalf("accepted %+v", a)
			}
		case editArgs:
			if a.Path == "" || a.Old == "" {
				t.Fatalf("accepted %+v", a)
			}
		case sendArgs:
			if a.To == "" || strings.TrimSpace(a.Body) == "" || a.ReplyTo < 0 {
				t.Fatalf("accepted %+v", a)
			}
		case taskArgs:
			if a.ID == "" {
				t.Fatalf("accepted %+v", a)
			}
		}
		if !slices.Contains(mode.AllTools, tool) {
			t.Fatalf("accepted unknown tool %q", tool)
		}
	})
}

// FuzzSandboxPath checks that whatever path a model sends, the sandbox
// either refuses it or resolves it inside the worktree.
func FuzzSandboxPath(f *testing.F) {
	for _, p := range []string{"a.txt", "../x", "/etc/passwd", "out/x", "in/../../x", "in/new/f", "dangling", "", ".", "./in//x/", "out"} {
		f.Add(p)
	}
	dir := f.TempDir()
	root := filepath.Join(dir, "wt")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{"out": outside, "in": "sub", "dangling": filepath.Join(outside, "nope")} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	sb, err := newSandbox(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { sb.close() })
	f.Fuzz(func(t *testing.T, p string) {
		got, err := sb.resolve(p)
		if err != nil {
			if !strings.Contains(err.Error(), "path") {
				t.Fatalf("unclear refusal: %v", err)
			}
			return
		}
		if _, ok := within(sb.root, got); !ok {
			t.Fatalf("resolve(%q) = %s, outside %s", p, got, sb.root)
		}
		// The tools open the name through the worktree's os.Root; in a
		// tree nobody is changing, it must agree with resolve.
		name, err := sb.name(p)
		if err != nil || filepath.Join(sb.root, name) != got {
			t.Fatalf("name(%q) = %q, %v; resolve gave %s", p, name, err, got)
		}
		if _, err := sb.dir.Lstat(name); isEscape(err) {
			t.Fatalf("resolve(%q) passed %s, which os.Root calls an escape: %v", p, name, err)
		}
		// Whatever exists of the result must really be inside.
		for cur := got; ; cur = filepath.Dir(cur) {
			if real, err := filepath.EvalSymlinks(cur); err == nil {
				if _, ok := within(sb.root, real); !ok {
					t.Fatalf("resolve(%q) = %s, which really is %s", p, got, real)
				}
				break
			}
			if cur == filepath.Dir(cur) {
				break
			}
		}
	})
}
