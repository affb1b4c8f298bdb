package web

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/merge"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/verbs"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var csrfValue = regexp.MustCompile(`name="csrf" value="[0-9a-f]+"`)

// TestGoldenFragments pins the HTML of the fragments the script swaps in:
// the agents table, the escalations, the mail, the team launch, the merge
// queue and the reservations, on a fixed clock.
func TestGoldenFragments(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := t.TempDir()
	cfg, err := config.Parse([]byte("[defaults]\nengine = \"script\"\n[[agent]]\nname = \"alpha\"\n"), "swarm.toml", dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "swarm.db"), sqlite.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RegisterAgent(ctx, mailbox.AgentInfo{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	raise := func(d escalation.Draft) escalation.Escalation {
		e, _, err := swarm.Raise(ctx, st, d)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	raise(escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Hold: true, Summary: "need a decision on the <schema>",
		Ref: "msg:3", Details: []byte(`{"options":["a","b"]}`)})
	done := raise(escalation.Draft{Kind: escalation.KindAgent, Agent: "alpha", Summary: "may I drop the legacy table?"})
	if _, err := verbs.Decide(ctx, identity.Operator(), st, done.ID, escalation.Event(escalation.Reject), "keep it & migrate"); err != nil {
		t.Fatal(err)
	}
	desk := &fakeDesk{st: st, poster: mailbox.NewPoster(st, []string{"alpha"}, nil), notices: make(chan lifecycle.Notice), cfg: cfg}
	srv, err := New(Options{Desk: desk, Store: st, Config: cfg, Token: testToken, Title: "/src/app",
		Now: func() time.Time { return t0.Add(90 * time.Second) }, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verbs.Send(ctx, identity.Operator(), desk.poster, message.Draft{To: "alpha", Body: "hello <b>alpha</b>"}, false); err != nil {
		t.Fatal(err)
	}
	// The merge queue: one landed, one sent back with a conflict, one
	// waiting; the operator's checkout behind.
	for i, end := range []merge.State{merge.Landed, merge.Conflict, merge.Queued} {
		c, _, err := swarm.Enqueue(ctx, st, merge.Candidate{Agent: "alpha", Commit: fmt.Sprintf("%d%039d", i+1, 0), Source: merge.FromLand, By: "operator"})
		if err != nil {
			t.Fatal(err)
		}
		switch end {
		case merge.Landed:
			settle(t, st, c.ID, merge.Land, merge.Landed, func(c *merge.Candidate) { c.LandedAs = "feedface00112233"; c.CIRuns = 1 })
		case merge.Conflict:
			settle(t, st, c.ID, merge.Conflicts, merge.Conflict, func(c *merge.Candidate) {
				c.Reason, c.Files, c.CIRuns = "does not merge on main", []string{"api/<users>.go", "db/schema.sql"}, 0
			})
		}
	}
	desk.behind = "checkout behind main by 1: git switch main (your uncommitted changes come along)"
	if _, err := verbs.Reserve(ctx, identity.Operator(), verbs.ReserveRequest{Store: st, Agent: "alpha", Globs: []string{"api/**"},
		Exclusive: true, TTL: time.Hour, Reason: "migrating the <schema>", Now: t0}); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"agents", "escalations", "mail", "team", "merges", "reservations"} {
		req, _ := http.NewRequest(http.MethodGet, "/"+page, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("X-Fragment", "1")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", page, rec.Code, rec.Body)
		}
		got := csrfValue.ReplaceAll(rec.Body.Bytes(), []byte(`name="csrf" value="CSRF"`))
		golden := filepath.Join("testdata", "golden", page+".html")
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./web -run TestGoldenFragments -update)", err)
		}
		if string(got) != string(want) {
			t.Errorf("the %s fragment differs from %s (run with -update if the change is meant):\n%s", page, golden, got)
		}
	}
}
