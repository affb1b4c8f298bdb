// Package repo finds the repository a swarm command works on and names the
// files swarm keeps under .swarm/.
//
// The search order is fixed (DESIGN §6): an explicit --dir, then SWARM_ROOT,
// then walking up from the working directory. A working directory inside
// <X>/.swarm/worktrees/<name> resolves to <X>, so an agent that runs `swarm
// send` in its own worktree reaches the swarm's mailbox rather than a checked
// out copy of swarm.toml. SWARM_DB overrides only the database path.
package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// ConfigName is the configuration file at the repo root.
const ConfigName = "swarm.toml"

// StateDir is the directory under the repo root that holds swarm's state.
const StateDir = ".swarm"

// Layout names every path swarm uses for one repository.
type Layout struct {
	Root   string // the repository root (the directory with swarm.toml)
	Config string // Root/swarm.toml
	State  string // Root/.swarm
	DB     string // Root/.swarm/swarm.db unless SWARM_DB overrides it
}

// At returns the layout for a known root. The database path can be
// overridden with db (empty means the default).
func At(root, db string) Layout {
	state := filepath.Join(root, StateDir)
	if db == "" {
		db = filepath.Join(state, "swarm.db")
	}
	return Layout{Root: root, Config: filepath.Join(root, ConfigName), State: state, DB: db}
}

// Logs is where supervisor and session logs go.
func (l Layout) Logs() string { return filepath.Join(l.State, "logs") }

// SessionLog is the log file of an agent's session seq.
func (l Layout) SessionLog(agent string, seq int64) string {
	return filepath.Join(l.Logs(), agent, strconv.FormatInt(seq, 10)+".log")
}

// Scripts is where the script engine looks for <agent>.toml by default.
func (l Layout) Scripts() string { return filepath.Join(l.State, "scripts") }

// Worktrees is the default parent directory of agent worktrees.
func (l Layout) Worktrees() string { return filepath.Join(l.State, "worktrees") }

// Orphans is where worktree directories that git no longer knows are moved.
func (l Layout) Orphans() string { return filepath.Join(l.State, "orphans") }

// Lock is the flock file held by the one running supervisor.
func (l Layout) Lock() string { return filepath.Join(l.State, "swarm.lock") }

// Socket is the preferred control socket path.
func (l Layout) Socket() string { return filepath.Join(l.State, "control.sock") }

// ControlAddr holds the socket path when Socket is too long to bind.
func (l Layout) ControlAddr() string { return filepath.Join(l.State, "control.addr") }

// Env is what Find reads from the environment; tests pass their own.
type Env interface{ Getenv(string) string }

// OSEnv reads the process environment.
type OSEnv struct{}

func (OSEnv) Getenv(k string) string { return os.Getenv(k) }

// ErrNotFound means no swarm repository was found from the working directory.
var ErrNotFound = errors.New("not in a swarm repository")

// Find locates the repository. dir is the --dir flag (may be empty), cwd the
// working directory.
func Find(dir, cwd string, env Env) (Layout, error) {
	db := env.Getenv("SWARM_DB")
	if db != "" && !filepath.IsAbs(db) {
		db = filepath.Join(cwd, db)
	}
	switch {
	case dir != "":
		root, err := absDir(dir, cwd)
		if err != nil {
			return Layout{}, fmt.Errorf("--dir %s: %w", dir, err)
		}
		return At(root, db), nil
	case env.Getenv("SWARM_ROOT") != "":
		root, err := absDir(env.Getenv("SWARM_ROOT"), cwd)
		if err != nil {
			return Layout{}, fmt.Errorf("SWARM_ROOT %s: %w", env.Getenv("SWARM_ROOT"), err)
		}
		return At(root, db), nil
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return Layout{}, err
	}
	if root, ok := WorktreeOwner(cwd); ok {
		return At(root, db), nil
	}
	for d := cwd; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, ConfigName)) || dirExists(filepath.Join(d, StateDir)) {
			return At(d, db), nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return Layout{}, fmt.Errorf("%w: no %s found in %s or any parent; run 'swarm init' at your repo root, or pass --dir", ErrNotFound, ConfigName, cwd)
}

// WorktreeOwner reports whether path lies inside <X>/.swarm/worktrees/<name>
// and returns <X>. It looks at the path only, so it works before the
// worktree exists on disk.
func WorktreeOwner(path string) (string, bool) {
	for d := filepath.Clean(path); filepath.Dir(d) != d; d = filepath.Dir(d) {
		wt := filepath.Dir(d)
		st := filepath.Dir(wt)
		if filepath.Base(wt) == "worktrees" && filepath.Base(st) == StateDir {
			return filepath.Dir(st), true
		}
	}
	return "", false
}

func absDir(dir, cwd string) (string, error) {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cwd, dir)
	}
	dir = filepath.Clean(dir)
	if !dirExists(dir) {
		return "", errors.New("no such directory")
	}
	return dir, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
