package protocol

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// The schemas are data, not code, so that they can be read (and reused by
// other tools) as the protocol's definition. One file per type; each refers
// to envelope.json for the fields every message has.
//
//go:embed schemas/*.json
var schemaFiles embed.FS

// schemaBase is where the schemas claim to live. Nothing is fetched from
// it: every file is embedded, and the loader refuses anything else, so
// validation never touches the network or the disk.
const schemaBase = "https://swarmhq.github.io/amp/1.0/"

// The schemas are read and resolved by github.com/google/jsonschema-go
// (the MCP SDK links it already), whose init costs nothing worth naming;
// the library that checked them before compiled its meta-schemas at init,
// 1.7 MB in every swarm process. That library stops at a message's first
// failure and says it in prose, while a sender must hear of every failing
// field at once, by path and by kind; so check walks the resolved schemas
// itself, for the keywords the protocol's schemas use (compileSchemas
// refuses any other, so none is silently ignored), with draft 2020-12's
// meaning of each.

type compiled struct {
	envelope *jsonschema.Schema
	byType   map[Type]*jsonschema.Schema
	// resolved are the library's own resolutions of the type schemas,
	// kept to compare verdicts with it in tests.
	resolved map[Type]*jsonschema.Resolved
	// refs maps each subschema with a $ref to the schema it names.
	refs map[*jsonschema.Schema]*jsonschema.Schema
	// patterns are the compiled patterns, by their source.
	patterns map[string]*regexp.Regexp
}

// schemas compiles the embedded schemas once, on first use: a process
// that sends no protocol message never pays for them. They are part of
// the binary, so a failure is a bug, which a test catches; it panics
// rather than make every caller handle an error that cannot happen.
var schemas = sync.OnceValue(func() compiled {
	c, err := compileSchemas()
	if err != nil {
		panic(err)
	}
	return c
})

// checkedKeywords are the Schema fields check understands; a schema using
// any other is refused when compiled. Annotations (title, description,
// $schema, $id, $defs) do not constrain anything.
var checkedKeywords = map[string]bool{
	"ID": true, "Schema": true, "Title": true, "Description": true, "Defs": true,
	"Ref": true, "Type": true, "Types": true, "Enum": true, "Const": true,
	"Required": true, "Properties": true, "AdditionalProperties": true, "PropertyOrder": true,
	"Items": true, "MinItems": true, "MaxItems": true, "UniqueItems": true,
	"MinLength": true, "MaxLength": true, "Pattern": true, "Minimum": true, "Maximum": true,
}

func compileSchemas() (compiled, error) {
	files, err := fs.Glob(schemaFiles, "schemas/*.json")
	if err != nil {
		return compiled{}, err
	}
	docs := map[string]*jsonschema.Schema{}
	for _, f := range files {
		data, err := schemaFiles.ReadFile(f)
		if err != nil {
			return compiled{}, err
		}
		s := new(jsonschema.Schema)
		if err := json.Unmarshal(data, s); err != nil {
			return compiled{}, fmt.Errorf("protocol: %s: %w", f, err)
		}
		if want := schemaBase + path.Base(f); s.ID != want {
			return compiled{}, fmt.Errorf("protocol: %s: $id is %q, want %q", f, s.ID, want)
		}
		docs[s.ID] = s
	}
	load := func(u *url.URL) (*jsonschema.Schema, error) {
		if s := docs[u.String()]; s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("protocol: schema %s is not embedded; only schemas/*.json can be referenced", u)
	}
	out := compiled{
		byType:   map[Type]*jsonschema.Schema{},
		resolved: map[Type]*jsonschema.Resolved{},
		refs:     map[*jsonschema.Schema]*jsonschema.Schema{},
		patterns: map[string]*regexp.Regexp{},
	}
	for id, s := range docs {
		if err := out.prepare(id, s, docs, "#"); err != nil {
			return compiled{}, err
		}
	}
	out.envelope = docs[schemaBase+"envelope.json"]
	if out.envelope == nil {
		return compiled{}, fmt.Errorf("protocol: no schemas/envelope.json")
	}
	for _, t := range Types {
		id := schemaBase + string(t) + ".json"
		s := docs[id]
		if s == nil {
			return compiled{}, fmt.Errorf("protocol: no schemas/%s.json", t)
		}
		// The library's resolution checks what walking does not: the
		// schema is well formed draft 2020-12.
		if out.resolved[t], err = s.Resolve(&jsonschema.ResolveOptions{BaseURI: id, Loader: load}); err != nil {
			return compiled{}, fmt.Errorf("protocol: %s: %w", id, err)
		}
		out.byType[t] = s
	}
	return out, nil
}

