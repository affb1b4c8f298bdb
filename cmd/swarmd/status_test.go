package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

// countingStore counts the per-agent reads status must not make.
type countingStore struct {
	mailbox.Store
	pending, pendingAll int
	perAgent            int // LastSession and LastReport
}

func (c *countingStore) LastSession(ctx context.Context, agent string, state mailbox.SessionState) (mailbox.Session, error) {
	c.perAgent++
	return c.Store.LastSession(ctx, agent, state)
}

func (c *countingStore) LastReport(ctx context.Context, agent string) (mailbox.Report, error) {
	c.perAgent++
	return c.Store.LastReport(ctx, agent)
}

func (c *countingStore) Pending(ctx context.Context, agent string) (mailbox.Counts, error) {
	c.pending++
	return c.Store.Pending(ctx, agent)
}

func (c *countingStore) PendingAll(ctx context.Context) (map[string]mailbox.Counts, error) {
	c.pendingAll++
	return c.Store.PendingAll(ctx)
}

// Status reads every agent's mail in one query, however many agents there
// are: one query per agent made it quadratic-feeling at 10,000 agents. The
// same holds for the last sessions' capabilities and the last reports.
func TestStatusReadsMailOnce(t *testing.T) {
	root := t.TempDir()
	var toml strings.Builder
	toml.WriteString("[defaults]\nengine = \"script\"\n")
	var names []string
	for i := range 500 {
		name := fmt.Sprintf("agent-%03d", i)
		names = append(names, name)
		fmt.Fprintf(&toml, "[[agent]]\nname = %q\n", name)
	}
	cfg, err := config.Parse([]byte(toml.String()), "swarm.toml", root)
	if err != nil {
		t.Fatal(err)
	}
	l := repo.At(root, "")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, l.DB, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := mailbox.NewPoster(st, names, nil)
	if _, err := p.Post(ctx, message.Draft{From: "operator", To: "agent-007", Body: "hi", Urgency: message.Urgent}); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	s, err := collectStatus(ctx, identity.Operator(), l, cfg, cs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cs.pending != 0 || cs.pendingAll != 1 {
		t.Fatalf("Pending called %d times, PendingAll %d; want 0 and 1", cs.pending, cs.pendingAll)
	}
	if cs.perAgent != 0 {
		t.Fatalf("%d per-agent reads of sessions or reports; want the grouped ones only", cs.perAgent)
	}
	if len(s.Agents) != 500 || s.Agents[7].Pending != 1 || s.Agents[7].Urgent != 1 || s.Agents[8].Pending != 0 {
		t.Fatalf("status = %d agents, agent-007 %+v", len(s.Agents), s.Agents[7])
	}
}
