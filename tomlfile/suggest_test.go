package tomlfile

import (
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	keys := []string{"name", "role", "script", "engine", "model", "mode", "session_timeout", "max_turns", "interrupt", "interrupt_grace"}
	agents := []string{"backend", "frontend", "lead", "reviewer", "db"}
	for _, tt := range []struct {
		word       string
		candidates []string
		want       string
	}{
		{"engin", keys, "engine"},
		{"enigne", keys, "engine"}, // a swap counts once
		{"Engine", keys, "engine"},
		{"nmae", keys, "name"},
		{"session-timeout", keys, "session_timeout"},
		{"sessiontimeout", keys, "session_timeout"},
		{"MaxTurns", keys, "max_turns"},
		{"max_turn", keys, "max_turns"},
		{"interupt", keys, "interrupt"},
		{"modle", keys, "model"}, // "mode" is two edits away, "model" one
		{"colour", keys, ""},
		{"x", keys, ""},
		{"", keys, ""},
		{"agents", []string{"defaults", "agent", "engine"}, "agent"},
		{"Backend", agents, "backend"},
		{"BACKEND", agents, "backend"},
		{"backnd", agents, "backend"},
		{"frontent", agents, "frontend"},
		{"reviewr", agents, "reviewer"},
		{"dv", agents, "db"},
		{"bd", agents, "db"},
		{"xy", agents, ""},
		{"lead", agents, "lead"},
		{"ops", agents, ""},
		{"backend", nil, ""},
		{"b", []string{"a", "b"}, "b"},
		{"ünïcode", []string{"unicode", "ünïcode2"}, "ünïcode2"},
		{strings.Repeat("a", 10000), keys, ""},
	} {
		if got := Suggest(tt.word, tt.candidates); got != tt.want {
			t.Errorf("Suggest(%.20q, %v) = %q, want %q", tt.word, tt.candidates, got, tt.want)
		}
	}
}

func TestSuggestTiesGoToTheFirst(t *testing.T) {
	if got := Suggest("cat", []string{"bat", "hat", "cot"}); got != "bat" {
		t.Errorf("Suggest = %q, want the first of the equally near", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"ab", "ba", 1}, {"ca", "abc", 3}, {"engine", "engin", 1}, {"flaw", "lawn", 2},
	} {
		if got := distance([]rune(tt.a), []rune(tt.b), 100); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := distance([]rune(tt.b), []rune(tt.a), 100); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
	if got := distance([]rune("aaaaaaaa"), []rune("bbbbbbbb"), 2); got < 2 {
		t.Errorf("bounded distance = %d, want at least the bound", got)
	}
}

func TestUnknownKeyMessages(t *testing.T) {
	type turn struct {
		Wait string         `toml:"wait"`
		Text string         `toml:"text"`
		Args map[string]any `toml:"args"`
	}
	type session struct {
		Turn []turn `toml:"turn"`
	}
	type engine struct {
		Kind string `toml:"kind"`
	}
	type file struct {
		After   string            `toml:"after"`
		Session []session         `toml:"session"`
		Engine  map[string]engine `toml:"engine"`
		Extra   struct {
			Dir string `toml:"dir"`
		} `toml:"extra"`
	}
	for _, tt := range []struct{ doc, hint, want string }{
		{"afer = \"end\"\n", "", `f.toml:1: unknown key "afer" at the top level; did you mean "after"?`},
		{"[[session]]\n[[session.turn]]\nwiat = \"1s\"\n", "", `f.toml:3: unknown key "wiat" in [[session.turn]]; did you mean "wait"?`},
		{"[[session]]\n[[session.turn]]\ncolour = 1\n", "", `f.toml:3: unknown key "colour" in [[session.turn]] (valid: wait, text, [args])`},
		{"[[session]]\n[[session.turn]]\ncolour = 1\n", "a turn has wait and text", `f.toml:3: unknown key "colour" in [[session.turn]] (a turn has wait and text)`},
		{"[[sessions]]\n", "", `f.toml:1: unknown table [[sessions]]; did you mean [[session]]?`},
		{"[[session]]\n[[session.trun]]\n", "", `f.toml:2: unknown table [[session.trun]]; did you mean [[session.turn]]?`},
		{"[engines.\"my x\"]\nkind = 1\n", "", `f.toml:1: unknown table [engines."my x"]; did you mean [engine."my x"]?`},
		{"[engine.a]\nknd = \"x\"\n", "", `f.toml:2: unknown key "knd" in [engine.a]; did you mean "kind"?`},
		{"[extra]\ndirs = \"x\"\n", "", `f.toml:2: unknown key "dirs" in [extra]; did you mean "dir"?`},
		{"[extr]\n", "", `f.toml:1: unknown table [extr]; did you mean [extra]?`},
		{"[bogus]\n", "", `f.toml:1: unknown table [bogus] (valid: after, [[session]], [engine.NAME], [extra])`},
		{"[extra]\nq.r = 1\n", "", `f.toml:2: unknown key "q" in [extra] (valid: dir)`},
		{"after = \"end\"\nsession = 3\n", "", `f.toml:2: session: expected [[array table]] entries, got an integer`},
		{"engine = \"x\"\n", "", `f.toml:1: engine: expected a table, got a string`},
	} {
		var f file
		_, err := Decode([]byte(tt.doc), "f.toml", &f, tt.hint)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Decode(%q) =\n  %v\nwant\n  %s", tt.doc, err, tt.want)
		}
	}
}
