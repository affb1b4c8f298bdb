//go:build reliability

package reliability

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmhq/swarm/internal/pgtest"
)

// TestR9PostgresHosts runs one swarm on two "hosts" (two clones of one
// repository, each with its own supervisor) sharing a throwaway
// PostgreSQL: 8 sender processes × 1,000 messages to the four agents, in
// two halves. Between the halves, clone 2's supervisor is killed with
// kill -9 and started again, and then the server itself is restarted
// (pg_ctl restart) under both supervisors. Every message must be stored
// once, and end done in a completed session; clone 1's supervisor must
// run through all of it.
func TestR9PostgresHosts(t *testing.T) {
	c, err := pgtest.Start()
	if err != nil {
		if os.Getenv(pgtest.Require) != "" {
			t.Fatalf("%s is set but: %v", pgtest.Require, err)
		}
		t.Skip(err)
	}
	defer c.Stop()
	dbURL, err := c.CreateDB()
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dbURL)
	db := strings.TrimPrefix(u.Path, "/")
	count := func(sql string) (int, error) {
		out, err := c.Psql(db, sql)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(out)
	}
	psql := func(sql string) int {
		t.Helper()
		n, err := count(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}

	agents := []string{"a", "b", "c", "d"}
	h1 := newHarness(t, swarmConfig{agents: agents, toml: "[liveness]\nnudge_after = \"0s\"\nheartbeat = \"500ms\"\n"})
	h1.extra = []string{"SWARM_DB_URL=" + dbURL}
	// Clone 2: the same repository and swarm.toml, its own supervisor.
	h2 := &harness{t: t, dir: filepath.Join(h1.dir, "host2"), home: h1.home, extra: h1.extra}
	h2.root = filepath.Join(h2.dir, "repo")
	t.Cleanup(h2.cleanup)
	h1.git(h1.dir, "clone", "-q", h1.root, h2.root)
	cfg, err := os.ReadFile(filepath.Join(h1.root, "swarm.toml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(h2.root, "swarm.toml"), string(cfg))

	up1 := h1.up("--engine", "script", "--agents", "a,b")
	up2 := h2.up("--engine", "script", "--agents", "c,d")
	leases := func(n int) func() (bool, error) {
		return func() (bool, error) {
			for _, p := range []*upProc{up1, up2} {
				if p.exited() {
					t.Fatalf("a supervisor exited:\n%s", tail(p.output(), 3000))
				}
			}
			// Held by the live supervisors: a killed one's leases stay
			// until they are taken over.
			got, err := count(fmt.Sprintf(`SELECT count(*) FROM leases WHERE holder_pid IN (%d, %d)`, up1.pid(), up2.pid()))
			return err == nil && got == n, nil // no table before the first migration
		}
	}
	h1.waitFor(60*time.Second, "both supervisors to hold their agents", leases(4))

	const senders, each = 8, 1000
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// send runs the sender processes, each sending count messages
	// numbered from first (its ids are senderBody(id, i)).
	send := func(first, count int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]string, senders)
		for i := range senders {
			wg.Go(func() {
				cmd := exec.Command(self, "-test.run=^$")
				cmd.Dir = h1.root
				cmd.Env = append(h1.env(), senderEnv+"=1", senderRoot+"="+h1.root, senderID+"="+strconv.Itoa(i+1),
					senderFirst+"="+strconv.Itoa(first), senderCount+"="+strconv.Itoa(count), senderAgents+"="+strings.Join(agents, ","))
				var out, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &stderr
				if err := cmd.Run(); err != nil || stderr.Len() > 0 {
					errs[i] = fmt.Sprintf("sender %d: %v: %s %s", i+1, err, out.String(), tail(stderr.String(), 1000))
				}
			})
		}
		wg.Wait()
		for _, e := range errs {
			if e != "" {
				t.Error(e)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t0 := time.Now()
	send(1, each/2)

	// kill -9 of clone 2's supervisor while clone 1 keeps working, and
	// its restart: it takes c and d back.
	up2.kill9(t)
	up2 = h2.up("--engine", "script", "--agents", "c,d")
	h1.waitFor(60*time.Second, "clone 2's restart to hold c and d again", leases(4))
	if up1.exited() {
		t.Fatalf("clone 1's supervisor exited when clone 2's was killed:\n%s", tail(up1.output(), 3000))
	}

	// The server restarts under both supervisors.
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	send(each/2+1, each/2)
	t.Logf("%d senders × %d messages stored in %s, across a kill -9 and a server restart", senders, each, time.Since(t0).Round(time.Millisecond))

	if n := psql(`SELECT count(*) FROM messages WHERE body LIKE '<<sender %'`); n != senders*each {
		t.Fatalf("%d sender messages stored, want %d", n, senders*each)
	}
	if n := psql(`SELECT count(DISTINCT body) FROM messages WHERE body LIKE '<<sender %'`); n != senders*each {
		t.Fatalf("%d distinct sender messages, want %d: some were stored twice", n, senders*each)
	}
	h1.waitFor(3*time.Minute, "every message done", func() (bool, error) {
		for _, p := range []*upProc{up1, up2} {
			if p.exited() {
				t.Fatalf("a supervisor exited:\n%s", tail(p.output(), 3000))
			}
		}
		return psql(`SELECT count(*) FROM messages WHERE body LIKE '<<sender %' AND state <> 'done'`) == 0, nil
	})
	// Done means delivered into a session that completed.
	if n := psql(`SELECT count(*) FROM messages m WHERE body LIKE '<<sender %' AND NOT EXISTS (
		SELECT 1 FROM sessions s WHERE s.agent = m.recipient AND s.seq = m.session_seq AND s.state = 'completed')`); n != 0 {
		t.Fatalf("%d messages are done without a completed session", n)
	}
	t.Logf("all %d messages done in completed sessions after %s; sessions completed: %d", senders*each, time.Since(t0).Round(time.Millisecond),
		psql(`SELECT count(*) FROM sessions WHERE state = 'completed'`))
	up1.interrupt(t)
	up2.interrupt(t)
	if n := psql(`SELECT count(*) FROM leases`); n != 0 {
		t.Errorf("%d leases left after both supervisors stopped", n)
	}
	// The outages are warnings (retried), never errors.
	for _, h := range []*harness{h1, h2} {
		if log, err := os.ReadFile(filepath.Join(h.root, ".swarm", "logs", "supervisor.log")); err != nil || bytes.Contains(log, []byte("level=ERROR")) {
			t.Errorf("%s's supervisor log (%v) has errors:\n%s", h.root, err, grepLines(string(log), "level=ERROR"))
		}
	}
}
