package verbs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/swarm"
)

// nothingRuntime fails the test if a verb reaches the runtime.
type nothingRuntime struct{ t *testing.T }

func (r nothingRuntime) Pause(context.Context, string) (string, error) {
	r.t.Fatal("a refused verb paused an agent")
	return "", nil
}

func (r nothingRuntime) Resume(context.Context, string) (string, error) {
	r.t.Fatal("a refused verb resumed an agent")
	return "", nil
}

func (r nothingRuntime) Reload(context.Context) (swarm.ReloadReport, error) {
	r.t.Fatal("a refused verb reloaded swarm.toml")
	return swarm.ReloadReport{}, nil
}

// TestOperatorVerbsRefuseSessions: the operator's verbs refuse a session
// (even one with every capability) and nobody, naming the command, before
// they touch the store or the runtime: the store here is nil, so a verb
// that went on would panic.
func TestOperatorVerbsRefuseSessions(t *testing.T) {
	ctx := context.Background()
	all := mode.Vector{}
	for _, c := range mode.Capabilities {
		all[c] = true
	}
	rt := nothingRuntime{t}
	run := func(context.Context) error { t.Fatal("a refused verb ran"); return nil }
	verbs := map[string]func(c identity.Caller) error{
		"swarm workflow merge": func(c identity.Caller) error { _, _, err := MergeItem(ctx, c, nil, nil, nil, "T-1"); return err },
		"swarm workflow abort": func(c identity.Caller) error { _, err := AbortItem(ctx, c, nil, "T-1", ""); return err },
		"swarm retire":         func(c identity.Caller) error { _, err := Retire(ctx, c, RetireRequest{Name: "w"}); return err },
		"swarm pause":          func(c identity.Caller) error { _, err := Pause(ctx, c, rt, "alpha"); return err },
		"swarm resume":         func(c identity.Caller) error { _, err := Resume(ctx, c, rt, "alpha"); return err },
		"swarm reload":         func(c identity.Caller) error { _, err := Reload(ctx, c, rt); return err },
		"swarm up":             func(c identity.Caller) error { return Up(ctx, c, run) },
		"swarm down":           func(c identity.Caller) error { _, err := Down(ctx, c, swarm.DownRequest{}); return err },
		"swarm web":            func(c identity.Caller) error { return Web(ctx, c, run) },
		"swarm down (stop)": func(c identity.Caller) error {
			return Stop(ctx, c, func() { t.Fatal("a refused stop stopped the swarm") })
		},
		"swarm land --cancel": func(c identity.Caller) error { _, err := CancelLanding(ctx, c, nil, 1, ""); return err },
		"approve, then merge": func(c identity.Caller) error {
			_, _, _, err := MergeApproved(ctx, c, nil, nil, nil, escalation.Escalation{Kind: escalation.KindApproval})
			return err
		},
	}
	for name, verb := range verbs {
		for _, c := range []identity.Caller{identity.Session("dev", 2, all), {}} {
			err := verb(c)
			r, ok := identity.IsRefusal(err)
			if !ok || r.Rule != identity.RuleOperatorOnly {
				t.Errorf("%s by %s: %v; want the operator-only refusal", name, c, err)
			}
			if !strings.HasPrefix(name, "swarm") {
				continue
			}
			if cmd, _, _ := strings.Cut(name, " ("); !strings.Contains(err.Error(), cmd) {
				t.Errorf("%s by %s: %v does not name the command", name, c, err)
			}
		}
	}
}

// TestSpawnNeedsItsCapability: a session without can_spawn_sessions (and
// nobody) is refused before anything is stored; the store here is nil.
func TestSpawnNeedsItsCapability(t *testing.T) {
	for _, c := range []identity.Caller{identity.Session("dev", 1, mode.Vector{mode.CanMessage: true}), {}} {
		_, _, err := Spawn(context.Background(), c, nil, nil, nil, SpawnRequest{Name: "worker-1", Role: "tests"}, time.Time{})
		if r, ok := identity.IsRefusal(err); !ok || r.Rule != identity.RuleCapability && r.Rule != identity.RuleOperatorOnly {
			t.Errorf("a spawn by %s: %v; want a refusal", c, err)
		}
	}
}

// TestStartNeedsCanDispatch: a session without can_dispatch starts no
// work item, refused before the request is even read.
func TestStartNeedsCanDispatch(t *testing.T) {
	_, err := StartItem(context.Background(), identity.Session("dev", 1, mode.Vector{mode.CanMessage: true}), nil, nil, StartRequest{})
	if r, ok := identity.IsRefusal(err); !ok || r.Rule != identity.RuleCapability {
		t.Errorf("a start without can_dispatch: %v; want the capability refusal", err)
	}
}

// TestSignalIsTheStageAgents: the operator (and nobody) signals no item —
// the stage's agent does — and is refused before the store is read.
func TestSignalIsTheStageAgents(t *testing.T) {
	for _, c := range []identity.Caller{identity.Operator(), {}} {
		_, err := SignalItem(context.Background(), c, nil, nil, SignalRequest{Status: "COMPLETE", Next: "QA"})
		if r, ok := identity.IsRefusal(err); !ok || r.Rule != identity.RuleStage {
			t.Errorf("a signal by %s: %v; want the stage refusal", c, err)
		}
	}
}

// TestDecideRules: a session acks only an escalation about its own agent,
// and decides none; nobody does anything; the operator decides. What is
// refused leaves the escalation as it was.
func TestDecideRules(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	raise := func(agent string) escalation.Escalation {
		t.Helper()
		e, _, err := swarm.Raise(ctx, st, escalation.Draft{Kind: escalation.KindAgent, Agent: agent, Summary: "help " + agent})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	alpha, bravo, none := raise("alpha"), raise("bravo"), raise("")
	s := identity.Session("alpha", 1, mode.Vector{mode.CanEscalate: true, mode.CanMessage: true})
	refusals := []struct {
		c      identity.Caller
		id     int64
		action escalation.Event
		rule   identity.Rule
	}{
		{s, bravo.ID, escalation.Ack, identity.RuleOwnSession},
		{s, none.ID, escalation.Ack, identity.RuleOperatorOnly},
		{s, alpha.ID, escalation.Event(escalation.Resume), identity.RuleOperatorOnly},
		{identity.Caller{}, alpha.ID, escalation.Ack, ""},
		{identity.Caller{}, alpha.ID, escalation.Event(escalation.Abort), ""},
	}
	for _, r := range refusals {
		_, err := Decide(ctx, r.c, st, r.id, r.action, "")
		ref, ok := identity.IsRefusal(err)
		if !ok || r.rule != "" && ref.Rule != r.rule {
			t.Errorf("%s by %s on %d: %v; want a refusal %s", r.action, r.c, r.id, err, r.rule)
		}
	}
	for _, e := range []escalation.Escalation{alpha, bravo, none} {
		if now, _ := st.Escalation(ctx, e.ID); now.State != e.State {
			t.Errorf("escalation %d moved to %s though every decision was refused", e.ID, now.State)
		}
	}
	if e, err := Decide(ctx, s, st, alpha.ID, escalation.Ack, "looking"); err != nil || e.State != escalation.Acked {
		t.Fatalf("alpha acks its own: %+v, %v", e, err)
	}
	if e, err := Decide(ctx, identity.Operator(), st, bravo.ID, escalation.Event(escalation.Resume), ""); err != nil || e.State != escalation.Resolved {
		t.Fatalf("the operator resumes bravo: %+v, %v", e, err)
	}
}
