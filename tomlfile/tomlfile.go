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
	"reflect"
	"regexp"
	"slices"
	"strconv"
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
// index. file names the file in errors. An unknown key's error names the
// table it is in and suggests the nearest key v has there ("unknown key
// "engin" in [[agent]]; did you mean "engine"?"); when nothing is near it
// lists the keys v allows there, or gives hint instead when hint is set.
func Decode(data []byte, file string, v any, hint string) (Lines, error) {
	lineOf := newLineAt(data)
	lines, unknown, perr := index(data, lineOf, reflect.TypeOf(v))
	if perr == nil && len(unknown) > 0 {
		errs := make([]error, len(unknown))
		for i, u := range unknown {
			errs[i] = &Error{File: file, Line: u.line, Msg: unknownKeyMessage(v, u.key, lineOf.text(data, u.line), hint)}
		}
		return nil, errors.Join(errs...)
	}
	// The decoder's syntax errors carry positions, so it goes first when
	// the document does not parse.
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, decodeError(file, data, lineOf, v, err, hint)
	}
	if perr != nil {
		return nil, decodeError(file, data, lineOf, v, perr, hint)
	}
	return lines, nil
}

func decodeError(file string, data []byte, lineOf lineAt, v any, err error, hint string) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var errs []error
		for _, e := range strict.Errors {
			line, _ := e.Position()
			msg := unknownKeyMessage(v, e.Key(), lineOf.text(data, line), hint)
			errs = append(errs, &Error{File: file, Line: line, Msg: msg})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		msg := plainTypeError(strings.TrimPrefix(de.Error(), "toml: "), typeAt(v, de.Key()))
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
// fields, into what a user wrote and what was wanted. t is the type the
// value was to be stored in, when known.
func plainTypeError(msg string, t reflect.Type) string {
	m := typeError.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	typ := strings.TrimPrefix(m[2], "*")
	want := map[string]string{
		"int": "a whole number", "int64": "a whole number", "bool": "true or false",
		"string": "a quoted string", "[]string": "a list of strings",
	}[typ]
	switch tableKind(t) {
	case plainTable, namedTable:
		want = "a table"
	case arrayTable:
		want = "[[array table]] entries"
	}
	if want == "" {
		return msg
	}
	article := "a"
	if strings.ContainsRune("aeiou", rune(m[1][0])) {
		article = "an"
	}
	return fmt.Sprintf("expected %s, got %s %s", want, article, m[1])
}

// lineAt maps byte offsets to 1-based line numbers. The parser's own
// Shape counts newlines from the start of the document on every call, which
// made indexing a file quadratic in its keys (2.3 s for 4,000 agents); this
// finds the newlines once and binary-searches them.
type lineAt []int

func newLineAt(data []byte) lineAt {
	nl := make(lineAt, 0, bytes.Count(data, []byte("\n")))
	for i, c := range data {
		if c == '\n' {
			nl = append(nl, i)
		}
	}
	return nl
}

func (nl lineAt) line(offset int) int {
	n, _ := slices.BinarySearch(nl, offset)
	return n + 1
}

// text returns the text of the 1-based line n of data, or nil.
func (nl lineAt) text(data []byte, n int) []byte {
	if n < 1 || n > len(nl)+1 {
		return nil
	}
	start, end := 0, len(data)
	if n > 1 {
		start = nl[n-2] + 1
	}
	if n <= len(nl) {
		end = nl[n-1]
	}
	return data[start:end]
}

// index maps the keys of data to their lines and, when root is a type to
// decode into, finds the keys it has no room for.
func index(data []byte, lineOf lineAt, root reflect.Type) (Lines, []unknownKey, error) {
	idx := Lines{}
	c := checker{lineOf: lineOf}
	if root != nil {
		if r := deref(root); r.Kind() == reflect.Struct {
			c.root, c.table = r, r
		}
	}
	counts := map[string]int{}     // array-table path -> elements so far
	current := map[string]string{} // dotted array-table key -> its newest element's path
	prefix := ""
	var parts []string
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		parts = parts[:0]
		line := 0
		for it := e.Key(); it.Next(); {
			n := it.Node()
			parts = append(parts, string(n.Data))
			if line == 0 {
				line = lineOf.line(int(n.Raw.Offset))
			}
		}
		switch e.Kind {
		case unstable.Table:
			c.header(parts, line)
			prefix = resolvePath(current, parts)
			idx[prefix] = line
		case unstable.ArrayTable:
			c.header(parts, line)
			base := resolvePath(current, parts)
			prefix = base + "[" + strconv.Itoa(counts[base]) + "]"
			counts[base]++
			current[strings.Join(parts, ".")] = prefix
			idx[prefix] = line
		case unstable.KeyValue:
			c.keyValue(e, parts, line)
			key := strings.Join(parts, ".")
			if prefix != "" {
				key = prefix + "." + key
			}
			if _, seen := idx[key]; seen {
				break
			}
			idx[key] = line
			// The elements of an array value, each on its own line when
			// written one a line: "env.pass[2]".
			if v := e.Value(); v != nil && v.Kind == unstable.Array {
				i := 0
				for it := v.Children(); it.Next(); i++ {
					if c := it.Node(); c.Raw.Length > 0 || c.Kind == unstable.InlineTable {
						idx[key+"["+strconv.Itoa(i)+"]"] = lineOf.line(int(c.Raw.Offset))
					}
				}
			}
		}
	}
	return idx, c.unknown, p.Error()
}

// resolvePath turns a table header's parts into its index path: a prefix
// naming an array table continues in that table's newest element, so
// [session.turn.args] under the third [[session.turn]] of the second
// [[session]] is "session[1].turn[2].args".
func resolvePath(current map[string]string, parts []string) string {
	path, written := "", ""
	for i, part := range parts {
		if i > 0 {
			written += "."
		}
		written += part
		if path != "" {
			path += "."
		}
		path += part
		if i < len(parts)-1 {
			if r, ok := current[written]; ok {
				path = r
			}
		}
	}
	return path
}
