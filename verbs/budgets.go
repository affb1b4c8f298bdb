package verbs

import (
	"context"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/swarm"
)

// Budgets is each agent's usage against its budget, and the swarm's.
type Budgets = swarm.Budgets

// BudgetUse is one budget's use.
type BudgetUse = swarm.BudgetUse

// ReadBudgets is the budgets verb (`swarm status`'s budgets): a read any
// caller the door knows may make.
func ReadBudgets(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, now time.Time) (Budgets, error) {
	if !c.Known() {
		return Budgets{}, operatorOnly(c, "swarm status")
	}
	return swarm.ReadBudgets(ctx, st, cfg, now)
}
