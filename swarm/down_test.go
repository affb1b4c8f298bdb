package swarm

import (
	"testing"

	"github.com/swarmhq/swarm/config"
)

func TestDownWait(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[defaults]
interrupt_grace = "2s"
[[agent]]
name = "a"
role = "r"
[[agent]]
name = "b"
role = "r"
interrupt_grace = "7s"
`), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := downWait(cfg); got.Seconds() != 12 {
		t.Fatalf("downWait = %s, want 12s (the longest grace + 5s)", got)
	}
}
