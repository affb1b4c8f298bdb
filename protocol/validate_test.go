package protocol

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// draftFor makes a draft of type t from sender to recipient about task with
// payload p; ping drafts get a team task id.
func draftFor(t Type, from, to, task, p string) Draft {
	return Draft{Type: t, From: from, To: to, TaskID: task, Payload: []byte(p)}
}

func TestValidPayloads(t *testing.T) {
	s, m := seeded(t)
	dispatch, result, review, ping := m["dispatch"].MsgID, m["result"].MsgID, m["review"].MsgID, m["ping"].MsgID
	tests := []struct {
		name  string
		draft Draft
		want  Payload
	}{
		{"dispatch minimal", draftFor(TypeTaskDispatch, "lead", "backend", "T-42", dispatchPayload), nil},
		{"dispatch full", draftFor(TypeTaskDispatch, "lead", "backend", "T-42", `{"description":"d","branch":"feature/watch-breath-v2","acceptance_criteria":["a"],"risk_level":"high","repo":"rhylm","subtasks":[{"subtask_id":"S-1","description":"one"},{"subtask_id":"S-2","description":"two"}],"forbidden_actions":["push --force"],"timeout_minutes":30}`),
			TaskDispatch{Description: "d", Branch: "feature/watch-breath-v2", AcceptanceCriteria: []string{"a"}, RiskLevel: "high", Repo: "rhylm",
				Subtasks: []Subtask{{"S-1", "one"}, {"S-2", "two"}}, ForbiddenActions: []string{"push --force"}, TimeoutMinutes: 30}},
		{"result minimal", draftFor(TypeTaskResult, "backend", "lead", "T-42", `{"status":"blocked","summary":"need the schema"}`), TaskResult{Status: "blocked", Summary: "need the schema"}},
		{"result full", draftFor(TypeTaskResult, "backend", "lead", "T-42", `{"status":"completed","summary":"s","work_log":"l","commit_hash":"0123456789abcdef0123456789abcdef01234567","artifacts":["docs/a.md"],"subtask_id":"S-1"}`), nil},
		{"review request", draftFor(TypeReviewRequest, "swarm", "critic", "T-42", `{"original_dispatch_ref":"`+dispatch+`","task_result_ref":"`+result+`","reject_count":0,"acceptance_criteria":["a"]}`), nil},
		{"verdict approved", draftFor(TypeReviewVerdict, "critic", "swarm", "T-42", `{"verdict":"approved","summary":"clean"}`), ReviewVerdict{Verdict: "approved", Summary: "clean"}},
		{"verdict rejected", draftFor(TypeReviewVerdict, "critic", "swarm", "T-42", `{"verdict":"rejected","issues":["no tests for page 2"]}`), nil},
		{"escalation", draftFor(TypeEscalation, "backend", "operator", "T-42", `{"reason":"unclear_requirements","summary":"which endpoint?","details":{"asked":"lead"}}`), nil},
		{"escalation details text", draftFor(TypeEscalation, "backend", "operator", "T-42", `{"reason":"r","summary":"s","details":"free text"}`), nil},
		{"ack of dispatch", draftFor(TypeAck, "backend", "lead", "T-42", `{"ack_of":"`+dispatch+`"}`), Ack{AckOf: dispatch}},
		{"ack of review", draftFor(TypeAck, "critic", "swarm", "T-42", `{"ack_of":"`+review+`"}`), nil},
		{"ack of ping", draftFor(TypeAck, "backend", "swarm", "team-analysis", `{"ack_of":"`+ping+`"}`), nil},
		{"ping", draftFor(TypePing, "swarm", "backend", "team-analysis", `{"code":"CORE_BOOTSTRAP_PING"}`), Ping{Code: "CORE_BOOTSTRAP_PING"}},
		{"context refs", Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", ContextRef: []string{dispatch, review}, Payload: []byte(`{"status":"failed","summary":"s"}`)}, nil},
		{"branch named like main", draftFor(TypeTaskDispatch, "lead", "backend", "T-42", `{"description":"d","branch":"swarm/main","acceptance_criteria":["a"],"risk_level":"low"}`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder(s)
			env, data, err := b.Build(ctx, tt.draft)
			if err != nil {
				t.Fatalf("refused:\n%v", err)
			}
			if _, err := b.Validate(ctx, data); err != nil {
				t.Fatalf("what Build returned does not validate:\n%v", err)
			}
			p, err := env.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			if p.PayloadType() != tt.draft.Type {
				t.Errorf("decoded a %s", p.PayloadType())
			}
			if tt.want != nil && !reflect.DeepEqual(p, tt.want) {
				t.Errorf("decoded\n %#v\nwant %#v", p, tt.want)
			}
		})
	}
}

// TestInvalidPayloads refuses one mistake (or a few) per case and checks
// that exactly the expected fields are named, each with a reason containing
// the given text.
func TestInvalidPayloads(t *testing.T) {
	s, m := seeded(t)
	dispatch, result, ping := m["dispatch"].MsgID, m["result"].MsgID, m["ping"].MsgID
	other := m["other-dispatch"].MsgID
	td := func(p string) Draft { return draftFor(TypeTaskDispatch, "lead", "backend", "T-42", p) }
	// withTD replaces one field of a valid dispatch payload.
	withTD := func(field, value string) Draft {
		fields := map[string]string{"description": `"d"`, "branch": `"swarm/backend"`, "acceptance_criteria": `["a"]`, "risk_level": `"low"`}
		fields[field] = value
		var parts []string
		for _, k := range []string{"description", "branch", "acceptance_criteria", "risk_level"} {
			if v := fields[k]; v != "" {
				parts = append(parts, `"`+k+`":`+v)
			}
		}
		for k, v := range fields {
			if !strings.Contains(strings.Join(parts, ","), `"`+k+`"`) {
				parts = append(parts, `"`+k+`":`+v)
			}
		}
		return td("{" + strings.Join(parts, ",") + "}")
	}
	tr := func(p string) Draft { return draftFor(TypeTaskResult, "backend", "lead", "T-42", p) }
	rr := func(p string) Draft { return draftFor(TypeReviewRequest, "swarm", "critic", "T-42", p) }
	rv := func(p string) Draft { return draftFor(TypeReviewVerdict, "critic", "swarm", "T-42", p) }
	esc := func(p string) Draft { return draftFor(TypeEscalation, "backend", "operator", "T-42", p) }
	ack := func(from, to, task, of string) Draft {
		return draftFor(TypeAck, from, to, task, `{"ack_of":"`+of+`"}`)
	}
	pg := func(task, p string) Draft { return draftFor(TypePing, "swarm", "backend", task, p) }

	tests := []struct {
		name  string
		draft Draft
		want  map[string]string // path → part of the reason
	}{
		// Unknown fields, for every type.
		{"dispatch unknown field", withTD("acceptance_criterias", `["a"]`), map[string]string{"payload.acceptance_criterias": `is not a field of a task_dispatch payload (did you mean "acceptance_criteria"?); the fields are description, branch, acceptance_criteria, risk_level, repo, subtasks, forbidden_actions, timeout_minutes`}},
		{"subtask unknown field", withTD("subtasks", `[{"subtask_id":"S-1","description":"x","owner":"me"}]`), map[string]string{"payload.subtasks[0].owner": "is not a field of a subtask; the fields are subtask_id, description"}},
		{"result unknown field", tr(`{"status":"completed","summary":"s","sumary":"t"}`), map[string]string{"payload.sumary": `(did you mean "summary"?)`}},
		{"review unknown field", rr(`{"original_dispatch_ref":"` + dispatch + `","task_result_ref":"` + result + `","reject_count":0,"acceptance_criteria":["a"],"diff_url":"x"}`), map[string]string{"payload.diff_url": "is not a field of a review_request payload"}},
		{"verdict unknown field", rv(`{"verdict":"approved","score":9}`), map[string]string{"payload.score": "is not a field of a review_verdict payload"}},
		{"escalation unknown field", esc(`{"reason":"r","summary":"s","severity":"high"}`), map[string]string{"payload.severity": "is not a field of an escalation payload"}},
		{"ack unknown field", draftFor(TypeAck, "backend", "lead", "T-42", `{"ack_of":"`+dispatch+`","note":"ok"}`), map[string]string{"payload.note": "the fields are ack_of"}},
		{"ping unknown field", pg("team-a", `{"code":"X","extra":1}`), map[string]string{"payload.extra": "is not a field of a ping payload"}},
		{"odd key is quoted", tr(`{"status":"completed","summary":"s","my field":1}`), map[string]string{`payload["my field"]`: "is not a field"}},

		// Missing required fields, for every type.
		{"dispatch empty payload", td(``), map[string]string{"payload.description": "is required", "payload.branch": "is required", "payload.acceptance_criteria": "is required", "payload.risk_level": "is required"}},
		{"result missing", tr(`{"status":"completed"}`), map[string]string{"payload.summary": "is required"}},
		{"review missing", rr(`{}`), map[string]string{"payload.original_dispatch_ref": "is required", "payload.task_result_ref": "is required", "payload.reject_count": "is required", "payload.acceptance_criteria": "is required"}},
		{"verdict missing", rv(`{"issues":["x"]}`), map[string]string{"payload.verdict": "is required"}},
		{"escalation missing", esc(`{"summary":"s"}`), map[string]string{"payload.reason": "is required"}},
		{"ack missing", draftFor(TypeAck, "backend", "lead", "T-42", `{}`), map[string]string{"payload.ack_of": "is required"}},
		{"ping missing", pg("team-a", `{}`), map[string]string{"payload.code": "is required"}},
		{"subtask missing id", withTD("subtasks", `[{"description":"x"}]`), map[string]string{"payload.subtasks[0].subtask_id": "is required"}},

		// task_dispatch rules.
		{"blank description", withTD("description", `"  \n "`), map[string]string{"payload.description": "must not be blank"}},
		{"empty description", withTD("description", `""`), map[string]string{"payload.description": "must not be empty"}},
		{"branch main", withTD("branch", `"main"`), map[string]string{"payload.branch": `branch "main" is protected`}},
		{"branch master", withTD("branch", `"master"`), map[string]string{"payload.branch": `branch "master" is protected`}},
		{"branch base", withTD("branch", `"develop"`), map[string]string{"payload.branch": `the base branch "develop"`}},
		{"branch Main", withTD("branch", `"Main"`), map[string]string{"payload.branch": "is protected"}},
		{"branch refs/heads/main", withTD("branch", `"refs/heads/main"`), map[string]string{"payload.branch": "is protected"}},
		{"branch not a ref", withTD("branch", `"my branch"`), map[string]string{"payload.branch": `is not a valid git branch name: it contains ' '`}},
		{"branch with ..", withTD("branch", `"a..b"`), map[string]string{"payload.branch": "contains '..'"}},
		{"branch .lock", withTD("branch", `"a/b.lock"`), map[string]string{"payload.branch": "ends with '.lock'"}},
		{"no criteria", withTD("acceptance_criteria", `[]`), map[string]string{"payload.acceptance_criteria": "must contain at least 1 item"}},
		{"criteria not a list", withTD("acceptance_criteria", `"tests pass"`), map[string]string{"payload.acceptance_criteria": "must be an array, not a string"}},
		{"criteria of numbers", withTD("acceptance_criteria", `["a",2]`), map[string]string{"payload.acceptance_criteria[1]": "must be a string, not a number"}},
		{"empty criterion", withTD("acceptance_criteria", `["a",""]`), map[string]string{"payload.acceptance_criteria[1]": "must not be empty"}},
		{"blank criterion", withTD("acceptance_criteria", `["a"," "]`), map[string]string{"payload.acceptance_criteria[1]": "must not be blank"}},
		{"criteria null", withTD("acceptance_criteria", `null`), map[string]string{"payload.acceptance_criteria": "must be an array, not null"}},
		{"duplicate subtasks", withTD("subtasks", `[{"subtask_id":"S-1","description":"a"},{"subtask_id":"S-2","description":"b"},{"subtask_id":"S-1","description":"c"}]`), map[string]string{"payload.subtasks[2].subtask_id": `repeats "S-1" from subtasks[0]`}},
		{"blank subtask", withTD("subtasks", `[{"subtask_id":" ","description":"a"}]`), map[string]string{"payload.subtasks[0].subtask_id": "must not be blank"}},
		{"risk urgent", withTD("risk_level", `"urgent"`), map[string]string{"payload.risk_level": `must be one of "low", "medium", "high", not "urgent"`}},
		{"risk upper-case", withTD("risk_level", `"HIGH"`), map[string]string{"payload.risk_level": "must be one of"}},
		{"timeout zero", withTD("timeout_minutes", `0`), map[string]string{"payload.timeout_minutes": "must be at least 1, not 0"}},
		{"timeout float", withTD("timeout_minutes", `1.5`), map[string]string{"payload.timeout_minutes": "must be a whole number, not a number"}},
		{"timeout 2.0", withTD("timeout_minutes", `2.0`), map[string]string{"payload.timeout_minutes": "whole number written plainly"}},
		{"forbidden blank", withTD("forbidden_actions", `["  "]`), map[string]string{"payload.forbidden_actions[0]": "must not be blank"}},
		{"many at once", td(`{"description":"","branch":"main","acceptance_criteria":[],"risk_level":"x"}`), map[string]string{
			"payload.description": "must not be empty", "payload.branch": "is protected", "payload.acceptance_criteria": "at least 1 item", "payload.risk_level": "must be one of"}},

		// task_result rules.
		{"bad status", tr(`{"status":"done","summary":"s"}`), map[string]string{"payload.status": `must be one of "completed", "failed", "blocked", not "done"`}},
		{"blank summary", tr(`{"status":"completed","summary":"\t"}`), map[string]string{"payload.summary": "must not be blank"}},
		{"unknown commit", tr(`{"status":"completed","summary":"s","commit_hash":"deadbeef"}`), map[string]string{"payload.commit_hash": "no commit deadbeef in the repository"}},
		{"commit not hex", tr(`{"status":"completed","summary":"s","commit_hash":"HEAD"}`), map[string]string{"payload.commit_hash": `must be a commit hash in lower-case hex, 7 to 64 digits (git rev-parse HEAD prints it), not "HEAD"`}},
		{"artifacts not list", tr(`{"status":"completed","summary":"s","artifacts":"a.md"}`), map[string]string{"payload.artifacts": "must be an array"}},

		// review_request rules.
		{"refs not stored", rr(`{"original_dispatch_ref":"task_dispatch-T-42-1000000000000","task_result_ref":"task_result-T-42-1000000000000","reject_count":0,"acceptance_criteria":["a"]}`), map[string]string{
			"payload.original_dispatch_ref": `no stored message has msg_id "task_dispatch-T-42-1000000000000"`, "payload.task_result_ref": "no stored message"}},
		{"refs swapped", rr(`{"original_dispatch_ref":"` + result + `","task_result_ref":"` + dispatch + `","reject_count":0,"acceptance_criteria":["a"]}`), map[string]string{
			"payload.original_dispatch_ref": "names a task_result; it must name the task_dispatch", "payload.task_result_ref": "names a task_dispatch; it must name the task_result"}},
		{"ref to another task", rr(`{"original_dispatch_ref":"` + other + `","task_result_ref":"` + result + `","reject_count":0,"acceptance_criteria":["a"]}`), map[string]string{
			"payload.original_dispatch_ref": "is about task T-41, not T-42"}},
		{"ref malformed", rr(`{"original_dispatch_ref":"the dispatch","task_result_ref":"` + result + `","reject_count":0,"acceptance_criteria":["a"]}`), map[string]string{
			"payload.original_dispatch_ref": `must be a msg_id such as task_dispatch-T-42-1763900000123`}},
		{"negative reject count", rr(`{"original_dispatch_ref":"` + dispatch + `","task_result_ref":"` + result + `","reject_count":-1,"acceptance_criteria":["a"]}`), map[string]string{"payload.reject_count": "must be at least 0, not -1"}},
		{"review without criteria", rr(`{"original_dispatch_ref":"` + dispatch + `","task_result_ref":"` + result + `","reject_count":0,"acceptance_criteria":[]}`), map[string]string{"payload.acceptance_criteria": "must contain at least 1 item"}},

		// review_verdict rules.
		{"verdict maybe", rv(`{"verdict":"maybe"}`), map[string]string{"payload.verdict": `must be one of "approved", "rejected", not "maybe"`}},
		{"rejected without issues", rv(`{"verdict":"rejected"}`), map[string]string{"payload.issues": "must list at least 1 issue when the verdict is rejected"}},
		{"rejected with no issues", rv(`{"verdict":"rejected","issues":[]}`), map[string]string{"payload.issues": "must list at least 1 issue"}},
		{"blank issue", rv(`{"verdict":"rejected","issues":["x"," "]}`), map[string]string{"payload.issues[1]": "must not be blank"}},

		// escalation rules.
		{"blank reason", esc(`{"reason":" ","summary":"s"}`), map[string]string{"payload.reason": "must not be blank"}},
		{"details a number", esc(`{"reason":"r","summary":"s","details":3}`), map[string]string{"payload.details": "must be a string, an array or an object, not a number"}},

		// ack rules.
		{"ack of nothing", ack("backend", "lead", "T-42", "task_dispatch-T-42-1000000000000"), map[string]string{"payload.ack_of": `no stored message has msg_id "task_dispatch-T-42-1000000000000"`}},
		{"ack by someone else", ack("frontend", "lead", "T-42", dispatch), map[string]string{"payload.ack_of": "was sent to backend, not to frontend; only its recipient acknowledges it"}},
		{"ack of a message needing none", ack("lead", "backend", "T-42", result), map[string]string{"payload.ack_of": "does not ask for an ACK"}},
		{"ack to the wrong sender", ack("backend", "operator", "T-42", dispatch), map[string]string{"to": "must be lead, who sent " + dispatch}},
		{"ack about another task", ack("backend", "lead", "T-41", dispatch), map[string]string{"task_id": "must be T-42, the task of " + dispatch}},
		{"ack of ping to the wrong task", ack("backend", "swarm", "team-b", ping), map[string]string{"task_id": "must be team-analysis"}},

		// ping rules.
		{"ping code lower-case", pg("team-a", `{"code":"hello"}`), map[string]string{"payload.code": `must be an upper-case code such as CORE_BOOTSTRAP_PING, not "hello"`}},
		{"ping task not a team", pg("T-42", `{"code":"CORE_BOOTSTRAP_PING"}`), map[string]string{"task_id": `must be team-<name> for a ping, not "T-42"`}},

		// The envelope the draft fills.
		{"unknown context ref", Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", ContextRef: []string{dispatch, "task_result-T-9-1000000000000"}, Payload: []byte(`{"status":"completed","summary":"s"}`)},
			map[string]string{"context_ref[1]": `no stored message has msg_id "task_result-T-9-1000000000000"`}},
		{"malformed context ref", Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", ContextRef: []string{"x"}, Payload: []byte(`{"status":"completed","summary":"s"}`)},
			map[string]string{"context_ref[0]": `must be a msg_id`}},
		{"repeated context ref", Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", ContextRef: []string{dispatch, dispatch}, Payload: []byte(`{"status":"completed","summary":"s"}`)},
			map[string]string{"context_ref": "lists the same value twice (items 0 and 1)"}},
		{"unknown type", draftFor("task_dispach", "lead", "backend", "T-42", `{}`), map[string]string{"type": `must be one of "task_dispatch", "task_result", "review_request", "review_verdict", "escalation", "ack", "ping", not "task_dispach"`}},
		{"bad task id gives no msg_id error", draftFor(TypeTaskResult, "backend", "lead", "T 42", `{"status":"completed","summary":"s"}`), map[string]string{"task_id": `must be a task id such as T-42`}},
		{"no task id", draftFor(TypeTaskResult, "backend", "lead", "", `{"status":"completed","summary":"s"}`), map[string]string{"task_id": `must be a task id`}},
		{"bad recipient", draftFor(TypeTaskResult, "backend", "Lead", "T-42", `{"status":"completed","summary":"s"}`), map[string]string{"to": "must be an agent name"}},
		{"payload not JSON", td(`{"description": "d",}`), map[string]string{"payload": `is not valid JSON: invalid character '}' looking for beginning of object key string, at byte 21, after "\"description\": \"d\",}"`}},
		{"payload not JSON, other fields still checked", draftFor(TypeTaskDispatch, "lead", "backend", "T 42", `nope`), map[string]string{"payload": "is not valid JSON", "task_id": "must be a task id"}},
		{"payload an array", td(`["d"]`), map[string]string{"payload": "must be an object, not an array"}},
		{"payload null", td(`null`), map[string]string{"payload": "must be an object, not null"}},
		{"payload not UTF-8", td("{\"description\":\"\xff\"}"), map[string]string{"payload": "is not valid UTF-8"}},
		{"payload too big", td(`{"description":"` + strings.Repeat("x", MaxPayload) + `"}`), map[string]string{"payload": "the limit is 1048576 (1 MiB)"}},
		{"duplicate payload key", td(`{"description":"d","branch":"swarm/x","branch":"main","acceptance_criteria":["a"],"risk_level":"low"}`), map[string]string{"payload.branch": "is given twice"}},
		{"description too long", withTD("description", `"`+strings.Repeat("x", 70000)+`"`), map[string]string{"payload.description": "must be at most 65536 characters long, not 70000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, data, err := newBuilder(s).Build(ctx, tt.draft)
			if err == nil {
				t.Fatalf("accepted %s", data)
			}
			ve := asValidation(t, err)
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Path)
				if want, ok := tt.want[f.Path]; !ok {
					t.Errorf("unexpected error %v", f)
				} else if !strings.Contains(f.Reason, want) {
					t.Errorf("%s: reason %q does not contain %q", f.Path, f.Reason, want)
				}
			}
			for p := range tt.want {
				if _, ok := ve.Field(p); !ok {
					t.Errorf("no error at %s; got:\n%v", p, err)
				}
			}
			if !sort.SliceIsSorted(got, func(i, j int) bool { return comparePaths(got[i], got[j]) < 0 }) {
				t.Errorf("fields not in path order: %v", got)
			}
		})
	}
	if s.lookups == 0 {
		t.Error("the store was never asked")
	}
}

