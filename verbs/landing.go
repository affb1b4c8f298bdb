package verbs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/workflow"
)

// The merge queue's verbs (DESIGN §14, §13.1): `swarm land` queues an
// agent's branch, `swarm land --cancel` takes a candidate out. The caller
// is in the signature: the operator lands any agent's branch; a session
// only its own agent's, and only when its vector grants can_land.

// LandRequest is `swarm land`: one of Agent, Item or All.
type LandRequest struct {
	// Agent's branch at its tip; "" from a session means the session's
	// own agent.
	Agent string
	// Item queues a workflow item's reviewed commit (an approved
	// dev-review item) or a dev-qa item's dev branch at QA_PASSED.
	Item string
	// All queues every agent's branch that has commits not on the base.
	All bool
}

// LandOutcome is one agent's part of a LandResult.
type LandOutcome struct {
	Agent string `json:"agent"`
	// Candidate is the queued candidate: the new one, or the one that was
	// in the queue already (Already); nil when there was nothing to land.
	Candidate *merge.Candidate `json:"candidate"`
	Already   bool             `json:"already_queued"`
	// Nothing says the branch has no commit the base lacks.
	Nothing bool `json:"nothing_to_land"`
}

// LandResult is what Land queued.
type LandResult struct {
	Outcomes []LandOutcome `json:"outcomes"`
	// Pruned says, per landed agent, what `--prune-remote` did with its
	// branch on the remote; absent without it.
	Pruned []string `json:"pruned,omitempty"`
}

// LandGit is what `swarm land` needs of git.
type LandGit interface {
	Tip(ctx context.Context, agent string) (string, error)
	UnmergedCommits(ctx context.Context, agent string) ([]string, error)
}

var _ LandGit = swarm.GitWorktrees{}

// Land queues candidates for the merge queue. An agent whose branch holds
// nothing new is reported (Nothing) and nothing is queued; a commit in the
// queue already is reported (Already).
func Land(ctx context.Context, c identity.Caller, st mailbox.Store, cfg *config.Config, git LandGit, req LandRequest) (LandResult, error) {
	var res LandResult
	if err := c.Require(mode.CanLand, "swarm land"); err != nil {
		return res, err
	}
	switch {
	case req.All:
		if err := c.OperatorOnly("swarm land --all"); err != nil {
			return res, err
		}
		for _, a := range cfg.AgentNames() {
			o, err := landAgent(ctx, st, git, a, merge.FromLand, "", c.By())
			if err != nil {
				return res, err
			}
			if !o.Nothing {
				res.Outcomes = append(res.Outcomes, o)
			}
		}
		return res, nil
	case req.Item != "":
		if err := c.OperatorOnly("swarm land --item"); err != nil {
			return res, err
		}
		it, err := st.Item(ctx, req.Item)
		if err != nil {
			return res, fmt.Errorf("land item %s: %w; 'swarm workflow status' lists the items", req.Item, err)
		}
		cand, already, err := queueItem(ctx, st, cfg, git, it, c.By())
		if err != nil {
			return res, err
		}
		res.Outcomes = append(res.Outcomes, LandOutcome{Agent: cand.Agent, Candidate: &cand, Already: already})
		return res, nil
	}
	agent := req.Agent
	if agent == "" {
		if !c.IsSession() {
			return res, &swarm.UsageError{Msg: "name the agent whose branch lands: swarm land <agent> (or --item ID, --all)"}
		}
		agent = c.Agent()
	}
	if err := c.ForAgent(agent, "swarm land "+agent); err != nil {
		return res, err
	}
	if _, ok := cfg.Agent(agent); !ok {
		return res, fmt.Errorf("no agent %s in swarm.toml", agent)
	}
	o, err := landAgent(ctx, st, git, agent, merge.FromLand, "", c.By())
	if err != nil {
		return res, err
	}
	res.Outcomes = append(res.Outcomes, o)
	return res, nil
}

