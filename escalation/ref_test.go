package escalation

import "testing"

// TestRefs: the refs and keys are the strings stored rows already carry,
// and each reader takes back what its constructor built.
func TestRefs(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ItemRef("T-1"), "item:T-1"},
		{MsgRef("task_dispatch-T-1-9"), "msg:task_dispatch-T-1-9"},
		{SessionRef("backend-3"), "session:backend-3"},
		{TeamRef("core"), "team:core"},
		{ItemKey(KindApproval, "T-1"), "approval:item:T-1"},
		{ItemKey(KindHallucinationLock, "T-1"), "hallucination_lock:item:T-1"},
		{ItemKey(KindCIFailure, "T-1"), "ci_failure:item:T-1"},
		{ResultTimeoutKey("T-1", "d1"), "stage_timeout:item:T-1:result:d1"},
		{StageTimeoutKey("F-1", "DEV"), "stage_timeout:item:F-1:DEV"},
		{SignalKey("F-1", "DEV", "ERROR"), "signal:F-1:DEV:ERROR"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if id, ok := ItemOf(ItemRef("T-1")); !ok || id != "T-1" {
		t.Errorf("ItemOf = %q, %v", id, ok)
	}
	if _, ok := ItemOf(MsgRef("m")); ok {
		t.Error("ItemOf took a message's ref")
	}
	if id, ok := MsgOf(MsgRef("m-1")); !ok || id != "m-1" {
		t.Errorf("MsgOf = %q, %v", id, ok)
	}
}
