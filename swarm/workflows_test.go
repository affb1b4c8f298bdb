package swarm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/workflow"
)

// TestWorkflowContextGoldens renders section 4 (Workflow Context) for
// every stage of both kinds, as the agent whose stage it is sees it: one
// golden file each (go test ./swarm -run TestWorkflowContextGoldens
// -update). The agents of other stages get no section.
func TestWorkflowContextGoldens(t *testing.T) {
	review := config.Workflow{Name: "review", Kind: workflow.DevReview, Dev: "backend", Reviewer: "critic", MaxRejects: 3, CIRetries: 2}
	qa := config.Workflow{Name: "qa", Kind: workflow.DevQA, Dev: "backend", QA: "tester", Initializer: "lead",
		Timeout: 10 * time.Minute, ComplexTimeout: 30 * time.Minute}
	issues := []string{`tests: "go test ./..." fails in api/users_test.go:41`, "the --dry-run flag is not in --help\nsee cmd/root.go"}
	cases := []struct {
		name  string
		w     config.Workflow
		it    workflow.Item
		agent string
	}{
		{"review_dispatched_dev", review, workflow.Item{State: workflow.Dispatched, Dispatch: "task_dispatch-T-42-1763900000123"}, "backend"},
		{"review_in_progress_dev_rejected", review, workflow.Item{State: workflow.InProgress, RejectCount: 2, Inputs: issues, Dispatch: "task_dispatch-T-42-1763900009000"}, "backend"},
		{"review_in_review_reviewer", review, workflow.Item{State: workflow.InReview, RejectCount: 1, Inputs: issues, Request: "review_request-T-42-1763900005000", ReviewCommit: "9f3c2a1b0d4e5f60718293a4b5c6d7e8f9012345"}, "critic"},
		{"qa_initializer", qa, workflow.Item{State: workflow.Initializer}, "lead"},
		{"qa_dev_ready_dev", qa, workflow.Item{State: workflow.DevReady}, "backend"},
		{"qa_dev_feedback_dev", qa, workflow.Item{State: workflow.DevFeedback, Inputs: []string{"tester (QA) says: submit does nothing on an empty password"}}, "backend"},
		{"qa_qa_ready_qa", qa, workflow.Item{State: workflow.QAReady, Complex: true, Inputs: []string{"backend (DEV) says: login form done", "artifact: web/login.tsx"}}, "tester"},
	}
	for _, c := range cases {
		c.it.ID, c.it.Workflow, c.it.Kind, c.it.Title, c.it.Risk = "T-42", c.w.Name, c.w.Kind, "Add --dry-run to swarm down", workflow.RiskMedium
		if c.w.Kind == workflow.DevReview {
			c.it.Criteria = []string{"swarm down --dry-run lists what it would merge", "go test ./... passes"}
		}
		wc := contextOf(c.w, c.it, c.w.RoleOf(c.agent), c.agent)
		if wc == nil {
			t.Fatalf("%s: no Workflow Context for %s", c.name, c.agent)
		}
		p := promptpipe.Render(promptpipe.PromptContext{Agent: c.agent, Workflow: wc}, promptpipe.Sources{}, config.Prompt{}, time.Unix(0, 0))
		body := ""
		for _, s := range p.Sections {
			if s.Number == promptpipe.SecWorkflowContext {
				body = s.Body + "\n"
			}
		}
		name := filepath.Join("testdata", "golden", "workflow", c.name+".golden")
		if *updateGolden {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if body != string(want) {
			t.Errorf("%s differs from what renders now:\n%s", name, body)
		}
		for _, in := range c.it.Inputs {
			if c.w.RoleOf(c.agent) != "reviewer" && !strings.Contains(body, strings.ReplaceAll(in, "\n", "\n  ")) {
				t.Errorf("%s: input %q is not verbatim in\n%s", c.name, in, body)
			}
		}
		// Nobody else gets the section for this item.
		for _, other := range c.w.Members() {
			if other != c.agent && contextOf(c.w, c.it, c.w.RoleOf(other), other) != nil {
				t.Errorf("%s: %s gets a Workflow Context too", c.name, other)
			}
		}
	}
}

// TestQAGateSeesAnotherSupervisorsSession: a dev-qa member run by another
// supervisor (a swarm on several hosts) holds no slot here, so its
// running session, read from the store, keeps this supervisor's member
// from starting one; once it ends, the gate opens.
func TestQAGateSeesAnotherSupervisorsSession(t *testing.T) {
	h := newHarnessConfig(t, "[defaults]\nengine = \"script\"\n[[agent]]\nname = \"dev\"\n[[agent]]\nname = \"tester\"\n"+
		"[[workflow]]\nname = \"qa\"\nkind = \"dev-qa\"\ndev = \"dev\"\nqa = \"tester\"\n")
	cfg := h.sup.cfg
	sup, err := New(Options{Config: cfg, Layout: h.layout, Store: h.store, Agents: []string{"dev"},
		Engines: func(config.Agent) (engine.Engine, error) { return h.eng, nil }, Worktrees: h.wt, Prompts: h.prompts})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if ok, why := sup.flow.mayStart(ctx, "dev"); !ok {
		t.Fatalf("dev may not start with nobody in a session: %s", why)
	}
	if err := h.store.RegisterAgent(ctx, mailbox.AgentInfo{Name: "tester", Engine: "script"}); err != nil {
		t.Fatal(err)
	}
	if err := h.store.InTx(ctx, func(tx mailbox.Tx) error {
		return tx.StartSession(mailbox.SessionStart{Agent: "tester", Seq: 1, Engine: "script"})
	}); err != nil {
		t.Fatal(err)
	}
	if ok, why := sup.flow.acquire(ctx, "dev"); ok || !strings.Contains(why, "tester is in a session (run by another supervisor)") {
		t.Fatalf("acquire(dev) = %v, %q while tester runs elsewhere", ok, why)
	}
	if err := h.store.InTx(ctx, func(tx mailbox.Tx) error {
		return tx.EndSession(mailbox.SessionEnd{Agent: "tester", Seq: 1, State: mailbox.SessionCompleted})
	}); err != nil {
		t.Fatal(err)
	}
	if ok, why := sup.flow.acquire(ctx, "dev"); !ok {
		t.Fatalf("dev may not start after tester's session ended: %s", why)
	}
}
