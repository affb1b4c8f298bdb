package protocol

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// checkSchema validates doc (decoded by decodeJSON) against the schema of
// its type, or the envelope's when the type is not known, and adds a
// readable error per failing field.
func checkSchema(c *collector, t Type, doc any) {
	s := schemas()
	sch := s.byType[t]
	if sch == nil {
		sch = s.envelope
	}
	var faults []fault
	s.check(sch, doc, nil, &faults)
	for _, f := range faults {
		addSchemaError(c, t, doc, f)
	}
}

// fault is one keyword a value failed, at loc (JSON pointer tokens).
type fault struct {
	loc     []string
	keyword string
	names   []string    // required: the missing; additionalProperties: the unknown
	want    []string    // type: the types allowed
	got     string      // type: the value's type
	values  []any       // enum: the values allowed; const: the one
	value   any         // enum, const: the value given
	limit   int         // minItems, maxItems, minLength, maxLength
	count   int         // maxItems, maxLength: the value's size
	pattern string      // pattern
	rat     [2]*big.Rat // minimum, maximum: the limit and the value
	dup     [2]int      // uniqueItems: the first two equal items
}

// typeOrder is the order types are named in ("a string, an array or an
// object"), whatever the schema's.
var typeOrder = []string{"null", "boolean", "number", "integer", "string", "array", "object"}

