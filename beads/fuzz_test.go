package beads

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// FuzzParseReady checks that any input either parses into issues that all
// have ids and survive a round trip, or fails with ErrBadOutput; it never
// panics. The seed corpus in testdata/fuzz/FuzzParseReady holds the real bd
// outputs.
func FuzzParseReady(f *testing.F) {
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"schema_version":1,"data":[{"id":"x-1","priority":2}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		issues, err := ParseReady(data)
		if err != nil {
			if !errors.Is(err, ErrBadOutput) {
				t.Fatalf("err = %v, not ErrBadOutput", err)
			}
			return
		}
		if issues == nil {
			t.Fatal("nil issues without an error")
		}
		for _, is := range issues {
			if is.ID == "" {
				t.Fatalf("issue without id: %+v", is)
			}
		}
		again, err := json.Marshal(issues)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseReady(again)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
		if !slices.EqualFunc(issues, back, func(a, b Issue) bool {
			return a.ID == b.ID && a.Title == b.Title && a.Priority == b.Priority && a.Status == b.Status &&
				a.IssueType == b.IssueType && slices.Equal(a.Labels, b.Labels)
		}) {
			t.Fatalf("round trip changed %+v into %+v", issues, back)
		}
	})
}
