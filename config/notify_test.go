package config

import (
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/escalation"
)

func TestNotifyAndStallAfter(t *testing.T) {
	cfg, err := Parse([]byte("[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Notify.Enabled() || cfg.Notify.RemindEvery != time.Hour || cfg.Notify.MaxReminders != 3 ||
		cfg.Notify.MinSeverity != escalation.Info || cfg.Liveness.StallAfter != 30*time.Minute {
		t.Fatalf("defaults: notify %+v, stall_after %s", cfg.Notify, cfg.Liveness.StallAfter)
	}
	src := `[liveness]
stall_after = "0s"
[notify]
command = ["notify-me", "--json"]
webhook = "http://127.0.0.1:9/hook"
min_severity = "warning"
remind_every = "2s"
max_reminders = 0
timeout = "3s"
[[agent]]
name = "a"
`
	cfg, err = Parse([]byte(src), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Notify
	if !n.Enabled() || strings.Join(n.Command, " ") != "notify-me --json" || n.Webhook != "http://127.0.0.1:9/hook" ||
		n.MinSeverity != escalation.Warning || n.RemindEvery != 2*time.Second || n.MaxReminders != 0 || n.Timeout != 3*time.Second {
		t.Fatalf("notify = %+v", n)
	}
	if cfg.Liveness.StallAfter != 0 {
		t.Fatalf("stall_after \"0s\" = %s, want off", cfg.Liveness.StallAfter)
	}
}

func TestNotifyErrors(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"[notify]\nwebhook = \"ftp://x\"\n", `swarm.toml:2: webhook must be an http:// or https:// URL`},
		{"[notify]\ncommand = []\n", `swarm.toml:2: command must name a program`},
		{"[notify]\nmin_severity = \"dire\"\n", `swarm.toml:2: min_severity: unknown severity "dire"`},
		{"[notify]\nremind_every = \"often\"\n", `swarm.toml:2: bad duration "often"`},
		{"[notify]\nmax_reminders = -1\n", `swarm.toml:2: max_reminders must not be negative`},
		{"[notify]\nwebhok = \"http://x\"\n", `swarm.toml:2: unknown key "webhok" in [notify]; did you mean "webhook"?`},
		{"[liveness]\nstall_after = \"-1m\"\n", `swarm.toml:2: duration "-1m" must be positive`},
	} {
		_, err := Parse([]byte(tt.src+"[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.src, err, tt.want)
		}
	}
}

// TestStarterMentionsNotify keeps [notify] and stall_after in the starter,
// commented out, and checks they parse when uncommented.
func TestStarterMentionsNotify(t *testing.T) {
	s := string(Starter())
	for _, want := range []string{"\n# [notify]", "\n# stall_after = "} {
		if !strings.Contains(s, want) {
			t.Fatalf("the starter does not mention %q", strings.TrimSpace(want))
		}
	}
	_, rest, _ := strings.Cut(s, "\n# [notify]")
	_, rest, _ = strings.Cut(rest, "\n")
	block, _, _ := strings.Cut(rest, "\n\n")
	uncommented := "[notify]\n"
	for _, line := range strings.Split(block, "\n") {
		uncommented += strings.TrimPrefix(line, "# ") + "\n"
	}
	uncommented += "[[agent]]\nname = \"a\"\n"
	cfg, err := Parse([]byte(uncommented), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatalf("%v\n%s", err, uncommented)
	}
	if !cfg.Notify.Enabled() {
		t.Errorf("the starter's [notify] sends nothing:\n%s", uncommented)
	}
}
