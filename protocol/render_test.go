package protocol

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./protocol -run %s -update creates it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./protocol -run %s -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", name, t.Name(), got, want)
	}
}

// examples builds one stored message of each kind worth showing, in a
// fixed order.
func examples(t *testing.T) []Envelope {
	t.Helper()
	s, m := seeded(t)
	b := newBuilder(s)
	build := func(d Draft) Envelope {
		t.Helper()
		e, _, err := b.Build(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		s.put(e)
		return e
	}
	long := strings.Repeat("Make the users endpoint return pages of fifty; ", 4)
	return []Envelope{
		m["dispatch"],
		build(Draft{Type: TypeTaskDispatch, From: "swarm", To: "backend", TaskID: "bd-a1b2", Payload: []byte(`{"description":"\n  ` + long + `\nsecond line","branch":"swarm/backend","acceptance_criteria":["a"],"risk_level":"high","subtasks":[{"subtask_id":"S-1","description":"x"}]}`)}),
		m["result"],
		build(Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", Payload: []byte(`{"status":"blocked","summary":"need the DB schema","subtask_id":"S-2"}`)}),
		m["review"],
		build(Draft{Type: TypeReviewVerdict, From: "critic", To: "swarm", TaskID: "T-42", Payload: []byte(`{"verdict":"rejected","issues":["no test for page 2","off by one in the cursor"]}`)}),
		build(Draft{Type: TypeReviewVerdict, From: "critic", To: "swarm", TaskID: "T-42", Payload: []byte(`{"verdict":"approved","summary":"clean and tested"}`)}),
		build(Draft{Type: TypeReviewVerdict, From: "critic", To: "swarm", TaskID: "T-43", Payload: []byte(`{"verdict":"rejected","issues":["one"]}`)}),
		build(Draft{Type: TypeEscalation, From: "backend", To: "operator", TaskID: "T-42", Payload: []byte(`{"reason":"unclear_requirements","summary":"Which page size?\nThe spec says 50 and 100.","details":{"spec":"docs/api.md"}}`)}),
		build(AckDraft(m["dispatch"], "backend")),
		m["ping"],
	}
}

func TestBodyGolden(t *testing.T) {
	var b strings.Builder
	for _, e := range examples(t) {
		b.WriteString(Body(e) + "\n")
	}
	// Bodies never fail: a payload that cannot be read still names the message.
	b.WriteString(Body(Envelope{Type: TypeTaskResult, TaskID: "T-1", To: "lead", Payload: []byte(`[1]`)}) + "\n")
	b.WriteString(Body(Envelope{Type: "nonsense", TaskID: "T-1", To: "lead"}) + "\n")
	checkGolden(t, "bodies.txt", b.String())
}

func TestRenderPromptGolden(t *testing.T) {
	ex := examples(t)
	dispatch, review, verdict, ack, ping := ex[0], ex[4], ex[5], ex[9], ex[10]
	now := t0.Add(time.Hour)
	cases := []struct {
		name string
		e    Envelope
		ack  AckState
	}{
		{"dispatch_4m_left", dispatch, AckState{Deadline: now.Add(4*time.Minute + 59*time.Second)}},
		{"dispatch_not_delivered", dispatch, AckState{}},
		{"dispatch_overdue", dispatch, AckState{Deadline: now.Add(-2 * time.Minute)}},
		{"dispatch_acked", dispatch, AckState{Deadline: now.Add(time.Minute), Acked: true}},
		{"review_request", review, AckState{Deadline: now.Add(9 * time.Minute)}},
		{"review_verdict", verdict, AckState{}},
		{"ack", ack, AckState{}},
		{"ping_45s_left", ping, AckState{Deadline: now.Add(45 * time.Second)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := RenderPrompt(c.e, c.ack, now)
			if !strings.Contains(got, "payload: "+string(c.e.Payload)+"\n") {
				t.Errorf("the payload is not shown exactly as stored:\n%s", got)
			}
			checkGolden(t, "prompt_"+c.name+".txt", got)
		})
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                   "0s",
		45 * time.Second:               "45s",
		4*time.Minute + 59*time.Second: "4m",
		90 * time.Minute:               "1h",
		49 * time.Hour:                 "2d",
	} {
		if got := Age(d); got != want {
			t.Errorf("Age(%v) = %q, want %q", d, got, want)
		}
	}
}

// A type that asks for no ACK by default but was sent with one says only
// what the ACK line says: never "No ACK needed." beside it.
func TestRenderPromptAckOnAnyType(t *testing.T) {
	e := examples(t)[8] // an escalation
	e.RequiresAck, e.AckTimeoutSec = true, 90
	got := RenderPrompt(e, AckState{}, t0)
	if !strings.Contains(got, "ACK required within 1m: swarm ack "+e.MsgID+"\n") || strings.Contains(got, "No ACK needed") {
		t.Fatalf("an escalation asking for an ACK:\n%s", got)
	}
}

// A dispatch with timeout_minutes (the workflow engine's result deadline)
// tells its recipient when the result is due.
func TestRenderPromptResultDue(t *testing.T) {
	s, _ := seeded(t)
	e, _, err := newBuilder(s).Build(ctx, Draft{Type: TypeTaskDispatch, From: "swarm", To: "backend", TaskID: "bd-a1b2",
		Payload: []byte(`{"description":"d","branch":"swarm/backend","acceptance_criteria":["a"],"risk_level":"low","timeout_minutes":120}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := RenderPrompt(e, AckState{}, t0); !strings.Contains(got, "Your task_result is due within 2h of your ACK.") {
		t.Fatalf("prompt of a dispatch with timeout_minutes 120:\n%s", got)
	}
}
