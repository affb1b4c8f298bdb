package protocol

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

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
