// Package tomlfile decodes TOML files strictly and remembers the line of
// every key, so a mistake is reported as file:line whether the decoder
// finds it (an unknown key, a wrong type) or the caller's own checks do
// (a bad name, a bad duration). swarm.toml and the script engine's files
// share it.
//
// It uses github.com/pelletier/go-toml/v2: its decoder rejects unknown keys
// with their positions, and its parser gives every key's position.
package tomlfile

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Error is a problem at a place in a file.
type Error struct {
	File string
	Line int // 0 when the problem has no single line
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Lines maps key paths to the lines they are written on. Array tables are
// numbered within their parent: "agent[1].name", "session[0].turn[2].wait",
// "engine.claude.kind".
type Lines map[string]int

// Line returns the line of key, or of its nearest enclosing table when the
// key itself is absent (for errors about a missing key); 0 if none.
func (l Lines) Line(key string) int {
	for k := key; k != ""; {
		if n, ok := l[k]; ok {
			return n
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// Decode decodes data into v, rejecting unknown keys, and returns the line
// index. file names the file in errors; hint, when set, is added to
// unknown-key errors to say what is allowed.
func Decode(data []byte, file string, v any, hint string) (Lines, error) {
	// The decoder first: its syntax errors carry positions.
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, decodeError(file, err, hint)
	}
	lines, err := index(data)
	if err != nil {
		return nil, decodeError(file, err, hint)
	}
	return lines, nil
}

func decodeError(file string, err error, hint string) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var errs []error
		for _, e := range strict.Errors {
			line, _ := e.Position()
			msg := fmt.Sprintf("unknown key %q", strings.Join(e.Key(), "."))
			if hint != "" {
				msg += " (" + hint + ")"
			}
			errs = append(errs, &Error{File: file, Line: line, Msg: msg})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		msg := plainTypeError(strings.TrimPrefix(de.Error(), "toml: "))
		if k := de.Key(); len(k) > 0 {
			msg = fmt.Sprintf("%s: %s", strings.Join(k, "."), msg)
		}
		return &Error{File: file, Line: line, Msg: msg}
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		return &Error{File: file, Msg: pe.Error()}
	}
	return &Error{File: file, Msg: err.Error()}
}

var typeError = regexp.MustCompile(`^cannot decode TOML (\w+) into struct field \S+ of type (\S+)$`)

// plainTypeError turns the decoder's wording, which names Go types and
// fields, into what a user wrote and what was wanted.
func plainTypeError(msg string) string {
	m := typeError.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want := map[string]string{
		"int": "a whole number", "int64": "a whole number", "bool": "true or false",
		"string": "a quoted string", "[]string": "a list of strings",
	}[strings.TrimPrefix(m[2], "*")]
	if want == "" {
		return msg
	}
	return fmt.Sprintf("expected %s, got a %s", want, m[1])
}

func index(data []byte) (Lines, error) {
	idx := Lines{}
	counts := map[string]int{}     // array-table path -> elements so far
	current := map[string]string{} // dotted array-table key -> its newest element's path
	resolve := func(parts []string) string {
		path := ""
		for i, part := range parts {
			if path != "" {
				path += "."
			}
			path += part
			if i < len(parts)-1 {
				if r, ok := current[strings.Join(parts[:i+1], ".")]; ok {
					path = r
				}
			}
		}
		return path
	}
	prefix := ""
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		var parts []string
		line := 0
		for it := e.Key(); it.Next(); {
			n := it.Node()
			parts = append(parts, string(n.Data))
			if line == 0 {
				line = p.Shape(n.Raw).Start.Line
			}
		}
		switch e.Kind {
		case unstable.Table:
			prefix = resolve(parts)
			idx[prefix] = line
		case unstable.ArrayTable:
			base := resolve(parts)
			prefix = fmt.Sprintf("%s[%d]", base, counts[base])
			counts[base]++
			current[strings.Join(parts, ".")] = prefix
			idx[prefix] = line
		case unstable.KeyValue:
			key := strings.Join(parts, ".")
			if prefix != "" {
				key = prefix + "." + key
			}
			if _, seen := idx[key]; !seen {
				idx[key] = line
			}
		}
	}
	return idx, p.Error()
}
