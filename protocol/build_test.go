package protocol

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

var ctx = context.Background()

const dispatchPayload = `{"description":"Add pagination to GET /users","branch":"swarm/backend","acceptance_criteria":["page size 50","tests pass"],"risk_level":"medium"}`

func dispatchDraft() Draft {
	return Draft{Type: TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-42", Payload: []byte(dispatchPayload)}
}

func TestBuildComputesTheEnvelope(t *testing.T) {
	b := newBuilder(newStore())
	env, data, err := b.Build(ctx, dispatchDraft())
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^task_dispatch-T-42-[0-9]{13}$`).MatchString(env.MsgID) {
		t.Errorf("msg_id %q does not have the form {type}-{task_id}-{unix_ms}", env.MsgID)
	}
	want := `{"protocol_version":"AMP/1.0","msg_id":"task_dispatch-T-42-1795428000123","type":"task_dispatch","from":"lead","to":"backend","task_id":"T-42","timestamp":"2026-11-23T10:00:00.123Z","requires_ack":true,"ack_timeout_sec":300,"context_ref":[],"payload":` + dispatchPayload + `}`
	if string(data) != want {
		t.Errorf("envelope\n got %s\nwant %s", data, want)
	}
	parsed, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.MsgID != env.MsgID || string(parsed.Payload) != dispatchPayload {
		t.Errorf("Parse gave %+v", parsed)
	}
	if _, err := b.Validate(ctx, data); err != nil {
		t.Errorf("a built envelope does not validate: %v", err)
	}
}

func TestBuildKeepsThePayloadAsWritten(t *testing.T) {
	b := newBuilder(newStore())
	d := dispatchDraft()
	// Field order, unicode and HTML-ish characters survive; only whitespace goes.
	d.Payload = []byte("{\n  \"risk_level\": \"low\",\n  \"branch\": \"swarm/backend\",\n  \"description\": \"if a < b && c > d: émoji 🐝\",\n  \"acceptance_criteria\": [ \"x\" ]\n}\n")
	env, _, err := b.Build(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"risk_level":"low","branch":"swarm/backend","description":"if a < b && c > d: émoji 🐝","acceptance_criteria":["x"]}`
	if string(env.Payload) != want {
		t.Errorf("payload\n got %s\nwant %s", env.Payload, want)
	}
}

func TestMsgIDCollisionBumpsTheMilliseconds(t *testing.T) {
	s := newStore()
	b := newBuilder(s)
	var ids []string
	for range 3 {
		env, _, err := b.Build(ctx, dispatchDraft())
		if err != nil {
			t.Fatal(err)
		}
		s.put(env)
		ids = append(ids, env.MsgID+" "+env.Timestamp)
	}
	want := []string{
		"task_dispatch-T-42-1795428000123 2026-11-23T10:00:00.123Z",
		"task_dispatch-T-42-1795428000124 2026-11-23T10:00:00.124Z",
		"task_dispatch-T-42-1795428000125 2026-11-23T10:00:00.125Z",
	}
	if strings.Join(ids, "\n") != strings.Join(want, "\n") {
		t.Errorf("ids\n got %q\nwant %q", ids, want)
	}
	// Another task or type at the same instant does not clash.
	d := dispatchDraft()
	d.TaskID = "T-43"
	if env, _, err := b.Build(ctx, d); err != nil || env.MsgID != "task_dispatch-T-43-1795428000123" {
		t.Errorf("T-43: %s, %v", env.MsgID, err)
	}
}

type takenStore struct{ *fakeStore }

func (takenStore) MessageExists(context.Context, string) (bool, error) { return true, nil }

func TestMsgIDSearchGivesUp(t *testing.T) {
	b := newBuilder(newStore())
	b.Resolver = takenStore{newStore()}
	_, _, err := b.Build(ctx, dispatchDraft())
	var ve *ValidationError
	if err == nil || errors.As(err, &ve) || !strings.Contains(err.Error(), "no free msg_id") {
		t.Fatalf("want a plain error about the msg_id search, got %v", err)
	}
}

func TestResolverFailureIsNotTheSendersFault(t *testing.T) {
	s, m := seeded(t)
	s.fail = errors.New("database is locked")
	d := Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", ContextRef: []string{m["dispatch"].MsgID}, Payload: []byte(`{"status":"completed","summary":"ok"}`)}
	_, _, err := newBuilder(s).Build(ctx, d)
	var ve *ValidationError
	if err == nil || errors.As(err, &ve) || !errors.Is(err, s.fail) {
		t.Fatalf("want the store's error wrapped, got %T %v", err, err)
	}
	if !strings.Contains(err.Error(), "context_ref[0]") {
		t.Errorf("error %q does not say what was being checked", err)
	}
}

func TestAckDefaultsAndOverrides(t *testing.T) {
	payloads := map[Type]string{
		TypeTaskDispatch:  dispatchPayload,
		TypeTaskResult:    `{"status":"completed","summary":"ok"}`,
		TypeReviewVerdict: `{"verdict":"approved"}`,
		TypeEscalation:    `{"reason":"unclear","summary":"which endpoint?"}`,
		TypePing:          `{"code":"CORE_BOOTSTRAP_PING"}`,
	}
	tests := []struct {
		name     string
		typ      Type
		timeout  time.Duration
		noAck    bool
		requires bool
		secs     int
	}{
		{"dispatch default", TypeTaskDispatch, 0, false, true, 300},
		{"result default", TypeTaskResult, 0, false, false, 0},
		{"verdict default", TypeReviewVerdict, 0, false, false, 0},
		{"escalation default", TypeEscalation, 0, false, false, 0},
		{"ping default", TypePing, 0, false, true, 60},
		{"dispatch --ack-timeout 90s", TypeTaskDispatch, 90 * time.Second, false, true, 90},
		{"dispatch --no-ack", TypeTaskDispatch, 0, true, false, 0},
		{"result --ack-timeout 2m asks for one", TypeTaskResult, 2 * time.Minute, false, true, 120},
		{"rounded up to whole seconds", TypePing, 1500 * time.Millisecond, false, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Draft{Type: tt.typ, From: "lead", To: "backend", TaskID: "T-42", Payload: []byte(payloads[tt.typ]), AckTimeout: tt.timeout, NoAck: tt.noAck}
			if tt.typ == TypePing {
				d.TaskID = "team-core"
			}
			env, _, err := newBuilder(newStore()).Build(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if env.RequiresAck != tt.requires || env.AckTimeoutSec != tt.secs {
				t.Errorf("requires_ack %v, ack_timeout_sec %d; want %v, %d", env.RequiresAck, env.AckTimeoutSec, tt.requires, tt.secs)
			}
		})
	}
	if r, d := TypeReviewRequest.DefaultAck(); !r || d != 600*time.Second {
		t.Errorf("review_request default: %v %v", r, d)
	}
	if r, d := TypeAck.DefaultAck(); r || d != 0 {
		t.Errorf("ack default: %v %v", r, d)
	}
}

func TestBuildRefusesBadAckOptions(t *testing.T) {
	s, m := seeded(t)
	tests := []struct {
		name   string
		draft  Draft
		reason string
	}{
		{"both flags", Draft{AckTimeout: time.Minute, NoAck: true}, "--ack-timeout and --no-ack contradict"},
		{"negative", Draft{AckTimeout: -time.Minute}, "is negative"},
		{"under a second", Draft{AckTimeout: time.Millisecond}, "under a second"},
		{"over a week", Draft{AckTimeout: 8 * 24 * time.Hour}, "must be at most 604800, not 691200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dispatchDraft()
			d.AckTimeout, d.NoAck = tt.draft.AckTimeout, tt.draft.NoAck
			_, _, err := newBuilder(s).Build(ctx, d)
			f, ok := asValidation(t, err).Field("ack_timeout_sec")
			if !ok || !strings.Contains(f.Reason, tt.reason) {
				t.Errorf("got %v; want ack_timeout_sec: ...%s...", err, tt.reason)
			}
		})
	}
	t.Run("an ack never asks for an ack", func(t *testing.T) {
		d := AckDraft(m["dispatch"], "backend")
		d.AckTimeout = time.Minute
		_, _, err := newBuilder(s).Build(ctx, d)
		if f, ok := asValidation(t, err).Field("requires_ack"); !ok || !strings.Contains(f.Reason, "never acknowledged") {
			t.Errorf("got %v", err)
		}
	})
}

