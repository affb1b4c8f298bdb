package tomlfile

import (
	"errors"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	doc := `# comment
[defaults]
engine = "x"

[[agent]]
name = "a"
[[agent]]
name = "b"

[engine.claude]
kind = "exec"

[[session]]
[[session.turn]]
tool = "bash"
[[session.turn]]
text = "t"
[session.turn.args]
command = "ls"
[[session]]
[[session.turn]]
wait = "1s"
`
	var v map[string]any
	lines, err := Decode([]byte(doc), "f.toml", &v, "")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{
		"defaults.engine": 3, "agent[0]": 5, "agent[0].name": 6, "agent[1].name": 8,
		"engine.claude": 10, "engine.claude.kind": 11,
		"session[0]": 13, "session[0].turn[0].tool": 15, "session[0].turn[1].text": 17,
		"session[0].turn[1].args.command": 19, "session[1].turn[0].wait": 22,
		"agent[1].missing": 7, "nowhere": 0,
	} {
		if got := lines.Line(key); got != want {
			t.Errorf("Line(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	type S struct {
		Name string `toml:"name"`
		N    int    `toml:"n"`
	}
	for _, tt := range []struct{ doc, want string }{
		{"name = \"a\"\ncolour = 1\n", `f.toml:2: unknown key "colour" at the top level (keys: name, n)`},
		{"name = \"a\"\nn = \"x\"\n", "f.toml:2: n: expected a whole number, got a string"},
		{"name = \n", "f.toml:"},
	} {
		var s S
		_, err := Decode([]byte(tt.doc), "f.toml", &s, "keys: name, n")
		var fe *Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%q) = %v, want %q", tt.doc, err, tt.want)
		}
	}
}

func TestArrayElementLines(t *testing.T) {
	doc := `[env]
pass = [
  "A",   # one a line

  "B",
]
[[agent]]
command = ["x", "y"]
nested = [[1, 2], { a = 1 }]
`
	var v map[string]any
	lines, err := Decode([]byte(doc), "f.toml", &v, "")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{
		"env.pass": 2, "env.pass[0]": 3, "env.pass[1]": 5, "env.pass[2]": 2,
		"agent[0].command[1]": 8, "agent[0].nested[0]": 9, "agent[0].nested[1]": 9,
	} {
		if got := lines.Line(key); got != want {
			t.Errorf("Line(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestLineAt(t *testing.T) {
	data := []byte("a\n\nbc\nd")
	nl := newLineAt(data)
	for off, want := range []int{1, 1, 2, 3, 3, 3, 4} {
		if got := nl.line(off); got != want {
			t.Errorf("line(%d) = %d, want %d", off, got, want)
		}
	}
}
