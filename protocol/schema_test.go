package protocol

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
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

// TestVerdictsMatchTheLibrary: check, which names every failing field,
// accepts exactly what github.com/google/jsonschema-go's own validator
// accepts, on envelopes of every type with valid, broken and odd payloads
// and envelope fields.
func TestVerdictsMatchTheLibrary(t *testing.T) {
	_, m := seeded(t)
	payloads := []string{
		dispatchPayload, `{}`, `[]`, `null`, `"x"`, `3`,
		`{"description":"d","branch":"main","acceptance_criteria":[],"risk_level":"x","subtasks":[{"subtask_id":"a","description":"b"},{"subtask_id":"a","description":"c","owner":1}],"timeout_minutes":1.5}`,
		`{"description":"d","branch":"b","acceptance_criteria":["a",2,""],"risk_level":"low","timeout_minutes":2.0,"forbidden_actions":"x"}`,
		`{"description":"d","branch":"b","acceptance_criteria":["a"],"risk_level":"low","timeout_minutes":1e3}`,
		`{"description":"d","branch":"b","acceptance_criteria":["a"],"risk_level":"low","timeout_minutes":10081}`,
		`{"status":"completed","summary":"s","commit_hash":"0123456"}`,
		`{"status":"done","summary":"","commit_hash":"HEAD","artifacts":"a.md"}`,
		`{"original_dispatch_ref":"` + m["dispatch"].MsgID + `","task_result_ref":"` + m["result"].MsgID + `","reject_count":0,"acceptance_criteria":["a"]}`,
		`{"original_dispatch_ref":"the dispatch","task_result_ref":1,"reject_count":-1,"acceptance_criteria":[]}`,
		`{"verdict":"rejected","issues":[]}`, `{"verdict":"maybe","score":9}`,
		`{"reason":"r","summary":"s","details":{"a":[1,{"b":null}]}}`, `{"reason":"r","summary":"s","details":3}`,
		`{"ack_of":"` + m["dispatch"].MsgID + `"}`, `{"ack_of":"x","note":"ok"}`,
		`{"code":"CORE_BOOTSTRAP_PING"}`, `{"code":"hello"}`, `{"my field":1}`,
	}
	envelope := func(typ Type, payload string) map[string]any {
		var env map[string]any
		data, err := json.Marshal(m["dispatch"])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &env); err != nil {
			t.Fatal(err)
		}
		env["type"] = string(typ)
		env["payload"] = json.RawMessage(payload)
		return env
	}
	var docs [][]byte
	add := func(env map[string]any) {
		data, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, data)
	}
	for _, typ := range Types {
		for _, p := range payloads {
			add(envelope(typ, p))
		}
	}
	for k, v := range map[string]any{
		"protocol_version": "AMP/2.0", "msg_id": "x", "from": "Lead", "to": 3, "task_id": "",
		"timestamp": "yesterday", "requires_ack": "yes", "ack_timeout_sec": 1.5, "context_ref": []string{"a", "a"},
		"extra": true, "type": "task_dispach",
	} {
		env := envelope(TypeTaskDispatch, dispatchPayload)
		env[k] = v
		add(env)
		delete(env, k)
		add(env)
	}
	for _, ack := range []any{2.0, 604801, -1, 0} {
		env := envelope(TypeTaskDispatch, dispatchPayload)
		env["ack_timeout_sec"] = ack
		add(env)
	}

	s := schemas()
	accepted, refused := 0, 0
	for _, data := range docs {
		doc, err := decodeJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := doc.(map[string]any)["type"].(string)
		typ := Type(name)
		sch, res := s.byType[typ], s.resolved[typ]
		var plain any // the library reads numbers as float64
		if err := json.Unmarshal(data, &plain); err != nil {
			t.Fatal(err)
		}
		if sch == nil {
			// An unknown type: the envelope alone, as checkSchema does.
			sch, res = s.envelope, resolveEnvelope(t)
		}
		var faults []fault
		s.check(sch, doc, nil, &faults)
		lib := res.Validate(plain)
		if (len(faults) == 0) != (lib == nil) {
			t.Errorf("%s\n check found %d faults %+v; the library said %v", data, len(faults), faults, lib)
		}
		if lib == nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted < 10 || refused < 100 {
		t.Errorf("the corpus proves little: %d accepted, %d refused", accepted, refused)
	}
}

func resolveEnvelope(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	data, err := Schema("envelope")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	res, err := s.Resolve(&jsonschema.ResolveOptions{BaseURI: schemaBase + "envelope.json"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
