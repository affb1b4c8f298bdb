package config

import (
	"math"
	"slices"
	"strconv"
)

// Price is what a model's tokens cost, in US dollars per million tokens:
// one row of the [prices] table, which prices the sessions of engines
// that report no cost themselves (the API engines). swarm has no built-in
// prices: they go stale silently, and a session of a model with no row
// has an unknown cost, never 0.
type Price struct {
	Input  float64 // fresh input tokens
	Output float64
	Cached float64 // input read from a prompt cache
	// CacheWrite is input written to a prompt cache; Input when unset.
	CacheWrite float64
}

// Cost is what the given tokens cost at p, in US dollars.
func (p Price) Cost(input, output, cacheWrite, cacheRead int64) float64 {
	return (float64(input)*p.Input + float64(output)*p.Output + float64(cacheWrite)*p.CacheWrite + float64(cacheRead)*p.Cached) / 1e6
}

// PriceFor returns the price of model, if [prices] has one.
func (c *Config) PriceFor(model string) (Price, bool) {
	p, ok := c.Prices[model]
	return p, ok && model != ""
}

type rawPrice struct {
	Input      *float64 `toml:"input"`
	Output     *float64 `toml:"output"`
	Cached     *float64 `toml:"cached"`
	CacheWrite *float64 `toml:"cache_write"`
}

// prices reads [prices]: a table per model, input and output required.
func (b *builder) prices(raw map[string]rawPrice) {
	b.cfg.Prices = map[string]Price{}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := raw[name]
		at := "prices." + name
		var p Price
		ok := true
		for _, f := range []struct {
			key      string
			v        *float64
			dst      *float64
			required bool
		}{{"input", r.Input, &p.Input, true}, {"output", r.Output, &p.Output, true}, {"cached", r.Cached, &p.Cached, false}, {"cache_write", r.CacheWrite, &p.CacheWrite, false}} {
			switch {
			case f.v == nil && f.required:
				b.errorf(at, "[prices.%q] needs %s: US dollars per million %s tokens (from the provider's price list)", name, f.key, f.key)
				ok = false
			case f.v == nil:
			case *f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0):
				b.errorf(at+"."+f.key, "%s must be a price in US dollars per million tokens, 0 or more, got %v", f.key, *f.v)
				ok = false
			default:
				*f.dst = *f.v
			}
		}
		if r.CacheWrite == nil {
			p.CacheWrite = p.Input
		}
		if ok {
			b.cfg.Prices[name] = p
		}
	}
}

// PriceModel is the model whose [prices] row prices the sessions of agent
// a on engine e: the engine table's model, else the agent's.
func PriceModel(a Agent, e Engine) string {
	if e.Model != "" {
		return e.Model
	}
	return a.SessionModel(e.Kind)
}

// ReportsCost says whether engine e reports each session's cost itself
// (Claude Code's total_cost_usd); the others are priced from [prices].
func ReportsCost(e Engine) bool { return e.Kind == EngineExec && e.Preset == "claude" }

// checkUSD refuses a budget in dollars that could not be counted: an
// agent whose engine reports no cost and whose model has no price.
func (b *builder) checkUSD() {
	for i, a := range b.cfg.Agents {
		if a.Budget.USD <= 0 && b.cfg.Budget.SwarmUSD <= 0 {
			continue
		}
		e, err := b.cfg.EngineFor(a, "")
		if err != nil || ReportsCost(e) {
			continue
		}
		model := PriceModel(a, e)
		if _, ok := b.cfg.PriceFor(model); ok {
			continue
		}
		what := "a usd budget"
		if a.Budget.USD <= 0 {
			what = "the swarm's swarm_usd budget"
		}
		if model == "" {
			b.errorf("agent["+strconv.Itoa(i)+"]", "agent %s has %s, but engine %q reports no cost and names no model to price: set model, and its price in [prices]", a.Name, what, e.Name)
			continue
		}
		b.errorf("agent["+strconv.Itoa(i)+"]", "agent %s has %s, but engine %q reports no cost and [prices] has no row for model %q: add [prices.%q] with input and output (US dollars per million tokens, from the provider's price list)", a.Name, what, e.Name, model, model)
	}
}