func TestBranchViolationIsTyped(t *testing.T) {
	s, _ := seeded(t)
	d := dispatchDraft()
	d.Payload = []byte(`{"description":"","branch":"master","acceptance_criteria":["a"],"risk_level":"low"}`)
	_, _, err := newBuilder(s).Build(ctx, d)
	var bv *BranchViolation
	if !errors.As(err, &bv) {
		t.Fatalf("errors.As found no *BranchViolation in %v", err)
	}
	if bv.Branch != "master" || bv.Base != "develop" {
		t.Errorf("violation %+v", bv)
	}
	if len(asValidation(t, err).Fields) != 2 {
		t.Errorf("the other failing field is lost: %v", err)
	}
	d.Payload = []byte(`{"description":"","branch":"swarm/x","acceptance_criteria":["a"],"risk_level":"low"}`)
	_, _, err = newBuilder(s).Build(ctx, d)
	if errors.As(err, &bv) {
		t.Errorf("a BranchViolation without one: %v", err)
	}
}

func TestErrorListsOneFieldPerLine(t *testing.T) {
	s, _ := seeded(t)
	d := Draft{Type: TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-42", ContextRef: []string{"x"},
		Payload: []byte(`{"description":"d","branch":"swarm/b","risk_level":"low","acceptance_criteria":["1","","3","4","5","6","7","8","9","10",""]}`)}
	_, _, err := newBuilder(s).Build(ctx, d)
	want := `context_ref[0]: must be a msg_id such as task_dispatch-T-42-1763900000123 (copy it from the message; swarm protocol log --task ID lists them), not "x"
payload.acceptance_criteria[1]: must not be empty
payload.acceptance_criteria[10]: must not be empty`
	if err == nil || err.Error() != want {
		t.Errorf("Error()\n got %v\nwant %s", err, want)
	}
}

