package protocol

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSchemasCompile(t *testing.T) {
	c, err := compileSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range Types {
		if c.byType[typ] == nil {
			t.Errorf("no schema for %s", typ)
		}
		if _, err := Schema(string(typ)); err != nil {
			t.Error(err)
		}
	}
}

func loadSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := Schema(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// objectFields returns an object schema's property names (sorted), its
// required list, and whether it refuses other properties.
func objectFields(t *testing.T, name string, s map[string]any) (props, required []string) {
	t.Helper()
	if s["additionalProperties"] != false {
		t.Errorf("%s: additionalProperties is not false, so a typo in a field name would pass", name)
	}
	for k := range s["properties"].(map[string]any) {
		props = append(props, k)
	}
	for _, r := range s["required"].([]any) {
		required = append(required, r.(string))
	}
	slices.Sort(props)
	return props, required
}

// goFields returns a struct's JSON names (sorted) and, in order, those
// without omitempty: the ones the contract requires.
func goFields(v any) (all, required []string) {
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		f := rt.Field(i)
		all = append(all, jsonName(f))
		if !strings.Contains(f.Tag.Get("json"), "omitempty") {
			required = append(required, jsonName(f))
		}
	}
	slices.Sort(all)
	return all, required
}

// TestSchemasMatchGoTypes keeps the two descriptions of the protocol, the
// schemas and the Go structs, from drifting apart.
func TestSchemasMatchGoTypes(t *testing.T) {
	check := func(name string, s map[string]any, v any) {
		t.Helper()
		props, required := objectFields(t, name, s)
		all, goRequired := goFields(v)
		if !slices.Equal(props, all) {
			t.Errorf("%s: schema properties %v, Go fields %v", name, props, all)
		}
		if !slices.Equal(required, goRequired) {
			t.Errorf("%s: schema requires %v, Go (fields without omitempty, in order) %v", name, required, goRequired)
		}
	}
	env := loadSchema(t, "envelope")
	check("envelope", env, Envelope{})
	for _, typ := range Types {
		doc := loadSchema(t, string(typ))
		payload := doc["properties"].(map[string]any)["payload"].(map[string]any)
		p := reflect.ValueOf(newPayload(typ)).Elem().Interface()
		check(string(typ), payload, p)
		if typ == TypeTaskDispatch {
			items := payload["properties"].(map[string]any)["subtasks"].(map[string]any)["items"].(map[string]any)
			check("subtask", items, Subtask{})
		}
	}
	// The envelope's type enum is the list of types.
	var enum []string
	for _, v := range env["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	if strings.Join(enum, ", ") != typeList() {
		t.Errorf("envelope type enum %v, Types %s", enum, typeList())
	}
}

// TestEveryPatternIsExplained: a pattern error shows the sentence from
// patternHelp, never the regular expression.
func TestEveryPatternIsExplained(t *testing.T) {
	var walk func(v any)
	seen := 0
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["pattern"].(string); ok {
				seen++
				if patternHelp[p] == "" {
					t.Errorf("pattern %s has no entry in patternHelp", p)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(loadSchema(t, "envelope"))
	for _, typ := range Types {
		walk(loadSchema(t, string(typ)))
	}
	if seen == 0 {
		t.Fatal("found no patterns")
	}
}

func TestSuggest(t *testing.T) {
	allowed := []string{"description", "branch", "acceptance_criteria", "risk_level"}
	for in, want := range map[string]string{
		"acceptance_criterias": "acceptance_criteria",
		"risk-level":           "risk_level",
		"Branch":               "branch",
		"desc":                 "description",
		"priority":             "",
		"x":                    "",
	} {
		if got := suggest(in, allowed); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
