package config

import (
	"strings"
	"testing"
	"time"
)

func TestTeamAndSpawn(t *testing.T) {
	src := "[[agent]]\nname = \"a\"\n[[agent]]\nname = \"b\"\n[[agent]]\nname = \"c\"\n\n[team]\nname = \"analysis\"\ncore = [\"a\", \"b\"]\n"
	c, err := Parse([]byte(src), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Team == nil || c.Team.Name != "analysis" || len(c.Team.Core) != 2 || c.Team.ReadyTimeout != 60*time.Second ||
		c.Team.MaxRelaunch != 2 || !c.Team.IsCore("b") || c.Team.IsCore("c") || c.Spawn.MaxAgents != 20 {
		t.Fatalf("team = %+v, spawn = %+v", c.Team, c.Spawn)
	}
	c, err = Parse([]byte(src+"ready_timeout = \"2s\"\nmax_relaunch = 0\n[spawn]\nmax_agents = 3\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Team.ReadyTimeout != 2*time.Second || c.Team.MaxRelaunch != 0 || c.Spawn.MaxAgents != 3 {
		t.Fatalf("team = %+v, spawn = %+v", c.Team, c.Spawn)
	}
	c, _ = Parse([]byte("[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if c.Team != nil {
		t.Fatalf("no [team] parsed as %+v", c.Team)
	}
}

func TestTeamErrors(t *testing.T) {
	agents := "[[agent]]\nname = \"a\"\n[[agent]]\nname = \"b\"\n"
	tests := []struct{ name, src, want string }{
		{"unknown core", agents + "[team]\nname = \"t\"\ncore = [\"a\", \"bb\"]\n", `swarm.toml:7: core agent "bb" is not an [[agent]] of this file (agents: a, b); did you mean "b"?`},
		{"no core", agents + "[team]\nname = \"t\"\n", `swarm.toml:5: [team] needs core = [`},
		{"no name", agents + "[team]\ncore = [\"a\"]\n", `swarm.toml:5: [team] needs a name`},
		{"core twice", agents + "[team]\nname = \"t\"\ncore = [\"a\", \"a\"]\n", `swarm.toml:7: core lists "a" twice`},
		{"bad timeout", agents + "[team]\nname = \"t\"\ncore = [\"a\"]\nready_timeout = \"soon\"\n", `swarm.toml:8: bad duration "soon"`},
		{"negative relaunch", agents + "[team]\nname = \"t\"\ncore = [\"a\"]\nmax_relaunch = -1\n", `swarm.toml:8: max_relaunch must not be negative`},
		{"bad max agents", agents + "[spawn]\nmax_agents = 0\n", `swarm.toml:6: max_agents must be at least 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "swarm.toml", t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not contain %q", err, tt.want)
			}
		})
	}
}

func TestNewAgent(t *testing.T) {
	c, err := Parse([]byte("[defaults]\nengine = \"script\"\n[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.NewAgent("worker-1", " write tests ", "coordinate", "dag", "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "worker-1" || a.Role != "write tests" || a.Mode != "coordinate" || a.Strategy != "dag" || a.Engine != "script" {
		t.Fatalf("agent = %+v", a)
	}
	for _, bad := range [][4]string{{"operator", "", "", ""}, {"Bad", "", "", ""}, {"w", "", "execute", "dag"}, {"w", "", "", "tree"}, {"w", "", "", ""}} {
		if bad[0] == "w" && bad[1] == "" && bad[2] == "" && bad[3] == "" {
			if _, err := c.NewAgent("w", "", "", "", "nope"); err == nil {
				t.Fatal("unknown engine accepted")
			}
			continue
		}
		if _, err := c.NewAgent(bad[0], bad[1], bad[2], bad[3], ""); err == nil {
			t.Fatalf("NewAgent%q accepted", bad)
		}
	}
}
