package tomlfile

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// Shapes like swarm.toml's and the script engine's: embedded structs,
// pointers, maps of tables, arrays of tables, free-form maps and values.
type fzSettings struct {
	Engine *string `toml:"engine"`
	Turns  *int    `toml:"max_turns"`
}

type fzAgent struct {
	Name string `toml:"name"`
	fzSettings
	Tags []string `toml:"tags"`
}

type fzTurn struct {
	Tool string         `toml:"tool"`
	Args map[string]any `toml:"args"`
	Wait string         `toml:"wait"`
}

type fzSession struct {
	Turn []fzTurn `toml:"turn"`
}

type fzFile struct {
	Defaults fzSettings          `toml:"defaults"`
	Agent    []fzAgent           `toml:"agent"`
	Engine   map[string]fzEngine `toml:"engine"`
	Session  []*fzSession        `toml:"session"`
	Env      struct {
		Pass []string `toml:"pass"`
	} `toml:"env"`
	Free   any        `toml:"free"`
	Size   any        `toml:"size"`
	Nested [][]fzTurn `toml:"nested"`
	Plain  string
}

type fzEngine struct {
	Kind    string   `toml:"kind"`
	Command []string `toml:"command"`
}

// FuzzUnknownKeys checks the one-pass unknown-key check against the
// decoder's own: it must find an unknown key exactly when the decoder
// does, on the same lines, and never reject what the decoder accepts.
func FuzzUnknownKeys(f *testing.F) {
	for _, s := range []string{
		"[defaults]\nengine = \"x\"\n[[agent]]\nname = \"a\"\nengin = 1\n",
		"[[agents]]\nname = \"a\"\n[[agents]]\n",
		"[engine.c]\nkind = \"exec\"\nkidn = 1\n[engines.d]\n",
		"[[session]]\n[[session.turn]]\ntool = \"bash\"\nwiat = \"1s\"\n[session.turn.args]\nanything = 1\n",
		"agent = [{name = \"a\", engin = 1}, {Name = \"b\", TAGS = [\"x\"]}]\n",
		"free = {a = {b = 1}}\nsize = [1, {x = 2}]\nplain = \"p\"\nPlain = \"q\"\n",
		"nested = [[{tool = \"a\", toll = 1}], []]\n",
		"defaults.engine = \"x\"\ndefaults.bogus.deep = 1\n",
		"[env]\npass = [\"A\"]\npas = 1\n",
		"[agent.sub]\nx = 1\n",
		"[[session.turn]]\nwait = \"1s\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lineOf := newLineAt(data)
		_, unknown, perr := index(data, lineOf, reflectTypeOf[fzFile]())
		if perr != nil {
			return
		}
		var v fzFile
		dec := toml.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err := dec.Decode(&v)
		var strict *toml.StrictMissingError
		switch {
		case err == nil:
			if len(unknown) > 0 {
				t.Fatalf("the decoder accepts what the check rejects: %v", unknown)
			}
		case errors.As(err, &strict):
			var want []int
			for _, e := range strict.Errors {
				line, _ := e.Position()
				want = append(want, line)
			}
			var got []int
			for _, u := range unknown {
				got = append(got, u.line)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("unknown keys on lines %v; the decoder says %v:\n%v", got, want, err)
			}
		default:
			// A type error: the file is rejected either way.
		}
		// The messages must be built without a panic.
		for _, u := range unknown {
			if msg := unknownKeyMessage(&fzFile{}, u.key, lineOf.text(data, u.line), ""); !strings.HasPrefix(msg, "unknown ") {
				t.Fatalf("message %q", msg)
			}
		}
	})
}

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
