package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/sandbox"
)

// TestSandbox runs testdata/sandbox: sessions contained by bubblewrap
// (mode auto), and every process of a session ending with it, with the
// sandbox and without (DESIGN §13.3).
func TestSandbox(t *testing.T) {
	p := journeyParams(filepath.Join("testdata", "sandbox"))
	p.Condition = sandboxCondition
	p.Cmds["sessionprocs"] = cmdSessionProcs
	testscript.Run(t, p)
}

// sandboxCondition is the script condition [sandbox]: bubblewrap is usable
// here. Scripts skip without it ([!sandbox] skip), unless
// SWARM_REQUIRE_SANDBOX is set (CI): then the condition fails the script.
func sandboxCondition(cond string) (bool, error) {
	if cond != "sandbox" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	d, err := sandbox.Decide(context.Background(), sandbox.Bwrap, func(string) string { return "" })
	if err == nil && d.Contained() {
		return true, nil
	}
	if os.Getenv("SWARM_REQUIRE_SANDBOX") != "" {
		return false, fmt.Errorf("SWARM_REQUIRE_SANDBOX is set, but %v", err)
	}
	return false, nil
}

// cmdSessionProcs waits until the live processes carrying session id's
// markers (SWARM_SESSION_ID=<id>, SWARM_ROOT=<the current directory>) number want ("0", or ">0"), counting
// only those whose command line holds match when given:
// sessionprocs <session-id> <want> [match].
func cmdSessionProcs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: sessionprocs <session-id> 0|>0 [match]")
	}
	count := func() ([]int, string) {
		pids, known := proc.Marked("SWARM_SESSION_ID="+args[0], "SWARM_ROOT="+ts.MkAbs("."))
		if !known {
			ts.Fatalf("no /proc: cannot see a session's processes")
		}
		var out []int
		var lines []string
		for _, pid := range pids {
			b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			line := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
			if len(args) == 3 && !strings.Contains(line, args[2]) {
				continue
			}
			out = append(out, pid)
			lines = append(lines, strconv.Itoa(pid)+": "+line)
		}
		return out, strings.Join(lines, "\n")
	}
	deadline := time.Now().Add(journeyWait)
	for {
		pids, lines := count()
		if (args[1] == "0") == (len(pids) == 0) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waited %s for %s process(es) of session %s; there are %d:\n%s", journeyWait, args[1], args[0], len(pids), lines)
		}
		time.Sleep(journeyPoll)
	}
}