func TestReplyTo(t *testing.T) {
	s, m := seeded(t)
	d := Draft{Type: TypeTaskResult, From: "backend", Payload: []byte(`{"status":"completed","summary":"paginated"}`), ContextRef: []string{m["ping"].MsgID, m["dispatch"].MsgID}}
	if err := d.ReplyTo(m["dispatch"]); err != nil {
		t.Fatal(err)
	}
	if d.TaskID != "T-42" || d.To != "lead" || strings.Join(d.ContextRef, ",") != m["dispatch"].MsgID+","+m["ping"].MsgID {
		t.Errorf("ReplyTo filled %+v", d)
	}
	env, _, err := newBuilder(s).Build(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if env.ContextRef[0] != m["dispatch"].MsgID || env.To != "lead" {
		t.Errorf("built %+v", env)
	}

	// An explicit recipient stays (an answer to the runtime goes to swarm).
	d = Draft{Type: TypeReviewVerdict, From: "critic", To: "swarm", TaskID: "T-42", Payload: []byte(`{"verdict":"approved"}`)}
	if err := d.ReplyTo(m["review"]); err != nil || d.To != "swarm" {
		t.Errorf("ReplyTo: %v, to %q", err, d.To)
	}

	d = Draft{Type: TypeTaskResult, From: "backend", TaskID: "T-41"}
	err = d.ReplyTo(m["dispatch"])
	if f, ok := asValidation(t, err).Field("task_id"); !ok || !strings.Contains(f.Reason, `is about "T-42"`) {
		t.Errorf("a reply about another task: %v", err)
	}
}

func TestAckDraftBuilds(t *testing.T) {
	s, m := seeded(t)
	for _, name := range []string{"dispatch", "ping"} {
		of := m[name]
		env, _, err := newBuilder(s).Build(ctx, AckDraft(of, of.To))
		if err != nil {
			t.Fatalf("ack of %s: %v", name, err)
		}
		if env.To != of.From || env.TaskID != of.TaskID || env.RequiresAck || !strings.HasPrefix(env.MsgID, "ack-"+of.TaskID+"-") {
			t.Errorf("ack of %s: %+v", name, env)
		}
	}
}

func TestValidateChecksComputedFields(t *testing.T) {
	s, m := seeded(t)
	b := newBuilder(s)
	good, err := m["dispatch"].Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Validate(ctx, good); err != nil {
		t.Fatalf("stored dispatch: %v", err)
	}
	tests := []struct {
		name, from, to, path, reason string
	}{
		{"msg_id not from its fields", `"msg_id":"task_dispatch-T-42-1795428000123"`, `"msg_id":"task_dispatch-T-42-1795428000999"`, "msg_id", `must be "task_dispatch-T-42-1795428000123"`},
		{"timestamp not real", `"timestamp":"2026-11-23T10:00:00.123Z"`, `"timestamp":"2026-13-23T10:00:00.123Z"`, "timestamp", "is not a real time"},
		{"timestamp not UTC millis", `"timestamp":"2026-11-23T10:00:00.123Z"`, `"timestamp":"2026-11-23T10:00:00+01:00"`, "timestamp", "RFC 3339 UTC time with milliseconds"},
		{"version", `"AMP/1.0"`, `"AMP/2.0"`, "protocol_version", `must be "AMP/1.0", not "AMP/2.0"`},
		{"extra envelope field", `"context_ref":[]`, `"context_ref":[],"priority":1`, "priority", "is not a field of the envelope"},
		{"ack timeout without ack", `"requires_ack":true`, `"requires_ack":false`, "ack_timeout_sec", "must be 0 when requires_ack is false"},
		{"ack without timeout", `"ack_timeout_sec":300`, `"ack_timeout_sec":0`, "ack_timeout_sec", "must be at least 1 when requires_ack is true"},
		{"timeout as a float", `"ack_timeout_sec":300`, `"ack_timeout_sec":300.0`, "ack_timeout_sec", "whole number written plainly"},
		{"missing field", `"context_ref":[],`, ``, "context_ref", "is required"},
		{"bad from", `"from":"lead"`, `"from":"Lead!"`, "from", "must be an agent name"},
		{"duplicate key", `"to":"backend"`, `"to":"backend","to":"frontend"`, "to", "is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(string(good), tt.from, tt.to, 1)
			if data == string(good) {
				t.Fatalf("%q not found in %s", tt.from, good)
			}
			_, err := b.Validate(ctx, []byte(data))
			if f, ok := asValidation(t, err).Field(tt.path); !ok || !strings.Contains(f.Reason, tt.reason) {
				t.Errorf("got\n%v\nwant %s: ...%s...", err, tt.path, tt.reason)
			}
		})
	}
	for _, bad := range []string{"", "{", "\xff", "[]", "null"} {
		if _, err := b.Validate(ctx, []byte(bad)); err == nil {
			t.Errorf("Validate(%q) passed", bad)
		} else {
			asValidation(t, err)
		}
	}
}

// TestBuildConcurrently: one Builder serves every sender at once (the
// schemas are compiled once and shared). Run with -race.
func TestBuildConcurrently(t *testing.T) {
	s, m := seeded(t)
	b := newBuilder(s)
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			d := Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", ContextRef: []string{m["dispatch"].MsgID}, Payload: []byte(`{"status":"completed","summary":"s"}`)}
			if i%2 == 1 {
				d.Payload = []byte(`{"status":"done"}`)
			}
			_, _, err := b.Build(ctx, d)
			switch {
			case i%2 == 0 && err != nil:
				errs <- err
			case i%2 == 1 && err == nil:
				errs <- errors.New("accepted status done")
			default:
				errs <- nil
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestBuilderNeedsAResolver(t *testing.T) {
	var b Builder
	if _, _, err := b.Build(ctx, dispatchDraft()); err == nil || !strings.Contains(err.Error(), "no Resolver") {
		t.Errorf("Build: %v", err)
	}
	if _, err := b.Validate(ctx, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no Resolver") {
		t.Errorf("Validate: %v", err)
	}
}
