//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// TestR4BaseBranchEscapes runs two scripted agents through `swarm up`: one
// whose bash tool commits on the base branch from the repository root, one
// that leaves its branch. The supervisor must fail each session after it
// ends and report it to operator with a status message.
func TestR4BaseBranchEscapes(t *testing.T) {
	agents := []string{"leaker", "wanderer"}
	oneTurn := func(command string) string {
		return "[[session]]\n[[session.turn]]\ntool = \"bash\"\nargs = { command = '''" + command + "''' }\n[[session.turn]]\ntext = \"done\"\n"
	}
	h := newHarness(t, swarmConfig{
		agents: agents,
		scripts: map[string]string{
			"leaker":   oneTurn(`git -C "$SWARM_ROOT" commit --allow-empty -q -m leak`),
			"wanderer": oneTurn(`git switch -q -c other`),
		},
		toml: "[liveness]\nnudge_after = \"0s\"\n\n[errors]\nbackoff_min = \"50ms\"\nbackoff_max = \"200ms\"\n",
	})
	base := h.git(h.root, "rev-parse", "main")
	up := h.up("--engine", "script")

	type reports struct{ leaker, wanderer *message.Message }
	var got reports
	h.waitFor(60*time.Second, "status messages to operator from both agents", func() (bool, error) {
		if up.exited() {
			t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
		}
		r := h.swarm("inbox", "operator", "--json", "--limit", "0")
		if r.code != 0 {
			return false, nil
		}
		var ms []message.Message
		if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
			return false, err
		}
		for i, m := range ms {
			if m.Kind != message.KindStatus {
				continue
			}
			switch m.From {
			case "leaker":
				got.leaker = &ms[i]
			case "wanderer":
				got.wanderer = &ms[i]
			}
		}
		return got.leaker != nil && got.wanderer != nil, nil
	})
	// The leak really happened on the base branch: the guard reports it, it
	// does not hide it.
	leak := h.git(h.root, "log", "-1", "--format=%an %s", "main")
	if h.git(h.root, "rev-parse", "main") == base || leak != "swarm/leaker leak" {
		t.Fatalf("main's newest commit is %q; the scripted leak did not happen", leak)
	}
	for _, c := range []struct {
		m     *message.Message
		words []string
	}{
		{got.leaker, []string{"Session 1 of leaker", "base-branch guard", "leak"}},
		{got.wanderer, []string{"Session 1 of wanderer", "base-branch guard", "other"}},
	} {
		for _, w := range c.words {
			if !strings.Contains(c.m.Body, w) {
				t.Errorf("report from %s lacks %q:\n%s", c.m.From, w, c.m.Body)
			}
		}
	}

	st := h.store(agents)
	defer st.Close()
	ctx := context.Background()
	for _, a := range agents {
		s, err := st.Session(ctx, a, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.State != "failed" || !strings.Contains(s.Error, "base-branch guard") {
			t.Errorf("%s session 1: state %s, error %q; want failed by the base-branch guard", a, s.State, s.Error)
		}
		evs, err := st.Events(ctx, mailbox.EventFilter{Agent: a})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range evs {
			if e.From != nil && *e.From == "Running" && e.SessionSeq == 1 && (e.To == "CoolingDown" || e.To == "Stopped") && strings.Contains(e.Cause, "base-branch guard") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no Running → CoolingDown/Stopped event for session 1 caused by the guard", a)
		}
	}
	up.interrupt(t)
}