// prepare checks that s (at loc in document base) uses only the keywords
// check understands, resolves its $ref, compiles its pattern, and does the
// same for its subschemas.
func (c *compiled) prepare(base string, s *jsonschema.Schema, docs map[string]*jsonschema.Schema, loc string) error {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !checkedKeywords[f.Name] && !v.Field(i).IsZero() {
			return fmt.Errorf("protocol: %s%s uses %s, which the protocol's checker does not know: add it to check (schema.go)", base, loc, f.Name)
		}
	}
	if s.Ref != "" {
		target, err := resolveRef(base, s.Ref, docs)
		if err != nil {
			return fmt.Errorf("protocol: %s%s: %w", base, loc, err)
		}
		c.refs[s] = target
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return fmt.Errorf("protocol: %s%s: %w", base, loc, err)
		}
		c.patterns[s.Pattern] = re
	}
	for _, t := range s.Types {
		if !slices.Contains(typeOrder, t) {
			return fmt.Errorf("protocol: %s%s: unknown type %q", base, loc, t)
		}
	}
	if s.Type != "" && !slices.Contains(typeOrder, s.Type) {
		return fmt.Errorf("protocol: %s%s: unknown type %q", base, loc, s.Type)
	}
	if a := s.AdditionalProperties; a != nil && !isFalse(a) {
		return fmt.Errorf("protocol: %s%s: additionalProperties must be false", base, loc)
	}
	for name, sub := range s.Defs {
		if err := c.prepare(base, sub, docs, loc+"/$defs/"+name); err != nil {
			return err
		}
	}
	for name, sub := range s.Properties {
		if err := c.prepare(base, sub, docs, loc+"/properties/"+name); err != nil {
			return err
		}
	}
	if s.Items != nil {
		return c.prepare(base, s.Items, docs, loc+"/items")
	}
	return nil
}

// resolveRef finds the schema a $ref names: a whole embedded document, or
// one of its $defs.
func resolveRef(base, ref string, docs map[string]*jsonschema.Schema) (*jsonschema.Schema, error) {
	b, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return nil, err
	}
	u := b.ResolveReference(r)
	frag := u.Fragment
	u.Fragment = ""
	doc := docs[u.String()]
	if doc == nil {
		return nil, fmt.Errorf("$ref %q: schema %s is not embedded; only schemas/*.json can be referenced", ref, u)
	}
	if frag == "" {
		return doc, nil
	}
	name, ok := strings.CutPrefix(frag, "/$defs/")
	if sub := doc.Defs[name]; ok && sub != nil {
		return sub, nil
	}
	return nil, fmt.Errorf("$ref %q: only a document or one of its $defs can be referenced", ref)
}

// isFalse reports whether s is the schema false ({"not": {}} once read).
func isFalse(s *jsonschema.Schema) bool {
	if s.Not == nil || !reflect.ValueOf(*s.Not).IsZero() {
		return false
	}
	rest := *s
	rest.Not = nil
	return reflect.ValueOf(rest).IsZero()
}

// Schema returns the embedded JSON Schema of a type ("envelope" for the
// common fields), for documentation and for tools outside Go.
func Schema(name string) ([]byte, error) {
	return schemaFiles.ReadFile("schemas/" + name + ".json")
}

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

func addSchemaError(c *collector, t Type, doc any, e fault) {
	p, value := instancePath(doc, e.loc)
	if p == "" {
		p = "envelope"
	}
	switch e.keyword {
	case "required":
		for _, m := range e.names {
			c.add(joinKey(trimRoot(p), m), "is required")
		}
	case "additionalProperties":
		allowed := fieldsAt(t, e.loc)
		for _, name := range e.names {
			reason := "is not a field of " + where(t, e.loc)
			if s := suggest(name, allowed); s != "" {
				reason += fmt.Sprintf(" (did you mean %q?)", s)
			}
			if len(allowed) > 0 {
				reason += "; the fields are " + strings.Join(allowed, ", ")
			}
			c.add(joinKey(trimRoot(p), name), reason)
		}
	case "type":
		c.add(p, fmt.Sprintf("must be %s, not %s", typeNames(e.want), article(e.got)))
	case "enum":
		want := make([]string, len(e.values))
		for i, w := range e.values {
			want[i] = jsonText(w)
		}
		c.add(p, fmt.Sprintf("must be one of %s, not %s", strings.Join(want, ", "), jsonText(e.value)))
	case "const":
		c.add(p, fmt.Sprintf("must be %s, not %s", jsonText(e.values[0]), jsonText(e.value)))
	case "minItems":
		c.add(p, "must contain at least "+plural(e.limit, "item"))
	case "maxItems":
		c.add(p, fmt.Sprintf("must contain at most %s, not %d", plural(e.limit, "item"), e.count))
	case "minLength":
		if e.limit == 1 {
			c.add(p, "must not be empty")
		} else {
			c.add(p, fmt.Sprintf("must be at least %s long", plural(e.limit, "character")))
		}
	case "maxLength":
		c.add(p, fmt.Sprintf("must be at most %s long, not %d; put long text in a file in the repository and give its path", plural(e.limit, "character"), e.count))
	case "pattern":
		help := patternHelp[e.pattern]
		if help == "" {
			help = "must match " + e.pattern
		}
		c.add(p, fmt.Sprintf("%s, not %s", help, jsonText(value)))
	case "minimum":
		c.add(p, fmt.Sprintf("must be at least %s, not %s", ratText(e.rat[0]), ratText(e.rat[1])))
	case "maximum":
		c.add(p, fmt.Sprintf("must be at most %s, not %s", ratText(e.rat[0]), ratText(e.rat[1])))
	case "uniqueItems":
		c.add(p, fmt.Sprintf("lists the same value twice (items %d and %d); give each once", e.dup[0], e.dup[1]))
	default:
		c.add(p, "fails the schema's "+e.keyword)
	}
}

