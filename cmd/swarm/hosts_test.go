package main

import (
	"os"
	"path/filepath"
	"sync"
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
		},
	})
}
