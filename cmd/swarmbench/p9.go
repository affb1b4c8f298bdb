package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/workflow"
)

type p9Details struct {
	// The cycle: one dev-review item, a reviewer that rejects every
	// result, max_rejects = 3, from `swarm workflow start` to locked.
	CycleMs float64 `json:"cycle_ms"`
	// Model sessions started, by role; a coordinator has none in swarm.
	DevSessions         int64 `json:"dev_sessions"`
	ReviewerSessions    int64 `json:"reviewer_sessions"`
	CoordinatorSessions int64 `json:"coordinator_sessions"`
	// Tokens the dev and the reviewer spent (their work), and the tokens
	// spent on routing, ACKs, counting and locking: sessions of no other
	// agent.
	WorkTokens    int64 `json:"work_tokens"`
	RoutingTokens int64 `json:"routing_tokens"`
	// What the supervisor did instead: messages it sent from `swarm` and
	// item transitions it made or recorded.
	RuntimeMessages int `json:"runtime_messages"`
	ItemEvents      int `json:"item_events"`
	// Seed 000's coordinator makes one model call of about 3,800 tokens on
	// each of those events.
	SeedRoutingTokens int `json:"seed_routing_tokens_estimate"`
}

// seedCallTokens is seed 000's coordinator call per event (DESIGN §9.3,
// issue 17): its prompt and the event, about 3,800 tokens.
const seedCallTokens = 3800

// p9 runs seed 000's review loop as code: one dev-review item whose
// reviewer rejects every result with the same issues, until the third
// rejection locks it, on scripted agents in a real `swarm up`. It counts
// the model sessions started and the tokens spent on routing, against
// what seed 000's coordinator would have spent.
func (b *bench) p9(ctx context.Context) error {
	dir, err := b.newSwarm("p9", []string{"backend", "critic"}, "", 0)
	if err != nil {
		return err
	}
	wf := "\n[[workflow]]\nname = \"review\"\nkind = \"dev-review\"\ndev = \"backend\"\nreviewer = \"critic\"\nmax_rejects = 3\n"
	f, err := os.OpenFile(filepath.Join(dir, "swarm.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(wf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	scripts := filepath.Join(dir, ".swarm", "scripts")
	dev := `after = "mail"
[[session]]
[[session.turn]]
tool = "bash"
args = { command = "[ -n \"${mail.latest.id}\" ] || exit 0; swarm ack --all && echo x >> work.txt && git add work.txt && git commit -qm work && swarm send swarm --type task_result --reply-to ${mail.latest.id} --payload '{\"status\": \"completed\", \"summary\": \"done\"}'" }
[[session.turn]]
text = "done"
`
	critic := `after = "mail"
[[session]]
[[session.turn]]
tool = "bash"
args = { command = "[ -n \"${mail.latest.id}\" ] || exit 0; swarm ack --all && swarm send swarm --type review_verdict --reply-to ${mail.latest.id} --payload '{\"verdict\": \"rejected\", \"issues\": [\"go test fails\", \"no docs\"]}'" }
[[session.turn]]
text = "rejected"
`
	if err := os.WriteFile(filepath.Join(scripts, "backend.toml"), []byte(dev), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(scripts, "critic.toml"), []byte(critic), 0o644); err != nil {
		return err
	}
	up, err := b.start(dir, "p9-up.log", "up", "--engine", "script", "--no-tui")
	if err != nil {
		return err
	}
	defer stopUp(up)
	st, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := b.waitIdle(ctx, up, "p9-up.log", st, 2); err != nil {
		return err
	}
	before := map[string]mailbox.Agent{}
	as, err := st.Agents(ctx)
	if err != nil {
		return err
	}
	for _, a := range as {
		before[a.Name] = a
	}
	t0 := time.Now()
	if _, err := b.swarm(dir, "workflow", "start", "review", "--item", "T-1", "--title", "add a flag", "--criterion", "documented"); err != nil {
		return err
	}
	if err := waitFor(ctx, 120*time.Second, 5*time.Millisecond, "item T-1 locked", func() (bool, error) {
		if up.exited() {
			return false, b.upExited(up, "p9-up.log")
		}
		it, err := st.Item(ctx, "T-1")
		return err == nil && it.State == workflow.Locked, err
	}); err != nil {
		return err
	}
	det := p9Details{CycleMs: ms(time.Since(t0))}
	// Let the last sessions settle before reading their tokens.
	if err := b.waitIdle(ctx, up, "p9-up.log", st, 2); err != nil {
		return err
	}
	as, err = st.Agents(ctx)
	if err != nil {
		return err
	}
	for _, a := range as {
		sessions, tokens := a.SessionSeq-before[a.Name].SessionSeq, a.Tokens-before[a.Name].Tokens
		switch a.Name {
		case "backend":
			det.DevSessions, det.WorkTokens = sessions, det.WorkTokens+tokens
		case "critic":
			det.ReviewerSessions, det.WorkTokens = sessions, det.WorkTokens+tokens
		default:
			det.CoordinatorSessions += sessions
			det.RoutingTokens += tokens
		}
	}
	msgs, err := st.TaskMessages(ctx, "T-1")
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.From == message.Swarm {
			det.RuntimeMessages++
		}
	}
	evs, err := st.Events(ctx, mailbox.EventFilter{Kind: fsm.SubjectItem, Subjects: []string{"T-1"}})
	if err != nil {
		return err
	}
	det.ItemEvents = len(evs)
	det.SeedRoutingTokens = (det.RuntimeMessages + det.ItemEvents) * seedCallTokens
	b.details["P9"] = det
	b.add(row{ID: "P9", Figure: "dev-review, 3 rejections → locked: wall time", Value: det.CycleMs, Unit: "ms", Text: fmt.Sprintf("%.0f ms", det.CycleMs)})
	b.add(row{ID: "P9", Figure: "model sessions started (dev / reviewer / coordinator)", Value: float64(det.DevSessions + det.ReviewerSessions + det.CoordinatorSessions), Unit: "sessions",
		Text: fmt.Sprintf("%d / %d / %d", det.DevSessions, det.ReviewerSessions, det.CoordinatorSessions)})
	b.check(row{ID: "P9", Figure: fmt.Sprintf("tokens on routing, ACKs, counting, locking (%d messages, %d transitions by the runtime)", det.RuntimeMessages, det.ItemEvents),
		Value: float64(det.RoutingTokens), Unit: "tokens",
		Text: fmt.Sprintf("%d (seed 000's coordinator: ≈%s)", det.RoutingTokens, thousands(float64(det.SeedRoutingTokens)))}, "0", det.RoutingTokens == 0 && det.CoordinatorSessions == 0)
	return nil
}
