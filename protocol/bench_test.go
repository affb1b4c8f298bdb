package protocol

import (
	"testing"
)

// BenchmarkValidateTaskDispatch measures checking a typical dispatch: the
// schema, the Go rules and two store lookups (a context_ref and the msg_id)
// against an in-memory store, so it is the package's own cost.
func BenchmarkValidateTaskDispatch(b *testing.B) {
	s, m := seeded(b)
	bl := newBuilder(s)
	d := Draft{Type: TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-43", ContextRef: []string{m["dispatch"].MsgID},
		Payload: []byte(`{"description":"Add pagination to GET /users: page size 50, a cursor, and a Link header.","branch":"swarm/backend",` +
			`"acceptance_criteria":["GET /users?page=2 returns users 51-100","the Link header names the next page","go test ./... passes"],"risk_level":"medium",` +
			`"subtasks":[{"subtask_id":"S-1","description":"cursor"},{"subtask_id":"S-2","description":"Link header"}],"forbidden_actions":["schema changes"],"timeout_minutes":30}`)}
	_, data, err := bl.Build(ctx, d)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := bl.Build(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bl.Validate(ctx, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
