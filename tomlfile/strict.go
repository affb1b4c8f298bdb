package tomlfile

import (
	"encoding"
	"reflect"
	"slices"
	"sync"

	"github.com/pelletier/go-toml/v2/unstable"
)

// The decoder's own unknown-key errors cost a pass over the whole document
// each (go-toml builds every one's context by splitting the document into
// lines), so a file with an unknown key in each of 10,000 tables took 14 s
// to reject. Unknown keys are found here instead, in the one pass that
// indexes lines; the decoder's check stays on for what this one misses.

// unknownKey is a key the target has no field for, as written: the
// enclosing table header's parts, then the key's, up to the unknown part.
type unknownKey struct {
	line int
	key  []string
}

// checker follows a document's tables through the target's type.
type checker struct {
	root    reflect.Type
	lineOf  lineAt
	table   reflect.Type // the current table's type; nil: not checked
	parts   []string     // the current table header's parts
	unknown []unknownKey
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	tomlUnmarshaler = reflect.TypeFor[unstable.Unmarshaler]()
)

// step returns the type key part leads to within t, whether t has no room
// for it, and nil with false where the check stops (a map of anything, a
// value that decodes itself, a type mismatch the decoder reports).
func step(t reflect.Type, part string) (next reflect.Type, unknown bool) {
	t = deref(t)
	if t == nil {
		return nil, false
	}
	info := infoOf(t)
	if info.opaque {
		return nil, false
	}
	switch t.Kind() {
	case reflect.Struct:
		if f := lookup(info.fields, part); f != nil {
			return f, false
		}
		return nil, true
	case reflect.Map:
		return t.Elem(), false
	case reflect.Slice, reflect.Array:
		// An array table continues in its newest element.
		return step(t.Elem(), part)
	}
	return nil, false
}

// typeInfo is what step needs of a type, worked out once per type: a file
// of 10,000 agents asks for the same few types 50,000 times.
type typeInfo struct {
	opaque bool    // decodes itself: its keys are its own business
	fields []field // a struct's keys
}

var typeInfos sync.Map // reflect.Type -> *typeInfo

func infoOf(t reflect.Type) *typeInfo {
	if info, ok := typeInfos.Load(t); ok {
		return info.(*typeInfo)
	}
	info := &typeInfo{opaque: reflect.PointerTo(t).Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(tomlUnmarshaler)}
	if t.Kind() == reflect.Struct {
		info.fields = fieldsOf(t)
	}
	typeInfos.Store(t, info)
	return info
}

// walk follows parts from t. It returns the type reached, or the index of
// the first unknown part (else -1).
func walk(t reflect.Type, parts []string) (reflect.Type, int) {
	for i, part := range parts {
		next, unknown := step(t, part)
		if unknown {
			return nil, i
		}
		if next == nil {
			return nil, -1
		}
		t = next
	}
	return t, -1
}

// element is the type of a table's contents: an array table's element.
func element(t reflect.Type) reflect.Type {
	if t = deref(t); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return deref(t.Elem())
	}
	return t
}

func (c *checker) header(parts []string, line int) {
	c.parts = append(c.parts[:0], parts...)
	if c.root == nil {
		return
	}
	t, bad := walk(c.root, parts)
	if bad >= 0 {
		c.unknown = append(c.unknown, unknownKey{line, slices.Clone(parts[:bad+1])})
	}
	c.table = element(t)
}

func (c *checker) keyValue(e *unstable.Node, parts []string, line int) {
	if c.table == nil {
		return
	}
	c.value(c.table, c.parts, parts, line, e.Value())
}

// value checks key (under the path prefix) within t, and its value.
func (c *checker) value(t reflect.Type, prefix, key []string, line int, v *unstable.Node) {
	t, bad := walk(t, key)
	if bad >= 0 {
		c.unknown = append(c.unknown, unknownKey{line, slices.Concat(prefix, key[:bad+1])})
		return
	}
	if t == nil || v == nil {
		return
	}
	path := slices.Concat(prefix, key)
	switch v.Kind {
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			kv := it.Node()
			var parts []string
			l := line
			for k := kv.Key(); k.Next(); {
				if parts == nil {
					l = c.lineOf.line(int(k.Node().Raw.Offset))
				}
				parts = append(parts, string(k.Node().Data))
			}
			c.value(element(t), path, parts, l, kv.Value())
		}
	case unstable.Array:
		if d := deref(t); d.Kind() == reflect.Slice || d.Kind() == reflect.Array {
			for it := v.Children(); it.Next(); {
				if n := it.Node(); n.Kind == unstable.InlineTable || n.Kind == unstable.Array {
					c.value(d.Elem(), path, nil, line, n)
				}
			}
		}
	}
}
