//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/open"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

// The test binary doubles as a sender process: with senderEnv set it sends
// messages the way `swarm send` does (open the store, Send, poke the
// supervisor) and exits.
const (
	senderEnv    = "RELIABILITY_SENDER"
	senderRoot   = "RELIABILITY_SENDER_ROOT"
	senderID     = "RELIABILITY_SENDER_ID"
	senderCount  = "RELIABILITY_SENDER_COUNT"
	senderAgents = "RELIABILITY_SENDER_AGENTS"
	senderFirst  = "RELIABILITY_SENDER_FIRST" // the first message number; 1 when unset
)

func senderBody(id, i int) string { return fmt.Sprintf("<<sender %d message %d>>", id, i) }

// senderMain sends RELIABILITY_SENDER_COUNT messages, round robin to the
// agents, each in its own Send followed by a poke, like one `swarm send`
// each. It prints how many it sent and every error, and exits 1 on any.
func senderMain() int {
	root := os.Getenv(senderRoot)
	id, _ := strconv.Atoi(os.Getenv(senderID))
	n, _ := strconv.Atoi(os.Getenv(senderCount))
	first := 1
	if f, err := strconv.Atoi(os.Getenv(senderFirst)); err == nil {
		first = f
	}
	agents := strings.Split(os.Getenv(senderAgents), ",")
	l := repo.At(root, "")
	ctx := context.Background()
	// SWARM_DB_URL (the PostgreSQL runs) wins, as in every swarm command.
	db, err := open.Choose(os.Getenv, "", l.DB).Open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer db.Close()
	st := mailbox.NewPoster(db, agents, nil)
	sent, errs := 0, 0
	for i := first; i < first+n; i++ {
		_, err := st.Post(ctx, message.Draft{From: message.Operator, To: agents[i%len(agents)], Body: senderBody(id, i)})
		if err != nil {
			errs++
			fmt.Fprintf(os.Stderr, "send %d: %v\n", i, err)
			continue
		}
		sent++
		control.Poke(l, nil)
	}
	fmt.Printf("sent %d errors %d\n", sent, errs)
	if errs > 0 {
		return 1
	}
	return 0
}

// TestR2ConcurrentSenders runs 8 sender processes × 1,000 messages while a
// swarm of two scripted agents runs and takes the mail: all 8,000 must be
// stored, no sender may see an error, and the agents must end up with
// every message done.
func TestR2ConcurrentSenders(t *testing.T) {
	const senders, each = 8, 1000
	agents := []string{"alice", "bob"}
	h := newHarness(t, swarmConfig{agents: agents, toml: "[liveness]\nnudge_after = \"0s\"\n"})
	up := h.up("--engine", "script")
	h.waitFor(30*time.Second, "swarm up to answer", func() (bool, error) { return h.running(up.pid()) })

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	type out struct {
		stdout, stderr bytes.Buffer
		err            error
	}
	outs := make([]*out, senders)
	cmds := make([]*exec.Cmd, senders)
	for i := range senders {
		o := &out{}
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Dir = h.root
		cmd.Env = append(h.env(), senderEnv+"=1", senderRoot+"="+h.root, senderID+"="+strconv.Itoa(i+1),
			senderCount+"="+strconv.Itoa(each), senderAgents+"="+strings.Join(agents, ","))
		cmd.Stdout, cmd.Stderr = &o.stdout, &o.stderr
		cmd.WaitDelay = 5 * time.Second
		outs[i], cmds[i] = o, cmd
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, cmd := range cmds {
		wg.Go(func() {
			<-gate
			if err := cmd.Start(); err != nil {
				outs[i].err = err
				return
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case outs[i].err = <-done:
			case <-time.After(3 * time.Minute):
				_ = cmd.Process.Kill()
				outs[i].err = fmt.Errorf("still sending after 3 minutes: %v", <-done)
			}
		})
	}
	close(gate)
	wg.Wait()
	took := time.Since(t0)
	for i, o := range outs {
		if o.err != nil || strings.TrimSpace(o.stdout.String()) != fmt.Sprintf("sent %d errors 0", each) || o.stderr.Len() > 0 {
			t.Errorf("sender %d: %v\nstdout: %s\nstderr: %s", i+1, o.err, o.stdout.String(), tail(o.stderr.String(), 2000))
		}
	}
	if up.exited() {
		t.Fatalf("swarm up exited during the sends:\n%s", tail(up.output(), 3000))
	}
	t.Logf("%d senders × %d messages in %s (%.0f messages/s) while the swarm ran", senders, each, took.Round(time.Millisecond),
		float64(senders*each)/took.Seconds())

	st := h.store(agents)
	defer st.Close()
	ctx := context.Background()
	want := map[string]bool{}
	for id := 1; id <= senders; id++ {
		for i := 1; i <= each; i++ {
			want[senderBody(id, i)] = true
		}
	}
	rows, err := st.DB().QueryContext(ctx, `SELECT body FROM messages WHERE body LIKE '<<sender %'`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		stored[b]++
	}
	rows.Close()
	missing, dup := 0, 0
	for b := range want {
		switch stored[b] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	if missing > 0 || dup > 0 || len(stored) != len(want) {
		t.Fatalf("stored %d distinct sender messages, want %d: %d missing, %d stored twice", len(stored), len(want), missing, dup)
	}
	t.Logf("stored: %d messages, each once", len(want))

	// The swarm takes all of it: every message ends done.
	var pending int
	h.waitFor(2*time.Minute, "the agents to finish all 8,000 messages", func() (bool, error) {
		if up.exited() {
			t.Fatalf("swarm up exited:\n%s", tail(up.output(), 3000))
		}
		err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE body LIKE '<<sender %' AND state <> 'done'`).Scan(&pending)
		return pending == 0, err
	})
	var sessions int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE state = 'completed'`).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d messages done after %s, in %d completed sessions", len(want), time.Since(t0).Round(time.Millisecond), sessions)
	if res, err := st.IntegrityCheck(ctx); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
	up.interrupt(t)
	if log, err := os.ReadFile(filepath.Join(h.root, ".swarm", "logs", "supervisor.log")); err == nil && bytes.Contains(log, []byte("level=ERROR")) {
		t.Errorf("the supervisor logged errors:\n%s", tail(string(log), 3000))
	}
}
