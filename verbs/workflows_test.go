package verbs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/workflow"
)

// A dev-qa workflow's status keeps every key of seed 001's
// workflow-state.json, null when there is none (next_agent once
// COMPLETE); a dev-review workflow has none of them.
func TestDevQAStatusKeepsEveryKey(t *testing.T) {
	prev := "QA_PASSED"
	qa, err := json.Marshal(WorkflowView{Name: "qa", Kind: workflow.DevQA, Roles: map[string]string{}, Items: []workflow.Item{},
		CurrentState: "COMPLETE", PreviousState: &prev})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(qa, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "kind", "roles", "items", "current_state", "next_agent", "previous_state", "feature_id", "timestamp", "transition_history"} {
		if _, ok := got[k]; !ok {
			t.Errorf("dev-qa status has no %q: %s", k, qa)
		}
	}
	if got["next_agent"] != nil || got["current_state"] != "COMPLETE" {
		t.Errorf("dev-qa status = %s", qa)
	}
	review, err := json.Marshal(WorkflowView{Name: "review", Kind: workflow.DevReview, Roles: map[string]string{}, Items: []workflow.Item{}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(review), "next_agent") || strings.Contains(string(review), "current_state") {
		t.Errorf("dev-review status = %s", review)
	}
}
