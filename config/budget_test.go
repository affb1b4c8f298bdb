package config

import (
	"strings"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	cfg, err := Parse([]byte("[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := cfg.Agent("a"); a.Budget.Enabled() || a.Budget.Window != 24*time.Hour || a.Budget.Action != BudgetPause || cfg.Budget.Swarm().Enabled() {
		t.Fatalf("default budget: agent %+v, swarm %+v", a.Budget, cfg.Budget)
	}
	src := `[budget]
tokens = 2_000_000
window = "1h"
action = "warn"
swarm_tokens = 20_000_000
[[agent]]
name = "a"
[[agent]]
name = "b"
budget = { tokens = 1000, action = "stop" }
[[agent]]
name = "c"
budget = { tokens = 0 }
`
	cfg, err = Parse([]byte(src), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Budget{
		"a": {Tokens: 2_000_000, Window: time.Hour, Action: BudgetWarn},
		"b": {Tokens: 1000, Window: time.Hour, Action: BudgetStop}, // window inherited
		"c": {Tokens: 0, Window: time.Hour, Action: BudgetWarn},    // no budget
	}
	for name, w := range want {
		a, _ := cfg.Agent(name)
		if a.Budget != w {
			t.Errorf("agent %s budget %+v, want %+v", name, a.Budget, w)
		}
	}
	if s := cfg.Budget.Swarm(); s != (Budget{Tokens: 20_000_000, Window: time.Hour, Action: BudgetWarn}) {
		t.Errorf("swarm budget %+v", s)
	}
}

func TestBudgetErrors(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"[budget]\ntokens = -1\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: tokens must not be negative`},
		{"[budget]\nwindow = \"0s\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: duration "0s" must be positive`},
		{"[budget]\naction = \"stp\"\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: unknown action "stp" (valid: pause, stop, warn); did you mean "stop"?`},
		{"[budget]\ntoken = 5\n[[agent]]\nname = \"a\"\n", `swarm.toml:2: unknown key "token" in [budget]; did you mean "tokens"?`},
		{"[[agent]]\nname = \"a\"\nbudget = { swarm_tokens = 5 }\n", `swarm.toml:3: swarm_tokens caps the whole swarm`},
		{"[[agent]]\nname = \"a\"\nbudget = { action = \"halt\" }\n", `swarm.toml:3: unknown action "halt"`},
	} {
		_, err := Parse([]byte(tt.src), "swarm.toml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.src, err, tt.want)
		}
	}
}

// TestStarterMentionsBudget keeps [budget] in the starter, commented out,
// and checks it parses when uncommented.
func TestStarterMentionsBudget(t *testing.T) {
	s := string(Starter())
	_, rest, ok := strings.Cut(s, "\n# [budget]")
	if !ok {
		t.Fatal("the starter does not mention [budget]")
	}
	_, rest, _ = strings.Cut(rest, "\n")
	block, _, _ := strings.Cut(rest, "\n\n")
	src := "[budget]\n"
	for _, line := range strings.Split(block, "\n") {
		src += strings.TrimPrefix(line, "# ") + "\n"
	}
	cfg, err := Parse([]byte(src+"[[agent]]\nname = \"a\"\n"), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatalf("the starter's [budget] does not parse: %v\n%s", err, src)
	}
	if a, _ := cfg.Agent("a"); a.Budget.Tokens != 2_000_000 || cfg.Budget.SwarmTokens != 20_000_000 {
		t.Fatalf("starter budget %+v, swarm %d", a.Budget, cfg.Budget.SwarmTokens)
	}
}

// TestBudgetUSDAndPrices (issue 28 item 13): usd and swarm_usd budgets,
// a [prices] table per model (none built in), and a usd budget that could
// not be counted (an API engine's model with no price) refused.
func TestBudgetUSDAndPrices(t *testing.T) {
	src := `[budget]
usd = 5
swarm_usd = 20.5
[prices."gemini-2.5-flash"]
input = 0.30
output = 2.5
cached = 0.075
[[agent]]
name = "a"
[[agent]]
name = "b"
budget = { usd = 0.5, tokens = 1000 }
`
	cfg, err := Parse([]byte(src), "swarm.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := cfg.Agent("a"); a.Budget.USD != 5 || a.Budget.Tokens != 0 || !a.Budget.Enabled() {
		t.Fatalf("agent a budget %+v", a.Budget)
	}
	if b, _ := cfg.Agent("b"); b.Budget.USD != 0.5 || b.Budget.Tokens != 1000 {
		t.Fatalf("agent b budget %+v", b.Budget)
	}
	if s := cfg.Budget.Swarm(); s.USD != 20.5 || !s.Enabled() {
		t.Fatalf("swarm budget %+v", s)
	}
	p, ok := cfg.PriceFor("gemini-2.5-flash")
	if !ok || p != (Price{Input: 0.30, Output: 2.5, Cached: 0.075, CacheWrite: 0.30}) {
		t.Fatalf("price %+v, %v", p, ok)
	}
	if got := p.Cost(1_000_000, 100_000, 0, 2_000_000); got < 0.699999 || got > 0.700001 {
		t.Fatalf("cost %v, want 0.70", got)
	}
	if _, ok := cfg.PriceFor("gemini-2.5-pro"); ok {
		t.Fatal("a price nobody configured")
	}
	for _, c := range []struct{ src, want string }{
		{"[budget]\nusd = 1\n[[agent]]\nname = \"a\"\n", `swarm.toml:3: agent a has a usd budget, but engine "gemini" reports no cost and [prices] has no row for model "gemini-2.5-flash": add [prices."gemini-2.5-flash"]`},
		{"[budget]\nswarm_usd = 1\n[[agent]]\nname = \"a\"\n", "agent a has the swarm's swarm_usd budget, but engine"},
		{"[budget]\nusd = -1\n[[agent]]\nname = \"a\"\n", "swarm.toml:2: usd must be US dollars, 0 or more"},
		{"[[agent]]\nname = \"a\"\nbudget = { swarm_usd = 3 }\n", "swarm_usd caps the whole swarm"},
		{"[prices.m]\ninput = 1\n[[agent]]\nname = \"a\"\n", `[prices."m"] needs output`},
		{"[prices.m]\ninput = 1\noutput = -2\n[[agent]]\nname = \"a\"\n", "output must be a price in US dollars per million tokens"},
		// Claude Code reports its cost: no price needed.
		{"[budget]\nusd = 1\n[engine.claude]\nkind = \"exec\"\npreset = \"claude\"\n[[agent]]\nname = \"a\"\nengine = \"claude\"\n", ""},
	} {
		_, err := Parse([]byte(c.src), "swarm.toml", t.TempDir())
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}
