package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/swarm"
)

// hostile is what an exec CLI's stderr or a model's summary may hold: a
// screen clear, an OSC 52 clipboard write, a bell and a C1 CSI.
const hostile = "boom \x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07 \u009b31m done"

// Every human-readable output shows terminal controls visibly, whichever
// command prints them; --json keeps them byte-exact (escaped by JSON).
func TestHumanOutputIsTerminalSafe(t *testing.T) {
	root, _ := downRepo(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(root, ".swarm", "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RegisterAgent(ctx, mailbox.AgentInfo{Name: "alpha", Mode: "execute", Engine: "script", Branch: "swarm/alpha"}); err != nil {
		t.Fatal(err)
	}
	if err := st.InTx(ctx, func(tx mailbox.Tx) error {
		_, err := fsm.Apply(tx, lifecycle.Table, fsm.SubjectAgent, "alpha", lifecycle.Stopped, lifecycle.Start, lifecycle.Initializing, "exec failed: "+hostile, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := swarm.Raise(ctx, st, escalation.Draft{Kind: escalation.KindErrors, Agent: "alpha", Summary: "alpha failed: " + hostile}); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"events"}, {"escalations"}, {"escalation", "show", "1"}, {"status"}} {
		code, out, errs := downRun(t, root, "", args...)
		if code != 0 {
			t.Fatalf("swarm %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		if !strings.Contains(out, "boom") {
			t.Errorf("swarm %s does not show the text at all:\n%s", strings.Join(args, " "), out)
		}
		if i := strings.IndexAny(out, "\x1b\x07\u009b"); i >= 0 {
			t.Errorf("swarm %s printed a terminal control at %d: %q", strings.Join(args, " "), i, out)
		}
	}
	_, out, _ := downRun(t, root, "", "events", "--json")
	if !strings.Contains(out, `\u001b[2J\u001b]52;c;`) {
		t.Errorf("events --json is not byte-exact: %s", out)
	}
}

// An error's text may quote a CLI's output: it is shown safely too.
func TestErrorsAreTerminalSafe(t *testing.T) {
	var b strings.Builder
	if code := report(&b, errorString("exec failed: "+hostile)); code != exitError {
		t.Fatalf("exit %d", code)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07\u009b") {
		t.Fatalf("report printed a terminal control: %q", b.String())
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// A patch is the agents' text: without git's colours it is shown safely.
func TestDiffIsTerminalSafe(t *testing.T) {
	root, m := downRepo(t)
	wt := m.Path("alpha")
	if err := os.WriteFile(filepath.Join(wt, "evil.txt"), []byte(hostile+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "evil.txt"}, {"commit", "-q", "-m", "evil"}} {
		if out, err := exec.Command("git", append([]string{"-C", wt}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	code, out, errs := downRun(t, root, "", "diff", "alpha", "--color", "never")
	if code != 0 || !strings.Contains(out, "evil.txt") {
		t.Fatalf("swarm diff: exit %d: %s%s", code, out, errs)
	}
	if i := strings.IndexAny(out, "\x1b\x07\u009b"); i >= 0 {
		t.Fatalf("swarm diff printed a terminal control at %d: %q", i, out)
	}
}