// trimRoot undoes the "envelope" placeholder for the root before a key is
// appended to it.
func trimRoot(p string) string {
	if p == "envelope" {
		return ""
	}
	return p
}

// patternHelp explains each pattern in the schemas in words; a test checks
// that every pattern has an entry.
var patternHelp = map[string]string{
	`^[a-z][a-z0-9-]{0,63}$`:                                             "must be an agent name (lower-case letters, digits and '-', starting with a letter)",
	`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`:                                 "must be a task id such as T-42 or bd-a1b2 (letters, digits, '.', '_' and '-', at most 128)",
	`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`: "must be an RFC 3339 UTC time with milliseconds, such as 2026-11-23T10:00:00.123Z",
	`^(task_dispatch|task_result|review_request|review_verdict|escalation|ack|ping)-[A-Za-z0-9][A-Za-z0-9._-]{0,127}-[0-9]{13}$`: "must be a msg_id such as task_dispatch-T-42-1763900000123 (copy it from the message; swarm protocol log --task ID lists them)",
	`^[0-9a-f]{7,64}$`:                        "must be a commit hash in lower-case hex, 7 to 64 digits (git rev-parse HEAD prints it)",
	`^team-[A-Za-z0-9][A-Za-z0-9._-]{0,122}$`: "must be team-<name> for a ping",
	`^[A-Z][A-Z0-9_]{0,63}$`:                  "must be an upper-case code such as CORE_BOOTSTRAP_PING",
}

// fieldsAt lists, in the contract's order, the fields allowed in the object
// at loc, read from the Go types (whose order is the contract's: required
// fields first).
func fieldsAt(t Type, loc []string) []string {
	rt := reflect.TypeFor[Envelope]()
	for i, tok := range loc {
		if i == 0 && tok == "payload" {
			p := newPayload(t)
			if p == nil {
				return nil
			}
			rt = reflect.TypeOf(p).Elem()
			continue
		}
		switch rt.Kind() {
		case reflect.Slice:
			rt = rt.Elem()
		case reflect.Struct:
			f, ok := fieldByTag(rt, tok)
			if !ok {
				return nil
			}
			rt = f.Type
		default:
			return nil
		}
	}
	if rt.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range rt.NumField() {
		if name := jsonName(rt.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func fieldByTag(rt reflect.Type, name string) (reflect.StructField, bool) {
	for i := range rt.NumField() {
		if f := rt.Field(i); jsonName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// where names the object an unknown field was found in.
func where(t Type, loc []string) string {
	switch {
	case len(loc) == 0:
		return "the envelope"
	case len(loc) == 1 && loc[0] == "payload":
		if t != "" && strings.ContainsRune("aeiou", rune(t[0])) {
			return "an " + string(t) + " payload"
		}
		return "a " + string(t) + " payload"
	case len(loc) == 3 && loc[1] == "subtasks":
		return "a subtask"
	}
	return "this object"
}

// suggest returns the allowed name closest to a mistyped one, if it is
// close: a few edits away (acceptance_criterias, risk-level), or a prefix
// of it (desc).
func suggest(name string, allowed []string) string {
	lower := strings.ToLower(name)
	best, bestD := "", max(2, len(name)/4)+1
	for _, a := range allowed {
		d := levenshtein(lower, a)
		if len(lower) >= 3 && strings.HasPrefix(a, lower) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func typeNames(want []string) string {
	s := make([]string, len(want))
	for i, w := range want {
		s[i] = article(w)
	}
	switch len(s) {
	case 1:
		return s[0]
	default:
		return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
	}
}

// article names a JSON type the way a sentence needs it.
func article(jsonType string) string {
	switch jsonType {
	case "null":
		return "null"
	case "integer":
		return "a whole number"
	case "array", "object":
		return "an " + jsonType
	case "boolean":
		return "true or false"
	}
	return "a " + jsonType
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if noun == "criterion" {
		return strconv.Itoa(n) + " criteria"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(3)
}

// jsonText shows a value as JSON, cut short so an error stays one line.
func jsonText(v any) string {
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 60 {
		s = cutRunes(s, 57) + "…"
	}
	return s
}

// cutRunes returns the first n runes of s.
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
