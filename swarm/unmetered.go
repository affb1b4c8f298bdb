package swarm

import (
	"context"
	"fmt"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
)

// Unmetered agents (DESIGN §9.6): an engine whose sessions report no token
// usage (an exec engine's custom command) would never count against a
// budget. Its sessions count an estimate instead (estimatedUsage), and an
// agent with a budget gets one warning escalation, at its first session,
// saying so.

// unmetered reports whether eng runs sessions nobody meters.
func unmetered(eng engine.Engine) bool {
	u, ok := eng.(engine.Unmetered)
	return ok && u.Unmetered()
}

// warnUnmetered raises, once per agent and ever, the warning that its
// budget sees only an estimate of what it spends. Nothing is raised for
// an agent without a budget (its own or the swarm's).
func (r *runner) warnUnmetered(ctx context.Context, budget agentBudget) {
	if budget.agent == nil && budget.swarm == nil {
		return
	}
	key := unmeteredKey(r.agent.Name)
	if !r.sup.book.firstReport(key, r.agent.Name) {
		return
	}
	// Once ever, not once per swarm up: a resolved warning stays resolved.
	es, err := r.sup.store.Escalations(bg(ctx), mailbox.EscalationFilter{All: true, Agent: r.agent.Name})
	if err != nil {
		r.sup.log.Warn("read escalations", "agent", r.agent.Name, "err", err)
		return
	}
	for _, e := range es {
		if e.DedupeKey == key {
			return
		}
	}
	r.sup.raise(ctx, escalation.Draft{Kind: escalation.KindBudget, Severity: escalation.Warning, Agent: r.agent.Name,
		Summary:   fmt.Sprintf("%s runs on engine %s, a custom command that reports no token usage: its budget counts only an estimate (prompt bytes / 4 per session). Use a preset (claude, codex, gemini-cli) to meter it, or watch its spending yourself", r.agent.Name, r.eng.Name()),
		Details:   details(map[string]any{"scope": "unmetered", "engine": r.eng.Name(), "estimate": "prompt bytes / 4 input tokens per session"}),
		DedupeKey: key})
}

// estimate is the session's usage for budgets: what the engine reported,
// or, for an unmetered engine that reported nothing, the estimate.
func estimate(eng engine.Engine, prompt string, u engine.Usage) engine.Usage {
	if u.IsZero() && unmetered(eng) {
		return estimatedUsage(len(prompt))
	}
	return u
}
