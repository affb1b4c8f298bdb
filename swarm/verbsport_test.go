package swarm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/protocol"
)

// refusingVerbs records who called each verb and refuses them all.
type refusingVerbs struct {
	mu    sync.Mutex
	calls []string
}

func (v *refusingVerbs) Pause(_ context.Context, c identity.Caller, _ Runtime, _ string) (string, error) {
	v.called("pause", c)
	return "", errRefusedHere
}

func (v *refusingVerbs) Resume(_ context.Context, c identity.Caller, _ Runtime, _ string) (string, error) {
	v.called("resume", c)
	return "", errRefusedHere
}

func (v *refusingVerbs) Reload(_ context.Context, c identity.Caller, _ Runtime) (ReloadReport, error) {
	v.called("reload", c)
	return ReloadReport{}, errRefusedHere
}

func (v *refusingVerbs) Stop(_ context.Context, c identity.Caller, _ func()) error {
	v.called("stop", c)
	return errRefusedHere
}

func (v *refusingVerbs) Call(_ context.Context, c identity.Caller, req control.CallRequest) (control.RunResult, error) {
	v.called("call "+req.Verb, c)
	return control.RunResult{}, errRefusedHere
}

var errRefusedHere = errors.New("refused by the verbs")

func (v *refusingVerbs) called(verb string, c identity.Caller) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, verb+" by "+c.By())
}

func (v *refusingVerbs) Send(_ context.Context, c identity.Caller, _ *mailbox.Poster, _ message.Draft) (message.Message, error) {
	v.called("send", c)
	return message.Message{}, errRefusedHere
}

func (v *refusingVerbs) Escalate(_ context.Context, c identity.Caller, _ func(context.Context, escalation.Draft) (escalation.Escalation, bool, error), _ escalation.Draft) (escalation.Escalation, bool, error) {
	v.called("escalate", c)
	return escalation.Escalation{}, false, errRefusedHere
}

func (v *refusingVerbs) SendProtocol(_ context.Context, c identity.Caller, _ *Protocol, _ SendRequest) (message.Message, protocol.Envelope, error) {
	v.called("send_protocol", c)
	return message.Message{}, protocol.Envelope{}, errRefusedHere
}

func (v *refusingVerbs) Ack(_ context.Context, c identity.Caller, _ *Protocol, _ string, _ bool) ([]message.Message, error) {
	v.called("ack", c)
	return nil, errRefusedHere
}

// TestEngineToolsCallTheVerbs: a session's in-process tools (send_message,
// escalate, send_protocol, ack) go through Options.Verbs with the
// session's own caller, and the operator's socket's pause, resume, reload
// and stop with the operator's; what the verbs refuse is neither stored,
// raised nor done.
func TestEngineToolsCallTheVerbs(t *testing.T) {
	h := newHarness(t, "[[agent]]\nname = \"alpha\"\n[[agent]]\nname = \"bravo\"\n")
	v := &refusingVerbs{}
	h.sup.opts.Verbs = v
	h.start()
	r := h.nextRun()
	h.waitFor(r.s.Agent, lifecycle.Running)
	if _, err := r.s.Messenger.Send(r.ctx, "operator", "hi", false, 0); !errors.Is(err, errRefusedHere) {
		t.Errorf("send_message: %v", err)
	}
	if _, err := r.s.Escalator.Escalate(r.ctx, engine.EscalationRequest{Summary: "help", Hold: true}); !errors.Is(err, errRefusedHere) {
		t.Errorf("escalate: %v", err)
	}
	if _, err := r.s.Protocol.Send(r.ctx, engine.ProtocolMessage{Type: "task_result", To: "operator", Payload: []byte(`{"status":"completed","summary":"done"}`)}); !errors.Is(err, errRefusedHere) {
		t.Errorf("send_protocol: %v", err)
	}
	if _, err := r.s.Protocol.Ack(r.ctx, "", true); !errors.Is(err, errRefusedHere) {
		t.Errorf("ack: %v", err)
	}
	for _, op := range []string{control.OpPause, control.OpResume, control.OpReload, control.OpStop} {
		if resp := h.sup.handle(r.ctx, control.Request{Op: op, Agent: "bravo"}, nil); !strings.Contains(resp.Error, errRefusedHere.Error()) {
			t.Errorf("%s on the operator's socket: %+v", op, resp)
		}
	}
	by := r.s.Agent + "/" + r.s.ID
	want := []string{"send by " + by, "escalate by " + by, "send_protocol by " + by, "ack by " + by,
		"pause by operator", "resume by operator", "reload by operator", "stop by operator"}
	v.mu.Lock()
	got := v.calls
	v.mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("verbs called: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: %s, want %s", i, got[i], want[i])
		}
	}
	ctx := context.Background()
	if ms, _ := h.store.Inbox(ctx, "operator", mailbox.Filter{}); len(ms) != 0 {
		t.Errorf("refused mail was stored: %+v", ms)
	}
	if es, _ := h.store.Escalations(ctx, mailbox.EscalationFilter{All: true}); len(es) != 0 {
		t.Errorf("a refused escalation was raised: %+v", es)
	}
	if a, _ := h.store.Agent(ctx, "bravo"); a.State == lifecycle.Paused {
		t.Error("a refused pause paused bravo")
	}
	r.finish <- engine.Result{Outcome: engine.Success}
}
