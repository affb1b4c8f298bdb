package escalation

import (
	"fmt"
	"strings"
)

// An escalation's ref names what it is about, and its dedupe key which
// repeats count as one row. They are built and read only here, so a ref is
// never spelt by hand and two places cannot drift apart.

// The ref kinds' prefixes.
const (
	refItem    = "item:"
	refMsg     = "msg:"
	refSession = "session:"
	refTeam    = "team:"
)

// ItemRef is the ref of a work item.
func ItemRef(id string) string { return refItem + id }

// ItemOf is the work item a ref names; ok is false for another kind of ref.
func ItemOf(ref string) (id string, ok bool) { return strings.CutPrefix(ref, refItem) }

// MsgRef is the ref of a protocol message, by its msg_id.
func MsgRef(msgID string) string { return refMsg + msgID }

// MsgOf is the msg_id a ref names; ok is false for another kind of ref.
func MsgOf(ref string) (msgID string, ok bool) { return strings.CutPrefix(ref, refMsg) }

// SessionRef is the ref of one session (its id, agent-seq).
func SessionRef(session string) string { return refSession + session }

// TeamRef is the ref of a team launch.
func TeamRef(team string) string { return refTeam + team }

// ItemKey is the dedupe key of an escalation of kind k about a work item:
// one unresolved row per item (a lock, CI that kept failing, an approval).
func ItemKey(k Kind, item string) string { return string(k) + ":" + ItemRef(item) }

// ResultTimeoutKey is the dedupe key of a dev-review round's result
// timeout: one per dispatch, so each round raises at most one.
func ResultTimeoutKey(item, dispatch string) string {
	return ItemKey(KindStageTimeout, item) + ":result:" + dispatch
}

// StageTimeoutKey is the dedupe key of a dev-qa stage that ran past its
// timeout: one per item and stage.
func StageTimeoutKey(item, stage string) string { return ItemKey(KindStageTimeout, item) + ":" + stage }

// SignalKey is the dedupe key of a stage's signal that could not be
// applied: one per item, state and status.
func SignalKey(item, state, status string) string {
	return fmt.Sprintf("signal:%s:%s:%s", item, state, status)
}
