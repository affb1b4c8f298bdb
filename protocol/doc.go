// Package protocol builds and checks AMP/1.0 protocol messages (DESIGN.md
// §9.2): the typed messages agents and the supervisor exchange through the
// mailbox as mail of kind "protocol", whose JSON payload is an envelope:
//
//	{"protocol_version": "AMP/1.0", "msg_id": "task_dispatch-T-42-1763900000123",
//	 "type": "task_dispatch", "from": "lead", "to": "backend", "task_id": "T-42",
//	 "timestamp": "2026-11-23T10:00:00.123Z", "requires_ack": true,
//	 "ack_timeout_sec": 300, "context_ref": [], "payload": {...}}
//
// The package is pure: it stores nothing and imports no storage code, so the
// CLI, the MCP server, the workflow engine and the team launch can all call
// it, and it can be fuzzed without SQLite. What it needs from the store and
// the repository (does a msg_id exist, who was a message addressed to, does a
// commit exist) comes through the [Resolver] interface.
//
// # The contract
//
// A model only ever supplies a [Draft]: the type, the recipient, the task id
// and the payload. Everything else in the envelope is computed by
// [Builder.Build] so that no model can invent it: protocol_version, from (the
// caller's identity), to, timestamp (RFC 3339 in UTC with milliseconds, from
// an injected clock), and msg_id, which is "{type}-{task_id}-{unix_ms}". A
// msg_id must be unique, so when one is already stored the milliseconds are
// bumped until it is not; the timestamp moves with it, so msg_id and timestamp
// always name the same instant and a stored envelope can be checked for it.
// requires_ack and ack_timeout_sec default by type (see [Type.DefaultAck]);
// a draft can override them (--ack-timeout, --no-ack).
//
// Nothing is stored unless it passes, and a failure names every failing field
// at once, each by its JSON path with a reason that says what to do:
//
//	payload.acceptance_criteria: must contain at least 1 item
//	context_ref[0]: no stored message has msg_id "x"; ...
//
// Checks come in two layers. The shape of each type is a JSON Schema (draft
// 2020-12) embedded from schemas/*.json, read and resolved with
// github.com/google/jsonschema-go and checked by this package on first use,
// every failing field at once (schema.go): required fields, types, enums,
// sizes, and additionalProperties false everywhere, so a model's typo in a
// field name is refused instead of silently dropped. The rules a schema
// cannot express are Go code in this package: blank strings, a branch that is
// main, master or the base branch (reported as a [*BranchViolation] as well,
// so the caller can raise a branch_violation escalation), unique subtask ids,
// references that must name stored messages, commits that must exist, a
// rejected verdict that must list its issues, and an ACK that must answer a
// message addressed to the acker that asked for one. A Go rule stays silent
// on a field the schema already refused, so one mistake is reported once.
//
// The package also renders messages for people and models: [Body] is the
// one-line summary stored as the mail body (swarm inbox, the live view), and
// [RenderPrompt] is the block section 12 of the prompt shows, with the payload
// exactly as stored and what the recipient is expected to do by when.
//
// # One answer per request
//
// A task_result answers a task_dispatch and a review_verdict answers a
// review_request ([Type.Answers]). An agent answers a request once: a
// session redelivered after a crash sees the request again and may answer
// it again, and a second answer would be counted twice (a second review,
// a verdict counted against the next round). So a second answer from the
// same sender to the same request is refused, not stored, and the refusal
// names the answer that stands ("already answered as #12"); the sender has
// nothing to do. The request an answer answers is the first context_ref
// naming a request of the right type addressed to the sender (what
// --reply-to fills in), else the newest such request of the same task.
// A task_result about a subtask ([AnswerKey]: "<msg_id>#<subtask_id>")
// answers that subtask only, so each subtask and the whole task are
// answered once each. A new round is a new request (a workflow's next
// dispatch has a new msg_id), which takes a new answer. The rule is the
// store's: a unique index on (sender, answer key), so two processes racing
// with the same answer cannot both store it (mailbox.ErrAlreadyAnswered).
// An answer to no stored request has no key and is stored as before.
//
// Not checked here, because they need the mail service's view: that the
// sender and recipient are known agents and different (message.Validate),
// that an ACK or task_result comes from the recipient's current session, and
// whether a message was already acknowledged. msg_id uniqueness is checked
// before the insert, and two processes may race to the same id: the store's
// unique index on msg_id is the final word, and a caller that loses the race
// builds the message again.
package protocol
