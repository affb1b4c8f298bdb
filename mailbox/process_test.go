package mailbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/swarmhq/swarm/message"
)

// The multi-process tests re-execute the test binary as children; the child
// role is chosen by an environment variable.
const childEnv = "SWARM_MAILBOX_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "send":
		os.Exit(childSend())
	case "open":
		os.Exit(childOpen())
	default:
		fmt.Fprintln(os.Stderr, "unknown child role")
		os.Exit(3)
	}
}

func childSend() int {
	n, _ := strconv.Atoi(os.Getenv("SWARM_TEST_N"))
	s, err := Open(context.Background(), os.Getenv("SWARM_TEST_DB"), Options{Agents: []string{"backend"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	for i := range n {
		if _, err := s.Send(context.Background(), message.Draft{From: "operator", To: "backend", Body: fmt.Sprintf("msg %d", i)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func childOpen() int {
	s, err := Open(context.Background(), os.Getenv("SWARM_TEST_DB"), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return exitCode(s.Close())
}

func exitCode(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runChildren starts n copies of the test binary in role and waits for all.
func runChildren(t *testing.T, n int, role string, env ...string) []error {
	t.Helper()
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), append(env, childEnv+"="+role, "GORACE=atexit_sleep_ms=0")...)
		cmds[i] = cmd
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Go(func() {
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		})
	}
	wg.Wait()
	return errs
}

func TestConcurrentSendersAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes")
	}
	db := filepath.Join(t.TempDir(), "swarm.db")
	// swarm init creates the database before anyone sends.
	s, err := Open(context.Background(), db, Options{Agents: []string{"backend"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, err := range runChildren(t, 4, "send", "SWARM_TEST_DB="+db, "SWARM_TEST_N=250") {
		if err != nil {
			t.Errorf("sender %d: %v", i, err)
		}
	}
	ms, err := s.Inbox(context.Background(), "backend", Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, m := range ms {
		if seen[m.ID] {
			t.Fatalf("duplicate id %d", m.ID)
		}
		seen[m.ID] = true
	}
	if len(ms) != 1000 {
		t.Fatalf("%d messages stored, want 1000", len(ms))
	}
}

func TestMigrationRace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 120 processes")
	}
	dir := t.TempDir()
	for round := range 20 {
		db := filepath.Join(dir, fmt.Sprintf("round%d.db", round))
		for i, err := range runChildren(t, 6, "open", "SWARM_TEST_DB="+db) {
			if err != nil {
				t.Errorf("round %d opener %d: %v", round, i, err)
			}
		}
		s, err := Open(context.Background(), db, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		s.DB().QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n)
		s.Close()
		if want := 1; n != want {
			t.Fatalf("round %d: %d migration rows, want %d", round, n, want)
		}
	}
}
