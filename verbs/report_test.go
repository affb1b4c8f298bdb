package verbs

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/mode"
)

// openStore is a fresh SQLite store in the test's directory.
func openStore(t *testing.T) mailbox.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "swarm.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A report is stored and mailed as status (which wakes nobody) to whoever
// handed the agent the task; an empty one, or one a session makes for a
// teammate, is refused.
func TestReportGoesToTheCoordinatorAsStatus(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	poster := mailbox.NewPoster(st, []string{"lead", "backend"}, nil)
	if _, err := poster.Post(ctx, message.Draft{From: "lead", To: "backend", Kind: message.KindTask, Body: "T-42: the endpoints"}); err != nil {
		t.Fatal(err)
	}
	backend := identity.Session("backend", 1, mode.Vector{mode.CanReportTaskLevel: true})
	res, err := Report(ctx, backend, ReportRequest{Store: st, Poster: poster, Kind: mailbox.ReportProgress, Task: "T-42", Message: "half done"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Coordinator != "lead" || res.Mail.To != "lead" || res.Mail.Kind != message.KindStatus || res.Mail.Body != "[report progress T-42] half done" {
		t.Fatalf("report = %+v", res)
	}
	if _, err := Report(ctx, identity.Operator(), ReportRequest{Store: st, Poster: poster, Agent: "backend", Kind: mailbox.ReportProgress, Task: "T-42", Message: "  "}); err == nil {
		t.Fatal("an empty report was accepted")
	}
	_, err = Report(ctx, backend, ReportRequest{Store: st, Poster: poster, Agent: "lead", Kind: mailbox.ReportProgress, Task: "T-42", Message: "forged"})
	if _, ok := identity.IsRefusal(err); !ok {
		t.Fatalf("a session reporting as a teammate: %v", err)
	}
}