// landAgent queues agent's branch tip, unless the base holds it.
func landAgent(ctx context.Context, st mailbox.Store, git LandGit, agent string, src merge.Source, item, by string) (LandOutcome, error) {
	o := LandOutcome{Agent: agent}
	ahead, err := git.UnmergedCommits(ctx, agent)
	if err != nil {
		return o, fmt.Errorf("land %s: %w", agent, err)
	}
	if len(ahead) == 0 {
		o.Nothing = true
		return o, nil
	}
	tip, err := git.Tip(ctx, agent)
	if err != nil {
		return o, fmt.Errorf("land %s: %w", agent, err)
	}
	cand, already, err := swarm.Enqueue(ctx, st, merge.Candidate{Agent: agent, Commit: tip, Source: src, Item: item, By: by})
	if err != nil {
		return o, err
	}
	o.Candidate, o.Already = &cand, already
	return o, nil
}

// queueItem queues an item's commit: an approved dev-review item's
// reviewed commit, or a dev-qa item's dev branch at QA_PASSED.
func queueItem(ctx context.Context, st mailbox.Store, cfg *config.Config, git LandGit, it workflow.Item, by string) (merge.Candidate, bool, error) {
	w, ok := cfg.Workflow(it.Workflow)
	if !ok {
		return merge.Candidate{}, false, fmt.Errorf("item %s belongs to workflow %s, which swarm.toml no longer has", it.ID, it.Workflow)
	}
	switch {
	case it.Kind == workflow.DevReview && it.State == workflow.Approved && it.ReviewCommit != "":
		return swarm.Enqueue(ctx, st, merge.Candidate{Agent: w.Dev, Commit: it.ReviewCommit, Source: merge.FromItem, Item: it.ID, By: by})
	case it.Kind == workflow.DevQA && it.State == workflow.QAPassed:
		tip, err := git.Tip(ctx, w.Dev)
		if err != nil {
			return merge.Candidate{}, false, err
		}
		return swarm.Enqueue(ctx, st, merge.Candidate{Agent: w.Dev, Commit: tip, Source: merge.FromQA, Item: it.ID, By: by})
	}
	return merge.Candidate{}, false, fmt.Errorf("item %s is %s: only an approved dev-review item or a dev-qa item at QA_PASSED lands", it.ID, it.State)
}

// ErrLeftQueue means the candidate left the queue already (landed,
// conflict, failed or cancelled): there is nothing to cancel, and nothing
// was done.
var ErrLeftQueue = errors.New("only a queued or testing candidate is cancelled")

// CancelLanding takes a queued (or testing) candidate out of the queue:
// the operator's verb. A batch testing it lands without it or is tested
// again.
func CancelLanding(ctx context.Context, caller identity.Caller, st mailbox.Store, id int64, note string) (merge.Candidate, error) {
	if err := caller.OperatorOnly("swarm land --cancel"); err != nil {
		return merge.Candidate{}, err
	}
	c, err := st.Candidate(ctx, id)
	if errors.Is(err, mailbox.ErrNoSuchCandidate) {
		return c, fmt.Errorf("%w %d: 'swarm merges --all' lists them", err, id)
	}
	if err != nil {
		return c, err
	}
	if !c.State.Live() {
		return c, fmt.Errorf("merge candidate %d is %s already: %w", id, c.State, ErrLeftQueue)
	}
	cause := "cancelled by " + caller.By()
	if note != "" {
		cause += ": " + note
	}
	err = st.InTx(ctx, func(tx mailbox.Tx) error {
		if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(id), c.State, merge.Cancel, merge.Cancelled, text.Truncate(cause, 300), 0); err != nil {
			return err
		}
		// The reason stays on the row too: 'swarm merges' and the desk's
		// history say why it left the queue, as they do for a conflict.
		now, err := tx.Candidate(id)
		if err != nil {
			return err
		}
		now.Reason = text.Truncate(cause, 300)
		return tx.SaveCandidate(now)
	})
	if errors.Is(err, mailbox.ErrStateConflict) {
		return c, fmt.Errorf("merge candidate %d moved meanwhile (%w); look again with 'swarm merges'", id, err)
	}
	if err != nil {
		return c, err
	}
	return st.Candidate(ctx, id)
}

// WaitLanded follows candidate id until it leaves the queue (`swarm land
// --wait`): a read any caller the door knows may make.
func WaitLanded(ctx context.Context, c identity.Caller, st mailbox.Store, id int64, poll time.Duration) (merge.Candidate, error) {
	if !c.Known() {
		return merge.Candidate{}, operatorOnly(c, "swarm land --wait")
	}
	return swarm.WaitLanded(ctx, st, id, poll)
}
