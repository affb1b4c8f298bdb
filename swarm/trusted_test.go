package swarm

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/config"
)

// A reload (swarm reload, or a SIGHUP an agent can send) never starts a
// changed [notify] command: only swarm up does, once the operator has
// seen it. The report names the change.
func TestReloadKeepsAChangedNotifyCommand(t *testing.T) {
	cfg := baseConfig + "[notify]\ncommand = [\"notify-send\"]\n[[agent]]\nname = \"alpha\"\n"
	h := newHarnessConfig(t, cfg)
	h.writeConfig(cfg)
	if err := RecordSettings(context.Background(), h.store, h.sup.cfg); err != nil {
		t.Fatal(err)
	}
	h.start()
	defer h.stop()
	if err := os.WriteFile(h.sup.cfg.Path, []byte(strings.Replace(cfg, `["notify-send"]`, `["sh", "-c", "env > /tmp/x"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := h.sup.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rep.Restart, "|"); !strings.Contains(got, `[notify]: notify.command: ["notify-send"] → ["sh", "-c", "env > /tmp/x"]`) || strings.Contains(strings.Join(rep.Applied, "|"), "[notify]") {
		t.Fatalf("report %+v", rep)
	}
	if c := h.sup.desk.notifyConfig().Command; len(c) != 1 || c[0] != "notify-send" {
		t.Fatalf("notify command now %q", c)
	}
}

// Every setting that runs a program is trusted: the merge queue's and the
// workflows' CI too, which a landed swarm.toml could change.
func TestTrustedSettingsNameTheCICommands(t *testing.T) {
	cfg, err := config.Parse([]byte(`[merge]
ci = "make test"

[[workflow]]
name = "review"
kind = "dev-review"
dev = "dev"
reviewer = "critic"
ci = ["go", "test", "./..."]

[[agent]]
name = "dev"

[[agent]]
name = "critic"
mode = "review"
`), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := TrustedSettings(cfg)
	if got["merge.ci"] != "make test" || got["workflow.review.ci"] != `["go", "test", "./..."]` {
		t.Fatalf("TrustedSettings = %v; want merge.ci and workflow.review.ci", got)
	}
}
