package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mailbox/sqlite"
)

// longToolScript keeps an agent in one long bash call every session.
const longToolScript = `after = "repeat"

[[session]]
[[session.turn]]
tool = "bash"
args = { command = "sleep 900", timeout_seconds = 1800 }
`

// newSwarm makes a repository with `swarm init` run in it, a swarm.toml of
// scripted agents, and each agent's script. files sizes the repository.
func (b *bench) newSwarm(name string, agents []string, script string, files int) (string, error) {
	dir, err := b.newRepo(name, files, 2048)
	if err != nil {
		return "", err
	}
	if _, err := b.swarm(dir, "init"); err != nil {
		return "", err
	}
	var cfg strings.Builder
	cfg.WriteString("[defaults]\nengine = \"script\"\ninterrupt_grace = \"5s\"\n\n[liveness]\nnudge_after = \"0s\"\n")
	for _, a := range agents {
		fmt.Fprintf(&cfg, "\n[[agent]]\nname = %q\nrole = \"You are %s, measured by swarmbench.\"\n", a, a)
	}
	if err := os.WriteFile(filepath.Join(dir, "swarm.toml"), []byte(cfg.String()), 0o644); err != nil {
		return "", err
	}
	scripts := filepath.Join(dir, ".swarm", "scripts")
	if err := os.MkdirAll(scripts, 0o755); err != nil {
		return "", err
	}
	for _, a := range agents {
		if err := os.WriteFile(filepath.Join(scripts, a+".toml"), []byte(script), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// openStore opens a swarm's database to watch it.
func openStore(ctx context.Context, dir string) (mailbox.Store, error) {
	return sqlite.Open(ctx, filepath.Join(dir, ".swarm", "swarm.db"), sqlite.Options{})
}

// countState counts the agents in state.
func countState(ctx context.Context, st mailbox.Store, state lifecycle.State) (int, error) {
	as, err := st.Agents(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range as {
		if a.State == state {
			n++
		}
	}
	return n, nil
}

// upExited is the error of a supervisor that stopped before it should.
func (b *bench) upExited(p *proc, log string) error {
	data, _ := os.ReadFile(filepath.Join(b.tmp, b.prefix+log))
	return fmt.Errorf("swarm up exited early (%v):\n%s", p.err, tail(string(data), 2000))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// stopUp stops a supervisor gracefully; a slow or failed stop is an error.
func stopUp(p *proc) (time.Duration, error) {
	d, err := p.stop(60 * time.Second)
	if err != nil {
		return d, fmt.Errorf("stop swarm up: %w", err)
	}
	return d, nil
}

// waitIdle waits until n agents are Idle in the swarm up p runs, failing
// with its log when it exits first.
func (b *bench) waitIdle(ctx context.Context, p *proc, log string, st mailbox.Store, n int) error {
	return waitFor(ctx, 60*time.Second, 10*time.Millisecond, "every agent Idle", func() (bool, error) {
		if p.exited() {
			return false, b.upExited(p, log)
		}
		idle, err := countState(ctx, st, "Idle")
		return idle == n, err
	})
}
