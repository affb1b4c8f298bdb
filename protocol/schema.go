package protocol

import (
	"embed"
	"fmt"
	"io/fs"
	"math/big"
	"path"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/swarmhq/swarm/internal/text"
)

// The schemas are data, not code, so that they can be read (and reused by
// other tools) as the protocol's definition. One file per type; each refers
// to envelope.json for the fields every message has.
//
//go:embed schemas/*.json
var schemaFiles embed.FS

// schemaBase is where the schemas claim to live. Nothing is fetched from
// it: every file is added to the compiler up front, and the loader refuses
// anything else, so validation never touches the network or the disk.
const schemaBase = "https://swarmhq.github.io/amp/1.0/"

type compiled struct {
	envelope *jsonschema.Schema
	byType   map[Type]*jsonschema.Schema
}

// schemas compiles the embedded schemas once, on first use. They are part
// of the binary, so a failure is a bug, which a test catches; it panics
// rather than make every caller handle an error that cannot happen.
var schemas = sync.OnceValue(func() compiled {
	c, err := compileSchemas()
	if err != nil {
		panic(err)
	}
	return c
})

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("protocol: schema %s is not embedded; only schemas/*.json can be referenced", url)
}

func compileSchemas() (compiled, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	files, err := fs.Glob(schemaFiles, "schemas/*.json")
	if err != nil {
		return compiled{}, err
	}
	for _, f := range files {
		data, err := schemaFiles.ReadFile(f)
		if err != nil {
			return compiled{}, err
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
		if err != nil {
			return compiled{}, fmt.Errorf("protocol: %s: %w", f, err)
		}
		if err := c.AddResource(schemaBase+path.Base(f), doc); err != nil {
			return compiled{}, fmt.Errorf("protocol: %s: %w", f, err)
		}
	}
	out := compiled{byType: map[Type]*jsonschema.Schema{}}
	if out.envelope, err = c.Compile(schemaBase + "envelope.json"); err != nil {
		return compiled{}, err
	}
	for _, t := range Types {
		if out.byType[t], err = c.Compile(schemaBase + string(t) + ".json"); err != nil {
			return compiled{}, err
		}
	}
	return out, nil
}

// Schema returns the embedded JSON Schema of a type ("envelope" for the
// common fields), for documentation and for tools outside Go.
func Schema(name string) ([]byte, error) {
	return schemaFiles.ReadFile("schemas/" + name + ".json")
}

// checkSchema validates doc (decoded with jsonschema.UnmarshalJSON) against
// the schema of its type, or the envelope's when the type is not known, and
// adds a readable error per failing field.
func checkSchema(c *collector, t Type, doc any) {
	s := schemas()
	sch := s.byType[t]
	if sch == nil {
		sch = s.envelope
	}
	err := sch.Validate(doc)
	if err == nil {
		return
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		c.add("envelope", err.Error())
		return
	}
	for _, leaf := range leaves(verr, nil) {
		addSchemaError(c, t, doc, leaf)
	}
}

// leaves flattens the library's error tree: the inner nodes only say which
// subschema ($ref, properties) led to the real failures.
func leaves(e *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return append(out, e)
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}

// instancePath turns the library's instance location (JSON pointer tokens)
// into a dotted path, and returns the value there. It walks the document,
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

func addSchemaError(c *collector, t Type, doc any, e *jsonschema.ValidationError) {
	p, value := instancePath(doc, e.InstanceLocation)
	if p == "" {
		p = "envelope"
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			c.add(joinKey(trimRoot(p), m), "is required")
		}
	case *kind.AdditionalProperties:
		allowed := fieldsAt(t, e.InstanceLocation)
		for _, name := range k.Properties {
			reason := "is not a field of " + where(t, e.InstanceLocation)
			if s := suggest(name, allowed); s != "" {
				reason += fmt.Sprintf(" (did you mean %q?)", s)
			}
			if len(allowed) > 0 {
				reason += "; the fields are " + strings.Join(allowed, ", ")
			}
			c.add(joinKey(trimRoot(p), name), reason)
		}
	case *kind.Type:
		c.add(p, fmt.Sprintf("must be %s, not %s", typeNames(k.Want), article(k.Got)))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = jsonText(w)
		}
		c.add(p, fmt.Sprintf("must be one of %s, not %s", strings.Join(want, ", "), jsonText(k.Got)))
	case *kind.Const:
		c.add(p, fmt.Sprintf("must be %s, not %s", jsonText(k.Want), jsonText(k.Got)))
	case *kind.MinItems:
		c.add(p, "must contain at least "+text.Plural(k.Want, "item", "items"))
	case *kind.MaxItems:
		c.add(p, fmt.Sprintf("must contain at most %s, not %d", text.Plural(k.Want, "item", "items"), k.Got))
	case *kind.MinLength:
		if k.Want == 1 {
			c.add(p, "must not be empty")
		} else {
			c.add(p, fmt.Sprintf("must be at least %s long", text.Plural(k.Want, "character", "characters")))
		}
	case *kind.MaxLength:
		c.add(p, fmt.Sprintf("must be at most %s long, not %d; put long text in a file in the repository and give its path", text.Plural(k.Want, "character", "characters"), k.Got))
	case *kind.Pattern:
		help := patternHelp[k.Want]
		if help == "" {
			help = "must match " + k.Want
		}
		c.add(p, fmt.Sprintf("%s, not %s", help, jsonText(value)))
	case *kind.Minimum:
		c.add(p, fmt.Sprintf("must be at least %s, not %s", ratText(k.Want), ratText(k.Got)))
	case *kind.Maximum:
		c.add(p, fmt.Sprintf("must be at most %s, not %s", ratText(k.Want), ratText(k.Got)))
	case *kind.UniqueItems:
		c.add(p, fmt.Sprintf("lists the same value twice (items %d and %d); give each once", k.Duplicates[0], k.Duplicates[1]))
	default:
		c.add(p, e.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
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
