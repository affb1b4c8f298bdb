package config

import (
	"fmt"
	"math"
	"time"
)

// Budget actions: what a tripped budget does to the agent (DESIGN §9.6).
const (
	BudgetPause = "pause" // hold the agent until the operator resumes it
	BudgetStop  = "stop"  // stop the agent
	BudgetWarn  = "warn"  // escalate only; the session goes on
)

// BudgetActions lists every budget action.
var BudgetActions = []string{BudgetPause, BudgetStop, BudgetWarn}

// Budget caps the work tokens (input, output and cache writes; not cache
// reads) and the US dollars an agent, or the whole swarm, may spend in a
// sliding window. Tokens 0 and USD 0 mean no cap.
type Budget struct {
	Tokens int64
	USD    float64
	Window time.Duration
	Action string
}

// Enabled reports whether the budget caps anything.
func (b Budget) Enabled() bool { return b.Tokens > 0 || b.USD > 0 }

// Budgets is the [budget] table: every agent's default, and the swarm's
// cap (SwarmTokens and SwarmUSD over the same window, with the same
// action).
type Budgets struct {
	Budget
	SwarmTokens int64
	SwarmUSD    float64
}

// Swarm is the swarm-wide budget.
func (b Budgets) Swarm() Budget {
	return Budget{Tokens: b.SwarmTokens, USD: b.SwarmUSD, Window: b.Window, Action: b.Action}
}

var defaultBudget = Budgets{Budget: Budget{Window: 24 * time.Hour, Action: BudgetPause}}

type rawBudget struct {
	Tokens      *int64   `toml:"tokens"`
	Window      *string  `toml:"window"`
	Action      *string  `toml:"action"`
	SwarmTokens *int64   `toml:"swarm_tokens"`
	USD         *float64 `toml:"usd"`
	SwarmUSD    *float64 `toml:"swarm_usd"`
}

// budget applies raw (at key) over base. swarm says whether swarm_tokens
// is allowed there: only in the top-level table.
func (b *builder) budget(base Budget, r *rawBudget, at string, swarm bool) Budget {
	if r == nil {
		return base
	}
	out := base
	if r.Tokens != nil {
		if *r.Tokens < 0 {
			b.errorf(at+".tokens", "tokens must not be negative (0 means no budget), got %d", *r.Tokens)
		} else {
			out.Tokens = *r.Tokens
		}
	}
	if r.USD != nil {
		if *r.USD < 0 || math.IsNaN(*r.USD) || math.IsInf(*r.USD, 0) {
			b.errorf(at+".usd", "usd must be US dollars, 0 or more (0 means no budget), got %v", *r.USD)
		} else {
			out.USD = *r.USD
		}
	}
	if r.Window != nil {
		out.Window = b.duration(at+".window", *r.Window, false)
	}
	if r.Action != nil {
		switch *r.Action {
		case BudgetPause, BudgetStop, BudgetWarn:
			out.Action = *r.Action
		default:
			msg := fmt.Sprintf("unknown action %q (valid: pause, stop, warn)", *r.Action)
			if s := Suggest(*r.Action, BudgetActions); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			b.errorf(at+".action", "%s", msg)
		}
	}
	if r.SwarmTokens != nil && !swarm {
		b.errorf(at+".swarm_tokens", "swarm_tokens caps the whole swarm: set it in the top-level [budget] table, not on an agent")
	}
	if r.SwarmUSD != nil && !swarm {
		b.errorf(at+".swarm_usd", "swarm_usd caps the whole swarm: set it in the top-level [budget] table, not on an agent")
	}
	return out
}

// budgets reads the top-level [budget] table.
func (b *builder) budgets(r *rawBudget) {
	b.cfg.Budget.Budget = b.budget(b.cfg.Budget.Budget, r, "budget", true)
	if r != nil && r.SwarmTokens != nil {
		if *r.SwarmTokens < 0 {
			b.errorf("budget.swarm_tokens", "swarm_tokens must not be negative (0 means no cap), got %d", *r.SwarmTokens)
		} else {
			b.cfg.Budget.SwarmTokens = *r.SwarmTokens
		}
	}
	if r != nil && r.SwarmUSD != nil {
		if v := *r.SwarmUSD; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			b.errorf("budget.swarm_usd", "swarm_usd must be US dollars, 0 or more (0 means no cap), got %v", v)
		} else {
			b.cfg.Budget.SwarmUSD = v
		}
	}
}
