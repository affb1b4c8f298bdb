package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/mode"
)

func TestRules(t *testing.T) {
	op, rt, nobody := Operator(), Runtime(), Caller{}
	dev := Session("dev", 3, mode.Vector{mode.CanMessage: true, mode.CanEscalate: true})
	for _, tc := range []struct {
		name string
		err  error
		rule Rule // "" means allowed
	}{
		{"operator may do anything", op.Require(mode.CanDispatch, "swarm send --kind task"), ""},
		{"runtime may do anything", rt.OperatorOnly("x"), ""},
		{"session with the capability", dev.Require(mode.CanMessage, "swarm send"), ""},
		{"session without it", dev.Require(mode.CanDispatch, "swarm send --kind task"), RuleCapability},
		{"nobody has no capability", nobody.Require(mode.CanMessage, "swarm send"), RuleCapability},
		{"operator-only from a session", dev.OperatorOnly("swarm escalation resume 1"), RuleOperatorOnly},
		{"operator-only from nobody", nobody.OperatorOnly("swarm down"), RuleOperatorOnly},
		{"session holds itself", dev.Hold("dev"), ""},
		{"session holds a teammate", dev.Hold("critic"), RuleHoldSelf},
		{"operator holds anyone", op.Hold("critic"), ""},
		{"session marks its own mail read", dev.MarkRead("dev"), ""},
		{"session marks operator mail read", dev.MarkRead(OperatorName), RuleMarkRead},
		{"session marks a teammate's mail read", dev.MarkRead("critic"), RuleMarkRead},
		{"stage agent signals", dev.Stage("dev", "signal"), ""},
		{"another agent signals", dev.Stage("qa", "signal"), RuleStage},
		{"operator signals", op.Stage("dev", "signal"), RuleStage},
		{"session acts for itself", dev.ForAgent("dev", "report"), ""},
		{"session acts for a teammate", dev.ForAgent("critic", "report"), RuleOwnSession},
	} {
		r, refused := IsRefusal(tc.err)
		switch {
		case tc.rule == "" && tc.err != nil:
			t.Errorf("%s: refused: %v", tc.name, tc.err)
		case tc.rule != "" && !refused:
			t.Errorf("%s: not refused (%v)", tc.name, tc.err)
		case tc.rule != "" && r.Rule != tc.rule:
			t.Errorf("%s: rule %s, want %s", tc.name, r.Rule, tc.rule)
		case tc.rule != "" && !strings.Contains(tc.err.Error(), "(rule "+string(tc.rule)+")"):
			t.Errorf("%s: the message does not name the rule: %v", tc.name, tc.err)
		}
	}
}

func TestSender(t *testing.T) {
	dev := Session("dev", 3, nil)
	for _, tc := range []struct {
		c          Caller
		from, want string
		refused    bool
	}{
		{Operator(), "", "operator", false},
		{Operator(), "critic", "critic", false},
		{Runtime(), "", "swarm", false},
		{dev, "", "dev", false},
		{dev, "dev", "dev", false},
		{dev, "critic", "", true},
		{dev, "operator", "", true},
		{dev, "swarm", "", true},
		{Caller{}, "", "", true},
	} {
		got, err := tc.c.Sender(tc.from)
		if (err != nil) != tc.refused || got != tc.want {
			t.Errorf("%s sending --from %q = %q, %v; want %q (refused %v)", tc.c.By(), tc.from, got, err, tc.want, tc.refused)
		}
	}
}

func TestBy(t *testing.T) {
	if got := Session("dev", 3, nil).By(); got != "dev/dev-3" {
		t.Errorf("session By = %q", got)
	}
	if got := Operator().By(); got != "operator" {
		t.Errorf("operator By = %q", got)
	}
	if Operator().SessionID() != "" || Session("dev", 3, nil).SessionID() != "dev-3" {
		t.Error("SessionID")
	}
}

func TestFile(t *testing.T) {
	root := t.TempDir()
	wt := filepath.Join(root, "wt")
	outside := filepath.Join(root, "secret.json")
	for _, p := range []string{wt, filepath.Join(wt, "sub")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(outside, []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(wt, "ok.json"), []byte("{}"), 0o644)
	if err := os.Symlink(outside, filepath.Join(wt, "link.json")); err != nil {
		t.Fatal(err)
	}
	dev := Session("dev", 1, nil)
	for _, tc := range []struct {
		name, dir, file string
		ok              bool
	}{
		{"relative inside", wt, "ok.json", true},
		{"relative from a subdirectory", filepath.Join(wt, "sub"), "../ok.json", true},
		{"missing inside: the reader says so", wt, "missing.json", true},
		{"absolute outside", wt, outside, false},
		{"relative escape", wt, "../secret.json", false},
		{"a symlink out", wt, "link.json", false},
		{"cwd outside", root, "secret.json", false},
	} {
		_, err := dev.File(wt, tc.dir, tc.file)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil {
			if r, ok := IsRefusal(err); !ok || r.Rule != RuleWorktree {
				t.Errorf("%s: %v is not a worktree refusal", tc.name, err)
			}
		}
	}
	if p, err := Operator().File("", root, "secret.json"); err != nil || p != outside {
		t.Errorf("the operator's file: %q, %v", p, err)
	}
	if _, err := (Caller{}).File(wt, wt, "ok.json"); err == nil {
		t.Error("nobody read a file")
	}
}
