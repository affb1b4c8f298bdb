package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/swarmhq/swarm/internal/pgtest"
)

// TestHostScripts runs the multi-host journeys in testdata/hosts: several
// clones of one repository, each with its own supervisor, sharing a swarm
// on a throwaway PostgreSQL cluster ($PGURL, a fresh database per
// script). Without PostgreSQL they are skipped, unless
// SWARM_REQUIRE_POSTGRES is set (CI).
func TestHostScripts(t *testing.T) { runPostgresScripts(t, filepath.Join("testdata", "hosts")) }

// TestPostgresScripts runs the journeys of testdata/postgres on a cluster
// of their own: the host journeys restart theirs (pgrestart), which would
// cut these short.
func TestPostgresScripts(t *testing.T) { runPostgresScripts(t, filepath.Join("testdata", "postgres")) }

// runPostgresScripts runs the scripts of dir in parallel on one throwaway
// PostgreSQL cluster, a fresh database each.
func runPostgresScripts(t *testing.T, dir string) {
	if testing.Short() {
		t.Skip("starts supervisors and a PostgreSQL cluster")
	}
	c, err := pgtest.Start()
	if err != nil {
		if os.Getenv(pgtest.Require) != "" {
			t.Fatalf("%s is set but: %v", pgtest.Require, err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Log(err)
		}
	})
	// pgrestart restarts the server in the background, as an operator's
	// pg_ctl restart would; pgwait waits until it accepts connections.
	var restarts sync.WaitGroup
	var restartErr error
	testscript.Run(t, testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			url, err := c.CreateDB()
			if err != nil {
				return err
			}
			// Every swarm process of the script, the waits' too, uses it.
			env.Setenv("SWARM_DB_URL", url)
			return setupJourney(env)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jsonq":     cmdJSONQ,
			"waitjson":  cmdWaitJSON,
			"waitmatch": cmdWaitMatch,
			"pgrestart": func(ts *testscript.TestScript, neg bool, args []string) {
				restarts.Go(func() { restartErr = c.Restart() })
			},
			"pgwait": func(ts *testscript.TestScript, neg bool, args []string) {
				restarts.Wait()
				if restartErr != nil {
					ts.Fatalf("pg_ctl restart: %v", restartErr)
				}
			},
			// pgcut ends every connection to the script's database, as a
			// network cut of the hosts connected would: their lease locks
			// go, and so does any transaction a frozen one left open.
			"pgcut": func(ts *testscript.TestScript, neg bool, args []string) {
				u, err := url.Parse(ts.Getenv("SWARM_DB_URL"))
				if err != nil {
					ts.Fatalf("SWARM_DB_URL: %v", err)
				}
				out, err := c.Psql(strings.TrimPrefix(u.Path, "/"), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid()`)
				if err != nil {
					ts.Fatalf("%v", err)
				}
				if out == "0" {
					ts.Fatalf("no connection to cut")
				}
			},
			"freeze":  cmdFreeze,
			"thaw":    cmdThaw,
			"lockpid": cmdLockPid,
		},
	})
}

// cmdFreeze stops (SIGSTOP) the supervisor whose pid is in a clone's lock
// file, as a frozen VM or a long GC pause would: freeze <lockfile>. The
// script thaws it with thaw; the end of the script does too.
func cmdFreeze(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: freeze <lockfile>")
	}
	pid := lockPid(ts, args[0])
	ts.Check(syscall.Kill(pid, syscall.SIGSTOP))
	ts.Defer(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
}

// cmdThaw resumes (SIGCONT) a supervisor freeze stopped: thaw <lockfile>.
func cmdThaw(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: thaw <lockfile>")
	}
	ts.Check(syscall.Kill(lockPid(ts, args[0]), syscall.SIGCONT))
}

// cmdLockPid sets a variable to the pid in a clone's lock file:
// lockpid <lockfile> <name>.
func cmdLockPid(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: lockpid <lockfile> <name>")
	}
	ts.Setenv(args[1], strconv.Itoa(lockPid(ts, args[0])))
}

// lockPid is the pid a supervisor wrote into its clone's lock file.
func lockPid(ts *testscript.TestScript, file string) int {
	b, err := os.ReadFile(ts.MkAbs(file))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		ts.Fatalf("no supervisor pid in %s: %q", file, b)
	}
	return pid
}