// check validates v against s, appending a fault per failing keyword, as
// draft 2020-12 says for the keywords the schemas use. A value of the
// wrong type, constant or enum is reported once, with nothing else about
// it, since nothing else about it can be fixed first.
func (c *compiled) check(s *jsonschema.Schema, v any, loc []string, out *[]fault) {
	if isFalse(s) {
		return // only ever additionalProperties, which the object reports
	}
	if want := typesOf(s); want != nil {
		got := jsonTypeOf(v)
		if !slices.Contains(want, got) && !(got == "number" && slices.Contains(want, "integer") && isInteger(v)) {
			*out = append(*out, fault{loc: loc, keyword: "type", want: want, got: got})
			return
		}
	}
	if s.Const != nil && !equalJSON(v, *s.Const) {
		*out = append(*out, fault{loc: loc, keyword: "const", values: []any{*s.Const}, value: v})
		return
	}
	if s.Enum != nil && !slices.ContainsFunc(s.Enum, func(e any) bool { return equalJSON(v, e) }) {
		*out = append(*out, fault{loc: loc, keyword: "enum", values: s.Enum, value: v})
		return
	}
	if s.Ref != "" {
		c.check(c.refs[s], v, loc, out)
	}
	switch x := v.(type) {
	case map[string]any:
		if missing := slices.DeleteFunc(slices.Clone(s.Required), func(k string) bool { _, ok := x[k]; return ok }); len(missing) > 0 {
			*out = append(*out, fault{loc: loc, keyword: "required", names: missing})
		}
		var unknown []string
		for _, k := range sortedKeys(x) {
			if sub, ok := s.Properties[k]; ok {
				c.check(sub, x[k], append(slices.Clip(loc), k), out)
			} else if s.AdditionalProperties != nil {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			*out = append(*out, fault{loc: loc, keyword: "additionalProperties", names: unknown})
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			*out = append(*out, fault{loc: loc, keyword: "minItems", limit: *s.MinItems, count: len(x)})
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			*out = append(*out, fault{loc: loc, keyword: "maxItems", limit: *s.MaxItems, count: len(x)})
		}
		if s.UniqueItems {
			if i, j := duplicates(x); i >= 0 {
				*out = append(*out, fault{loc: loc, keyword: "uniqueItems", dup: [2]int{i, j}})
			}
		}
		if s.Items != nil {
			for i, item := range x {
				c.check(s.Items, item, append(slices.Clip(loc), strconv.Itoa(i)), out)
			}
		}
	case string:
		n := utf8.RuneCountInString(x)
		if s.MinLength != nil && n < *s.MinLength {
			*out = append(*out, fault{loc: loc, keyword: "minLength", limit: *s.MinLength, count: n})
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			*out = append(*out, fault{loc: loc, keyword: "maxLength", limit: *s.MaxLength, count: n})
		}
		if s.Pattern != "" && !c.patterns[s.Pattern].MatchString(x) {
			*out = append(*out, fault{loc: loc, keyword: "pattern", pattern: s.Pattern})
		}
	case json.Number:
		n, ok := ratOf(x)
		if !ok {
			break
		}
		if s.Minimum != nil {
			if m := new(big.Rat).SetFloat64(*s.Minimum); n.Cmp(m) < 0 {
				*out = append(*out, fault{loc: loc, keyword: "minimum", rat: [2]*big.Rat{m, n}})
			}
		}
		if s.Maximum != nil {
			if m := new(big.Rat).SetFloat64(*s.Maximum); n.Cmp(m) > 0 {
				*out = append(*out, fault{loc: loc, keyword: "maximum", rat: [2]*big.Rat{m, n}})
			}
		}
	}
}

func typesOf(s *jsonschema.Schema) []string {
	var want []string
	for _, t := range typeOrder {
		if s.Type == t || slices.Contains(s.Types, t) {
			want = append(want, t)
		}
	}
	return want
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonTypeOf names the JSON type of a decoded value; every number is a
// "number" here, and an integer where the schema asks for one.
func jsonTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// isInteger reports whether a number has no fractional part (2.0 and 1e3
// do).
func isInteger(n any) bool {
	r, ok := ratOf(n)
	return ok && r.IsInt()
}

// ratOf reads a number as the schema (float64) or the document
// (json.Number) holds it.
func ratOf(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case json.Number:
		return new(big.Rat).SetString(string(n))
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(n) == nil {
			return nil, false
		}
		return r, true
	}
	return nil, false
}

// equalJSON is JSON equality: numbers by value (1 equals 1.0), objects
// regardless of key order.
func equalJSON(a, b any) bool {
	if ra, ok := ratOf(a); ok {
		rb, ok := ratOf(b)
		return ok && ra.Cmp(rb) == 0
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, equalJSON)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}

// duplicates returns the indexes of the first two equal items, or -1, -1.
// Items are bucketed by a canonical text first, so a long array costs one
// pass, not a comparison of every pair.
func duplicates(items []any) (int, int) {
	seen := make(map[string]int, len(items))
	for j, v := range items {
		k := canonical(v)
		if i, ok := seen[k]; ok {
			return i, j
		}
		seen[k] = j
	}
	return -1, -1
}

// canonical is a text equal for JSON-equal values.
func canonical(v any) string {
	switch x := v.(type) {
	case json.Number:
		if r, ok := ratOf(x); ok {
			return "n" + r.RatString()
		}
		return "n" + string(x)
	case []any:
		var b strings.Builder
		b.WriteString("[")
		for _, e := range x {
			b.WriteString(canonical(e))
			b.WriteString(",")
		}
		return b.String() + "]"
	case map[string]any:
		var b strings.Builder
		b.WriteString("{")
		for _, k := range sortedKeys(x) {
			b.WriteString(strconv.Quote(k))
			b.WriteString(":")
			b.WriteString(canonical(x[k]))
			b.WriteString(",")
		}
		return b.String() + "}"
	case string:
		return "s" + strconv.Quote(x)
	}
	return fmt.Sprint(v)
}

// instancePath turns an instance location (JSON pointer tokens) into a
// dotted path, and returns the value there. It walks the document,
// because only the document says whether "0" is an array index or a key.
func instancePath(doc any, loc []string) (string, any) {
	p, v := "", doc
	for _, tok := range loc {
		switch x := v.(type) {
		case []any:
			i, _ := strconv.Atoi(tok)
			p, v = joinIndex(p, i), nil
			if i >= 0 && i < len(x) {
				v = x[i]
			}
		case map[string]any:
			p, v = joinKey(p, tok), x[tok]
		default:
			p, v = joinKey(p, tok), nil
		}
	}
	return p, v
}