func TestComparePaths(t *testing.T) {
	paths := []string{"payload.a[10]", "to", "payload.a[2].x", "payload.a[2]", "context_ref[0]", `payload["a b"]`, "payload"}
	sort.Slice(paths, func(i, j int) bool { return comparePaths(paths[i], paths[j]) < 0 })
	want := []string{"context_ref[0]", "payload", `payload["a b"]`, "payload.a[2]", "payload.a[2].x", "payload.a[10]", "to"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("sorted %q\nwant %q", paths, want)
	}
}

// A payload nested deeper than 64 levels is refused before anything
// recurses over it; 64 levels are fine. Brackets in strings do not count.
func TestPayloadDepthIsCapped(t *testing.T) {
	s, _ := seeded(t)
	deep := func(n int) []byte {
		return []byte(`{"reason":"r","summary":"s [[{{","details":` + strings.Repeat(`{"a":`, n-2) + "{}" + strings.Repeat("}", n-2) + `}`)
	}
	d := Draft{Type: TypeEscalation, From: "backend", To: "lead", TaskID: "T-42", Payload: deep(MaxDepth)}
	if _, _, err := newBuilder(s).Build(ctx, d); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	for _, n := range []int{MaxDepth + 1, 5000} {
		d.Payload = deep(n)
		_, _, err := newBuilder(s).Build(ctx, d)
		if f, ok := asValidation(t, err).Field("payload"); !ok || !strings.Contains(f.Reason, "more than 64: flatten it") {
			t.Errorf("%d levels: %v", n, err)
		}
	}
}
