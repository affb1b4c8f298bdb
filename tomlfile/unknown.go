package tomlfile

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// A field is a key a decoding target accepts, with the type of its value.
type field struct {
	name string
	t    reflect.Type
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldsOf lists the keys a struct accepts, in declaration order, with
// embedded structs' keys in place as the decoder reads them.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if ft := deref(f.Type); f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, fieldsOf(ft)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{name, f.Type})
	}
	return out
}

// Table kinds, by how a value of a type is written as a table.
const (
	notTable   = iota
	plainTable // [name]
	arrayTable // [[name]]
	namedTable // [name.NAME]: a map of tables
)

func tableKind(t reflect.Type) int {
	t = deref(t)
	switch t.Kind() {
	case reflect.Struct:
		return plainTable
	case reflect.Slice, reflect.Array:
		if e := deref(t.Elem()); e.Kind() == reflect.Struct || e.Kind() == reflect.Map {
			return arrayTable
		}
	case reflect.Map:
		if e := deref(t.Elem()); e.Kind() == reflect.Struct {
			return namedTable
		}
		return plainTable
	}
	return notTable
}

// place is where a decoding target has no room for a key: the table around
// it, the part of the key that is unknown and what that table accepts.
type place struct {
	parent  []string // the known parts before the unknown one
	inArray bool     // parent is an array table
	unknown int      // index of the unknown part in the key
	fields  []field  // what parent accepts; nil when unknown
}

// locate walks key through the type of v to the first part v has no field
// for.
func locate(v any, key []string) place {
	t := deref(reflect.TypeOf(v))
	pl := place{unknown: len(key) - 1}
	for i, part := range key {
		t = deref(t)
		if t == nil {
			return pl
		}
		switch t.Kind() {
		case reflect.Struct:
			fields := fieldsOf(t)
			next := lookup(fields, part)
			if next == nil {
				pl.unknown, pl.fields = i, fields
				return pl
			}
			pl.inArray = false
			if tableKind(next) == arrayTable {
				next, pl.inArray = deref(next).Elem(), true
			}
			t = next
		case reflect.Map:
			t, pl.inArray = t.Elem(), false
		default:
			return pl
		}
		pl.parent = key[:i+1]
	}
	return pl
}

// typeAt returns the type key is stored in within v, or nil if v has no
// room for it.
func typeAt(v any, key []string) reflect.Type {
	if v == nil || len(key) == 0 {
		return nil
	}
	t := reflect.TypeOf(v)
	for _, part := range key {
		if t = child(t, part); t == nil {
			return nil
		}
	}
	return t
}

// child returns the type of key part within a value of type t: a struct's
// field, a map's element, or a field of an array table's element.
func child(t reflect.Type, part string) reflect.Type {
	t = deref(t)
	switch t.Kind() {
	case reflect.Struct:
		return lookup(fieldsOf(t), part)
	case reflect.Map:
		return t.Elem()
	case reflect.Slice, reflect.Array:
		if e := deref(t.Elem()); e.Kind() == reflect.Struct {
			return lookup(fieldsOf(e), part)
		}
	}
	return nil
}

// lookup finds the field for key name as the decoder does: by exact name,
// else ignoring case.
func lookup(fields []field, name string) reflect.Type {
	for _, f := range fields {
		if f.name == name {
			return f.t
		}
	}
	lower := strings.ToLower(name)
	for _, f := range fields {
		if strings.ToLower(f.name) == lower {
			return f.t
		}
	}
	return nil
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// dotted writes key parts as TOML writes them, quoting where needed.
func dotted(parts []string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		if bareKey.MatchString(p) {
			q[i] = p
		} else {
			q[i] = fmt.Sprintf("%q", p)
		}
	}
	return strings.Join(q, ".")
}

// header writes a table header for parts.
func header(parts []string, array bool) string {
	if array {
		return "[[" + dotted(parts) + "]]"
	}
	return "[" + dotted(parts) + "]"
}

// describe names a field the way it is written: a key, or a table header.
func describe(f field) string {
	switch tableKind(f.t) {
	case plainTable:
		return "[" + dotted([]string{f.name}) + "]"
	case arrayTable:
		return "[[" + dotted([]string{f.name}) + "]]"
	case namedTable:
		return "[" + dotted([]string{f.name}) + ".NAME]"
	}
	return f.name
}

// writtenHeader returns the parts of the table header on line, and whether
// it is an array table, when line holds one.
func writtenHeader(line []byte) (parts []string, array, ok bool) {
	line = bytes.TrimSpace(line)
	if !bytes.HasPrefix(line, []byte("[")) {
		return nil, false, false
	}
	var p unstable.Parser
	p.Reset(line)
	if !p.NextExpression() {
		return nil, false, false
	}
	e := p.Expression()
	if e.Kind != unstable.Table && e.Kind != unstable.ArrayTable {
		return nil, false, false
	}
	for it := e.Key(); it.Next(); {
		parts = append(parts, string(it.Node().Data))
	}
	return parts, e.Kind == unstable.ArrayTable, true
}

// unknownKeyMessage says what is wrong with key, which the target v has no
// room for, and what was probably meant. line is the text of the line the
// key is on; hint, when set, replaces the list of what is allowed.
func unknownKeyMessage(v any, key []string, line []byte, hint string) string {
	pl := locate(v, key)
	var names []string
	for _, f := range pl.fields {
		names = append(names, f.name)
	}
	word := key[pl.unknown]
	if parts, array, ok := writtenHeader(line); ok && len(parts) > pl.unknown && slices.Equal(parts[:pl.unknown+1], key[:pl.unknown+1]) {
		// A table header: suggest only tables, written as headers.
		msg := "unknown table " + header(parts, array)
		var tableNames []string
		for _, f := range pl.fields {
			if tableKind(f.t) != notTable {
				tableNames = append(tableNames, f.name)
			}
		}
		if s := Suggest(word, tableNames); s != "" {
			fixed := slices.Concat(parts[:pl.unknown], []string{s}, parts[pl.unknown+1:])
			fl := locate(v, fixed)
			return msg + "; did you mean " + header(fixed, fl.inArray && len(fl.parent) == len(fixed)) + "?"
		}
		return msg + allowed(pl, hint)
	}
	msg := fmt.Sprintf("unknown key %q %s", word, where(pl))
	if s := Suggest(word, names); s != "" {
		return msg + fmt.Sprintf("; did you mean %q?", s)
	}
	return msg + allowed(pl, hint)
}

// allowed says what the table around an unknown key accepts: hint when set,
// or the keys and tables of its type.
func allowed(pl place, hint string) string {
	if hint != "" {
		return " (" + hint + ")"
	}
	if len(pl.fields) == 0 {
		return ""
	}
	d := make([]string, len(pl.fields))
	for i, f := range pl.fields {
		d[i] = describe(f)
	}
	return " (valid: " + strings.Join(d, ", ") + ")"
}

// where names the table around an unknown key: "in [[agent]]", or "at the
// top level".
func where(pl place) string {
	if len(pl.parent) == 0 {
		return "at the top level"
	}
	return "in " + header(pl.parent, pl.inArray)
}
