package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mailbox/sqlite"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/worktree"
)

// DoctorOptions are the inputs of `swarm doctor`.
type DoctorOptions struct {
	App    *App
	Engine string
}

func init() { commands = append(commands, newDoctorCmd) }

func newDoctorCmd(app *App) *cobra.Command {
	opts := &DoctorOptions{App: app}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what swarm needs: git, bd, the engines, the supervisor, the database",
		Long: `Check, one line each, what swarm needs here and say what to do about
anything missing:

  git         installed, version 2.20 or newer
  repository  a git repository on a branch, with a first commit
  config      swarm.toml reads without errors
  bd          beads, optional: its version, and whether this repo has tasks
  engine      each engine the agents use: the Gemini API key (or Vertex AI),
              an exec agent's command on PATH, the scripts' syntax
  supervisor  when one runs, that its control socket answers (none running
              is fine)
  database    .swarm/swarm.db passes PRAGMA integrity_check

Exit status 1 when a check fails. --engine NAME checks the engine that
'swarm up --engine NAME' would use instead of the configured ones.

--json prints {"ok", "checks": [{"name", "status", "detail"}]}, status being
ok, off (an optional part is not there) or fail.`,
		Example: `  swarm doctor
  swarm doctor --engine script   # what 'swarm up --engine script' needs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Engine, "engine", "", "check this engine for every agent, as 'swarm up --engine' would run them")
	return cmd
}

// Check statuses.
const (
	checkOK   = "ok"
	checkOff  = "off" // an optional part is absent: not an error
	checkFail = "fail"
)

type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

type doctorReport struct {
	OK     bool          `json:"ok"`
	Checks []doctorCheck `json:"checks"`
}

func (r *doctorReport) add(name, status, format string, a ...any) {
	r.Checks = append(r.Checks, doctorCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, a...)})
}

// Bounds of the checks that run other programs or dial the socket.
const (
	doctorGitTimeout    = 5 * time.Second
	doctorSocketTimeout = 2 * time.Second
)

func runDoctor(ctx context.Context, opts *DoctorOptions) error {
	app := opts.App
	r := &doctorReport{}
	gitOK := doctorGit(ctx, r)

	l, err := app.layout()
	switch {
	case err != nil:
		r.add("repository", checkFail, "%v", err)
	case !gitOK:
		r.add("repository", checkOff, "%s: not checked without a working git", l.Root)
	default:
		doctorRepo(ctx, r, l)
	}
	var cfg *config.Config
	if err == nil {
		cfg, err = config.Load(l.Config, l.Root)
		switch {
		case err != nil:
			r.add("config", checkFail, "%v; fix swarm.toml (the README's Configuration section lists every key)", err)
			cfg = nil
		default:
			r.add("config", checkOK, "%s: %d agent(s): %s", rel(l.Root, l.Config), len(cfg.Agents), strings.Join(cfg.AgentNames(), ", "))
		}
	}
	if cfg != nil && opts.Engine != "" {
		for _, a := range cfg.Agents {
			if _, err := cfg.EngineFor(a, opts.Engine); err != nil {
				return usagef("--engine: %v", err)
			}
		}
	}
	doctorBeads(ctx, r, l, cfg)
	if cfg != nil {
		doctorEngines(ctx, r, cfg, opts.Engine)
	}
	if l.Root != "" {
		doctorSupervisor(ctx, r, l)
		doctorDatabase(ctx, r, l, cfg)
	}

	r.OK = !slices.ContainsFunc(r.Checks, func(c doctorCheck) bool { return c.Status == checkFail })
	if app.JSON {
		if err := app.printJSON(r); err != nil {
			return err
		}
	} else {
		for _, c := range r.Checks {
			status := c.Status
			if status == checkFail {
				status = "FAIL"
			}
			fmt.Fprintf(app.Stdout, "%-4s  %-15s %s\n", status, c.Name, c.Detail)
		}
		failed := 0
		for _, c := range r.Checks {
			if c.Status == checkFail {
				failed++
			}
		}
		if failed > 0 {
			fmt.Fprintf(app.Stdout, "\n%d problem(s): fix the FAIL line(s) above and run 'swarm doctor' again.\n", failed)
			engineFailed := slices.ContainsFunc(r.Checks, func(c doctorCheck) bool {
				return c.Status == checkFail && strings.HasPrefix(c.Name, "engine ")
			})
			if engineFailed && opts.Engine == "" {
				fmt.Fprintln(app.Stdout, "To try swarm offline meanwhile, with scripted agents: swarm up --engine script")
			}
		} else {
			fmt.Fprintln(app.Stdout, "\nEverything swarm needs is here.")
		}
	}
	if !r.OK {
		return &codeError{code: exitError}
	}
	return nil
}

// doctorGit checks that git is installed and new enough.
func doctorGit(ctx context.Context, r *doctorReport) bool {
	res, err := proc.Run(ctx, proc.Spec{Timeout: doctorGitTimeout}, "git", "version")
	switch {
	case isNotFound(err) || errors.Is(err, os.ErrNotExist):
		r.add("git", checkFail, "git is not installed or not on PATH; install git %s or newer", worktree.MinGit)
		return false
	case err != nil:
		r.add("git", checkFail, "git version: %v; check your git installation", err)
		return false
	}
	out := strings.TrimSpace(string(res.Stdout))
	major, minor, err := worktree.ParseGitVersion(out)
	if err != nil {
		r.add("git", checkFail, "cannot read the version from %q; swarm needs git %s or newer", out, worktree.MinGit)
		return false
	}
	wantMajor, wantMinor, _ := worktree.ParseGitVersion("git version " + worktree.MinGit)
	if major < wantMajor || major == wantMajor && minor < wantMinor {
		r.add("git", checkFail, "%s is too old: swarm needs git %s or newer (git worktree); upgrade git", out, worktree.MinGit)
		return false
	}
	r.add("git", checkOK, "%s", out)
	return true
}

// doctorRepo runs the checks `swarm up` makes before it creates anything.
func doctorRepo(ctx context.Context, r *doctorReport, l repo.Layout) {
	m, err := worktree.New(ctx, worktree.Options{Root: l.Root})
	if err == nil {
		err = m.Preflight(ctx)
	}
	if err != nil {
		r.add("repository", checkFail, "%v", err)
		return
	}
	detail := l.Root
	if res, err := proc.Run(ctx, proc.Spec{Dir: l.Root, Timeout: doctorGitTimeout}, "git", "symbolic-ref", "--short", "HEAD"); err == nil {
		detail += " (on branch " + strings.TrimSpace(string(res.Stdout)) + ")"
	}
	r.add("repository", checkOK, "%s", detail)
}

// doctorBeads reports bd: optional, so its absence is not a failure.
func doctorBeads(ctx context.Context, r *doctorReport, l repo.Layout, cfg *config.Config) {
	path, err := exec.LookPath("bd")
	if err != nil && cfg != nil && len(cfg.NeedBeads()) > 0 {
		r.add("bd", checkFail, "not installed, but %s need it; install bd (https://github.com/steveyegge/beads) or use strategy = \"simple\"", strings.Join(cfg.NeedBeads(), ", "))
		return
	}
	if err != nil {
		r.add("bd", checkOff, "not installed (optional: with bd on PATH agents get beads tasks; https://github.com/steveyegge/beads)")
		return
	}
	timeout := beads.DefaultTimeout
	if cfg != nil && cfg.Prompt.BDTimeout > 0 {
		timeout = cfg.Prompt.BDTimeout
	}
	res, err := proc.Run(ctx, proc.Spec{Timeout: timeout}, "bd", "version")
	if err != nil {
		r.add("bd", checkFail, "%s is on PATH but 'bd version' failed: %v; reinstall bd or take it off PATH", path, err)
		return
	}
	version := firstLineOf(strings.TrimSpace(string(res.Stdout)))
	if l.Root == "" {
		r.add("bd", checkOK, "%s", version)
		return
	}
	issues, err := (&beads.Client{Dir: l.Root, Timeout: timeout}).Ready(ctx)
	switch {
	case errors.Is(err, beads.ErrNoDatabase):
		r.add("bd", checkOK, "%s; no beads database in this repository ('bd init' sets one up to give agents tasks)", version)
	case err != nil:
		r.add("bd", checkFail, "%s: 'bd ready --json' failed: %v; agents get no task list until it works", version, err)
	default:
		r.add("bd", checkOK, "%s; %d ready task(s)", version, len(issues))
	}
}

// doctorEngines runs each engine's own Preflight once, naming the agents
// that use it.
func doctorEngines(ctx context.Context, r *doctorReport, cfg *config.Config, override string) {
	factory := swarm.EngineFactory(cfg, override)
	var names []string
	users := map[string][]config.Agent{}
	for _, a := range cfg.Agents {
		e, err := cfg.EngineFor(a, override)
		if err != nil {
			r.add("engine", checkFail, "agent %s: %v", a.Name, err)
			continue
		}
		if _, ok := users[e.Name]; !ok {
			names = append(names, e.Name)
		}
		users[e.Name] = append(users[e.Name], a)
	}
	for _, name := range names {
		agents := users[name]
		var who []string
		for _, a := range agents {
			who = append(who, a.Name)
		}
		label := "engine " + name
		eng, err := factory(agents[0])
		if err == nil {
			if pf, ok := eng.(engine.Preflight); ok {
				err = pf.Preflight(ctx)
			}
		}
		if err != nil {
			// The engines prefix their errors with their name; the line
			// names the engine already.
			msg := err.Error()
			for _, p := range []string{"exec " + label + ": ", label + ": ", name + ": "} {
				msg = strings.TrimPrefix(msg, p)
			}
			r.add(label, checkFail, "for %s: %s", strings.Join(who, ", "), msg)
			continue
		}
		r.add(label, checkOK, "ready for %s", strings.Join(who, ", "))
	}
}

// doctorSupervisor checks the control socket of a running supervisor. No
// supervisor is fine; one that holds the lock but does not answer is not.
func doctorSupervisor(ctx context.Context, r *doctorReport, l repo.Layout) {
	sock := control.SocketPath(l)
	cctx, cancel := context.WithTimeout(ctx, doctorSocketTimeout)
	resp, err := control.Call(cctx, l, control.Request{Op: control.OpPing})
	cancel()
	if err == nil {
		var p struct {
			Pid int `json:"pid"`
		}
		_ = json.Unmarshal(resp.Data, &p)
		r.add("supervisor", checkOK, "running (pid %d); its control socket %s answers", p.Pid, rel(l.Root, sock))
		return
	}
	if pid, held := swarm.LockHolder(l.Lock()); held {
		who, stop := "a supervisor", "stop it with Ctrl-C in its terminal"
		if pid > 0 {
			who, stop = fmt.Sprintf("a supervisor (pid %d)", pid), fmt.Sprintf("stop it (kill %d)", pid)
		}
		r.add("supervisor", checkFail, "%s holds %s but its control socket %s does not answer; if it is stuck, %s and run 'swarm up' again",
			who, rel(l.Root, l.Lock()), rel(l.Root, sock), stop)
		return
	}
	r.add("supervisor", checkOK, "not running ('swarm up' starts it)")
}

// doctorDatabase runs PRAGMA integrity_check on the mailbox database.
func doctorDatabase(ctx context.Context, r *doctorReport, l repo.Layout, cfg *config.Config) {
	name := rel(l.Root, l.DB)
	if _, err := os.Stat(l.DB); errors.Is(err, os.ErrNotExist) {
		r.add("database", checkFail, "%s does not exist yet; any swarm command creates it once swarm.toml reads (try 'swarm status')", name)
		return
	}
	st, err := sqlite.Open(ctx, l.DB, sqlite.Options{})
	if err != nil {
		r.add("database", checkFail, "%v; the database is damaged: stop swarm, move %s aside (sqlite3 .recover can save its mail) and run 'swarm status' to create a fresh one", err, name)
		return
	}
	defer st.Close()
	res, err := st.Check(ctx)
	switch {
	case err != nil:
		r.add("database", checkFail, "%s: PRAGMA integrity_check: %v; stop swarm, move %s aside (sqlite3 .recover can save its mail) and run 'swarm status' to create a fresh one", name, err, name)
	case res != "ok":
		r.add("database", checkFail, "%s: PRAGMA integrity_check: %s; stop swarm, move %s aside (sqlite3 .recover can save its mail) and run 'swarm status' to create a fresh one", name, res, name)
	default:
		r.add("database", checkOK, "%s: integrity_check ok", name)
	}
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
