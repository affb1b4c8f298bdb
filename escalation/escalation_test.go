package escalation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDraftNormalizeAndValidate(t *testing.T) {
	d := Draft{Kind: KindApproval, Agent: "backend", Summary: "  may I drop it?  ", Ref: " msg:4 "}.Normalize()
	if d.Severity != Info || d.Summary != "may I drop it?" || d.Ref != "msg:4" || d.DedupeKey != `["approval","backend","msg:4","may I drop it?"]` {
		t.Fatalf("normalized = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		d    Draft
		want string
	}{
		{Draft{Kind: "gossip", Summary: "x"}, `unknown kind "gossip"`},
		{Draft{Kind: KindAgent, Severity: "dire", Summary: "x"}, `unknown severity "dire"`},
		{Draft{Kind: KindAgent, Summary: " "}, "the summary is empty"},
		{Draft{Kind: KindAgent, Summary: strings.Repeat("x", MaxSummary+1)}, "put the rest in the details"},
		{Draft{Kind: KindAgent, Summary: "x", Agent: "operator"}, `"operator" is not an agent name`},
		{Draft{Kind: KindAgent, Summary: "x", Details: []byte(`[1]`)}, "must be a JSON object"},
		{Draft{Kind: KindAgent, Summary: "x", Hold: true}, "a hold needs an agent"},
	} {
		if err := tt.d.Normalize().Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.d, err, tt.want)
		}
	}
	if d := (Draft{Kind: KindAgent, Summary: "x", Details: []byte("null")}).Normalize(); d.Details != nil || d.Validate() != nil {
		t.Errorf("null details = %s", d.Details)
	}
}

// nested is an object n levels deep: {"a":{"a":…{}…}}.
func nested(n int) []byte {
	return []byte(strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1))
}

// Details nesting deeper than 64 levels are refused with a clear reason:
// 5,000 levels made `swarm escalations --json` unreadable to jq. Brackets
// inside strings do not count.
func TestDetailsDepthIsCapped(t *testing.T) {
	ok := Draft{Kind: KindAgent, Summary: "x", Details: nested(MaxDetailsDepth)}
	if err := ok.Normalize().Validate(); err != nil {
		t.Fatalf("%d levels: %v", MaxDetailsDepth, err)
	}
	for _, n := range []int{MaxDetailsDepth + 1, 5000} {
		err := Draft{Kind: KindAgent, Summary: "x", Details: nested(n)}.Normalize().Validate()
		if err == nil || !strings.Contains(err.Error(), "levels deep, more than 64: flatten them") {
			t.Errorf("%d levels: %v", n, err)
		}
	}
	s := []byte(`{"s": "[[[[` + strings.Repeat("{[", 100) + `\"", "t": "\\"}`)
	if err := CheckDetailsDepth(s); err != nil {
		t.Errorf("brackets in strings counted: %v", err)
	}
}

func TestDefaultSeverities(t *testing.T) {
	for k, want := range map[Kind]Severity{KindAgent: Warning, KindApproval: Info, KindStageTimeout: Warning, KindCIFailure: Warning,
		KindBranchViolation: Critical, KindStalled: Critical, KindErrors: Critical, KindBudget: Critical} {
		if got := DefaultSeverity(k); got != want {
			t.Errorf("%s: %s, want %s", k, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	legal := [][3]string{{"", "raise", "open"}, {"open", "ack", "acked"}, {"open", "resume", "resolved"},
		{"acked", "abort", "resolved"}, {"acked", "approve", "resolved"}, {"open", "reject", "resolved"}}
	for _, e := range legal {
		if err := Table.Check(State(e[0]), Event(e[1]), State(e[2])); err != nil {
			t.Error(err)
		}
	}
	illegal := [][3]string{{"acked", "ack", "acked"}, {"resolved", "resume", "resolved"}, {"open", "raise", "open"}, {"resolved", "ack", "acked"}}
	for _, e := range illegal {
		if err := Table.Check(State(e[0]), Event(e[1]), State(e[2])); err == nil {
			t.Errorf("%v allowed", e)
		}
	}
	if !Resume.Releases() || !Approve.Releases() || Abort.Releases() || Reject.Releases() {
		t.Error("Releases")
	}
}

func TestSortAndPayload(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	es := []Escalation{
		{ID: 1, Severity: Info, CreatedAt: now},
		{ID: 2, Severity: Critical, CreatedAt: now},
		{ID: 3, Severity: Warning, CreatedAt: now.Add(time.Minute)},
		{ID: 4, Severity: Critical, CreatedAt: now.Add(time.Minute)},
	}
	Sort(es)
	var ids []int64
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	if got := ids; got[0] != 4 || got[1] != 2 || got[2] != 3 || got[3] != 1 {
		t.Fatalf("order = %v", got)
	}
	agent := "backend"
	b, err := Payload(Escalation{ID: 7, Kind: KindAgent, Severity: Warning, State: Open, Agent: &agent, Summary: "s", Count: 1, CreatedAt: now}, EventOpened)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"id", "kind", "severity", "state", "hold", "agent", "ref", "summary", "details", "dedupe_key", "count",
		"created_at", "acked_at", "resolved_at", "decision", "note", "event"} {
		if _, ok := m[k]; !ok {
			t.Errorf("payload has no %q: %s", k, b)
		}
	}
	if len(m) != 17 || m["event"] != EventOpened || m["agent"] != "backend" || m["ref"] != nil {
		t.Errorf("payload = %s", b)
	}
}

func TestAbout(t *testing.T) {
	agent := "backend"
	for _, tc := range []struct {
		e    Escalation
		want string
	}{
		{Escalation{}, ""},
		{Escalation{Agent: &agent, State: Open}, "backend"},
		{Escalation{Agent: &agent, State: Open, Hold: true}, "backend (held)"},
		{Escalation{Agent: &agent, State: Resolved, Hold: true}, "backend"},
	} {
		if got := tc.e.About(); got != tc.want {
			t.Errorf("%+v: About() = %q, want %q", tc.e, got, tc.want)
		}
	}
}
