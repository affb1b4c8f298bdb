package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
)

var msgIDPattern = regexp.MustCompile(`^(task_dispatch|task_result|review_request|review_verdict|escalation|ack|ping)-[A-Za-z0-9][A-Za-z0-9._-]*-[0-9]{13}$`)

// FuzzValidate builds messages of every type from arbitrary payload bytes.
// Validation must never panic, must refuse only with a *ValidationError
// (the fake store never fails), and what it accepts must be a well-formed
// envelope that validates again, decodes, and renders.
func FuzzValidate(f *testing.F) {
	s, m := seeded(f)
	for i, p := range []string{
		dispatchPayload,
		`{"description":"d","branch":"main","acceptance_criteria":[],"risk_level":"x","subtasks":[{"subtask_id":"a","description":"b"},{"subtask_id":"a","description":"c"}],"timeout_minutes":1.5}`,
		`{"status":"completed","summary":"s","commit_hash":"0123456"}`,
		`{"original_dispatch_ref":"` + m["dispatch"].MsgID + `","task_result_ref":"` + m["result"].MsgID + `","reject_count":0,"acceptance_criteria":["a"]}`,
		`{"verdict":"rejected","issues":[]}`,
		`{"reason":"r","summary":"s","details":{"a":[1,{"b":null}]}}`,
		`{"ack_of":"` + m["dispatch"].MsgID + `"}`,
		`{"code":"CORE_BOOTSTRAP_PING"}`,
		`{"a":1,"a":2}`, `[]`, `null`, `{`, "\xff", ``, `{"description":"\u0000"}`, `{"0":{"1":[{"2":3}]}}`,
	} {
		f.Add(uint8(i), []byte(p))
	}
	b := newBuilder(s)
	f.Fuzz(func(t *testing.T, typ uint8, payload []byte) {
		ty := Types[int(typ)%len(Types)]
		from, to, task := "lead", "backend", "T-42"
		switch ty {
		case TypeAck:
			from, to = "backend", "lead"
		case TypePing:
			from, task = "swarm", "team-analysis"
		}
		d := Draft{Type: ty, From: from, To: to, TaskID: task, Payload: payload}
		if typ >= 128 {
			d.ContextRef = []string{m["dispatch"].MsgID}
		}
		env, data, err := b.Build(ctx, d)

		if json.Valid(payload) {
			var c collector
			duplicateKeys(&c, payload)
			var got []string
			for _, f := range c.fields {
				got = append(got, f.Path)
			}
			if want := tokenDuplicates(payload); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("duplicate keys: scanner %q, decoder %q", got, want)
			}
		}

		// Validating the raw bytes as a whole envelope must not panic either.
		if _, verr := b.Validate(ctx, payload); verr != nil {
			var ve *ValidationError
			if !errors.As(verr, &ve) {
				t.Fatalf("Validate: not a ValidationError: %v", verr)
			}
		}

		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("not a ValidationError: %T %v", err, err)
			}
			if len(ve.Fields) == 0 {
				t.Fatal("a ValidationError without fields")
			}
			for i, fe := range ve.Fields {
				if fe.Path == "" || fe.Reason == "" || strings.Contains(fe.Reason, "\n") {
					t.Fatalf("field error %d is not one readable line: %q", i, fe)
				}
				if i > 0 && comparePaths(ve.Fields[i-1].Path, fe.Path) > 0 {
					t.Fatalf("fields out of order: %v", ve)
				}
			}
			return
		}
		if !msgIDPattern.MatchString(env.MsgID) {
			t.Fatalf("msg_id %q", env.MsgID)
		}
		if _, err := b.Validate(ctx, data); err != nil {
			t.Fatalf("accepted, but the stored envelope does not validate: %v\n%s", err, data)
		}
		var want bytes.Buffer
		if len(bytes.TrimSpace(payload)) == 0 {
			want.WriteString("{}")
		} else if err := json.Compact(&want, payload); err != nil {
			t.Fatalf("accepted a payload that is not JSON: %q", payload)
		}
		if !bytes.Equal(env.Payload, want.Bytes()) {
			t.Fatalf("payload changed beyond whitespace:\n got %s\nwant %s", env.Payload, want.Bytes())
		}
		parsed, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parsed.DecodePayload()
		if err != nil || p.PayloadType() != ty {
			t.Fatalf("decoding an accepted payload: %v", err)
		}
		if body := Body(parsed); body == "" || strings.Contains(body, "\n") {
			t.Fatalf("body %q is not one line", body)
		}
		if !strings.Contains(RenderPrompt(parsed, AckState{}, t0), string(env.Payload)) {
			t.Fatal("the prompt does not show the payload")
		}
	})
}

// tokenDuplicates finds duplicate keys the slow, obvious way, with
// json.Decoder.Token: the oracle for the scanner in duplicateKeys.
func tokenDuplicates(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	// Numbers stay text: a valid 300-digit number overflows float64, and
	// the oracle must not fail where the scanner (rightly) does not.
	dec.UseNumber()
	var out []string
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k := kt.(string)
				kp := joinKey(path, k)
				if seen[k] {
					out = append(out, kp)
				}
				seen[k] = true
				if err := walk(kp); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(joinIndex(path, i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	if err := walk(""); err != nil && err != io.EOF {
		return []string{"error: " + err.Error()}
	}
	return out
}

func TestDuplicateKeys(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`,
		`{"a":{"b":[1,{"c":1,"c":{"d":2}}],"b":"x"},"\u0061":3}`,
		` [ {"k" : "v\"}" , "k":true } , [] , {} ] `,
		`"plain"`, `12`, `{}`, `[{"x":null,"y":null,"x":null}]`,
	} {
		var c collector
		duplicateKeys(&c, []byte(in))
		var got []string
		for _, f := range c.fields {
			got = append(got, f.Path)
		}
		if want := tokenDuplicates([]byte(in)); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: scanner %q, decoder %q", in, got, want)
		}
	}
}
