package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/internal/front"
	"github.com/swarmhq/swarm/internal/text"
	"github.com/swarmhq/swarm/mailbox/open"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/engine"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/engine/script"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/proc"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/sandbox"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/worktree"
)

// DoctorOptions are the inputs of `swarm doctor`.
type DoctorOptions struct {
	App    *App
	Engine string
}

func newDoctorCmd(app *App, runF func(*DoctorOptions) error) *cobra.Command {
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
  login       an exec preset's key or login (ANTHROPIC_API_KEY or
              ~/.claude/.credentials.json for claude, OPENAI_API_KEY or
              ~/.codex/auth.json for codex, GEMINI_API_KEY, GOOGLE_API_KEY
              or ~/.gemini/oauth_creds.json for gemini-cli): a warning when
              none is found
  mcp         gemini-cli: whether it loads swarm's MCP server (and so the
              session's limits) from the settings swarm writes for a
              session, by 'gemini mcp list'
  supervisor  when one runs, that its control socket answers (none running
              is fine)
  database    .swarm/swarm.db passes PRAGMA integrity_check
  notify      [notify]'s command can run (found, executable), and where
              escalations go (nowhere is fine)
  sandbox     per agent, the sandbox its sessions run in ([sandbox] mode):
              bubblewrap, or none (a warning, with the fix: apt-get install
              bubblewrap); mode = "bwrap" without a usable bwrap fails

Exit status 1 when a check fails. --engine NAME checks the engine that
'swarm up --engine NAME' would use instead of the configured ones.

For the script engine it says which block of its script each agent's
next session plays (session N plays block N), and warns when that is past
the last block.

--json prints {"ok", "checks": [{"name", "status", "detail"}]}, status being
ok, off (an optional part is not there), warn (works, but maybe not as
meant; not a failure) or fail.`,
		Example: `  swarm doctor
  swarm doctor --engine script   # what 'swarm up --engine script' needs
  swarm doctor --engine claude   # claude's table, its command and its login`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runDoctor(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Engine, "engine", "", "check this engine for every agent, as 'swarm up --engine' would run them")
	return cmd
}

// Check statuses.
const (
	checkOK   = "ok"
	checkOff  = "off"  // an optional part is absent: not an error
	checkWarn = "warn" // works, but likely not as meant: not an error
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

	if exe, err := os.Executable(); err == nil {
		// A row only when it fails: the sessions' swarm is missing.
		if err := front.CheckBeside(exe); err != nil {
			r.add("front", checkFail, "%v", err)
		}
	}
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
		if err := checkEngineFlag(cfg, opts.Engine); err != nil {
			return err
		}
	}
	doctorBeads(ctx, r, l, cfg)
	if cfg != nil {
		doctorEngines(ctx, r, l, cfg, opts.Engine, open.Choose(app.Env.Getenv, cfg.Mailbox.URL, l.DB))
	}
	if l.Root != "" {
		doctorSupervisor(ctx, r, l)
		doctorDatabase(ctx, r, app, l, cfg)
		if cfg != nil {
			doctorHosts(ctx, r, l, cfg, open.Choose(app.Env.Getenv, cfg.Mailbox.URL, l.DB))
		}
	}
	if cfg != nil {
		doctorNotify(r, cfg)
		doctorSandbox(ctx, r, app, cfg)
	}

	r.OK = !slices.ContainsFunc(r.Checks, func(c doctorCheck) bool { return c.Status == checkFail })
	if app.JSON {
		if err := app.printJSON(r); err != nil {
			return err
		}
	} else {
		for _, c := range r.Checks {
			status := c.Status
			switch status {
			case checkFail:
				status = "FAIL"
			case checkWarn:
				status = "WARN"
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
		} else if warned := countStatus(r, checkWarn); warned > 0 {
			fmt.Fprintf(app.Stdout, "\nEverything swarm needs is here; see the %s above.\n", text.Plural(warned, "warning", "warnings"))
		} else {
			fmt.Fprintln(app.Stdout, "\nEverything swarm needs is here.")
		}
	}
	if !r.OK {
		return &codeError{code: exitError}
	}
	return nil
}

func countStatus(r *doctorReport, status string) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == status {
			n++
		}
	}
	return n
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
		need := cfg.NeedBeads()
		verb := "needs"
		if len(need) > 1 {
			verb = "need"
		}
		r.add("bd", checkFail, "not installed, but %s %s it; install bd (https://github.com/steveyegge/beads) or use strategy = \"simple\"", strings.Join(need, ", "), verb)
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
	version := text.FirstLine(strings.TrimSpace(string(res.Stdout)))
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
// that use it; for a script engine it also says which block each agent's
// next session plays.
func doctorEngines(ctx context.Context, r *doctorReport, l repo.Layout, cfg *config.Config, override string, db open.Target) {
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
			// The line names the engine already.
			r.add(label, checkFail, "for %s: %s", strings.Join(who, ", "), engine.Reason(err, name))
			continue
		}
		r.add(label, checkOK, "ready for %s", strings.Join(who, ", "))
		if se, ok := eng.(*script.Engine); ok {
			doctorScripts(ctx, r, db, se, agents)
		}
		if e, err := cfg.EngineFor(agents[0], override); err == nil && e.Kind == config.EngineExec && e.Preset != "" {
			doctorLogin(r, e)
		}
		if ee, ok := eng.(*execengine.Engine); ok {
			doctorGemini(ctx, r, ee, agents[0], cfg.Root)
		}
		if c, ok := eng.(engine.CLI); ok {
			doctorLimits(r, c, agents)
		}
		if u, ok := eng.(engine.Unmetered); ok && u.Unmetered() {
			doctorUnmetered(r, cfg, name, agents)
		}
	}
}

// doctorUnmetered warns of each agent with a budget whose engine reports
// no token usage: its budget, and the swarm's, count only an estimate.
func doctorUnmetered(r *doctorReport, cfg *config.Config, engineName string, agents []config.Agent) {
	for _, a := range agents {
		if !a.Budget.Enabled() && !cfg.Budget.Swarm().Enabled() {
			continue
		}
		r.add("budget "+a.Name, checkWarn, "engine %s is a custom command that reports no token usage, so its sessions count an estimate (prompt bytes / 4) against the budget; use a preset (claude, codex, gemini-cli) to meter it", engineName)
	}
}

// doctorLimits warns of each agent whose mode turns off what its CLI
// cannot keep off (its prompt does not claim those limits either).
func doctorLimits(r *doctorReport, c engine.CLI, agents []config.Agent) {
	for _, a := range agents {
		t := c.CLITools(a.Spec().Vector())
		if len(t.Unenforced) == 0 {
			continue
		}
		var off []string
		for _, cap := range t.Unenforced {
			off = append(off, string(cap))
		}
		cli := t.CLI
		if cli == "" {
			cli = "a custom command"
		}
		why := "swarm cannot limit " + cli + "'s own tools"
		if t.How != "" {
			why = fmt.Sprintf("the closest it has is %s", t.How)
		}
		r.add("limits "+a.Name, checkWarn, "its mode turns off %s, which %s cannot keep off (%s); only the swarm commands and MCP tools enforce its capabilities",
			strings.Join(off, " and "), cli, why)
	}
}

// doctorGemini says what a gemini-cli preset's CLI really loads from the
// settings swarm gives its sessions (`gemini mcp list` with them): a
// settings file gemini-cli skips would leave its agents without swarm's
// tools and their limits off, while the log claimed them.
func doctorGemini(ctx context.Context, r *doctorReport, e *execengine.Engine, a config.Agent, root string) {
	loaded, ok, err := e.ProbeGemini(ctx, root, os.Environ(), a.Name, a.Spec().Vector())
	label := "mcp " + e.Name()
	switch {
	case !ok:
	case err != nil:
		r.add(label, checkWarn, "could not ask gemini-cli what it loads: %v", err)
	case !loaded.Listed:
		r.add(label, checkFail, "%s: its agents would have no swarm tools and their limits off; report it with gemini --version", loaded)
	case loaded.Status != "Connected":
		r.add(label, checkWarn, "%s: check that `swarm mcp --help` runs", loaded)
	default:
		r.add(label, checkOK, "%s, with the sessions' limits, from the settings swarm writes for each session", loaded)
	}
}

// doctorLogin checks that an exec preset's CLI has a key or a login. The
// CLI may keep its login where swarm does not look, so a miss is a
// warning, not a failure.
func doctorLogin(r *doctorReport, e config.Engine) {
	p, ok := execengine.Presets[e.Preset]
	if !ok {
		return
	}
	env := os.Environ()
	if e.EnvFile != "" {
		if vars, err := config.ReadEnvFile(e.EnvFile); err == nil {
			env = append(env, vars...)
		}
	}
	home, _ := os.UserHomeDir()
	why, found := p.Credentials(env, home)
	if found {
		r.add("login "+e.Name, checkOK, "%s: %s", p.Command[0], why)
		return
	}
	r.add("login "+e.Name, checkWarn, "%s: %s (or in env_file in [engine.%s]); the agents' sessions fail at once without it", p.Command[0], why, e.Name)
}

// doctorScripts says which block of its script each agent's next session
// plays (session N plays block N), warning when it is past the last one.
// Agents without a script file play the built-in one: not worth a line
// each.
func doctorScripts(ctx context.Context, r *doctorReport, db open.Target, e *script.Engine, agents []config.Agent) {
	var st mailbox.Store // nil: no database, or not readable; sessions start at 1
	if _, err := os.Stat(db.Path); err == nil || db.URL != "" {
		if opened, err := db.Open(ctx); err == nil {
			defer opened.Close()
			st = opened
		}
	}
	for _, a := range agents {
		seq := int64(1)
		if st != nil {
			if n, err := swarm.NextSession(ctx, st, a.Name); err == nil {
				seq = n
			}
		}
		p, err := e.Plan(a.Name, seq)
		switch {
		case err != nil:
			r.add("script "+a.Name, checkFail, "%v; fix the script", err)
		case p.Past():
			r.add("script "+a.Name, checkWarn, "%s", strings.TrimPrefix(p.String(), "warning: "))
		case p.Exists:
			r.add("script "+a.Name, checkOK, "next: %s", p)
		}
	}
}

// doctorNotify checks that [notify]'s command can run: a hook that cannot
// would only show in the supervisor log, when an escalation opens.
func doctorNotify(r *doctorReport, cfg *config.Config) {
	n := cfg.Notify
	if !n.Enabled() {
		r.add("notify", checkOff, "escalations are not sent anywhere (optional: [notify] command or webhook in swarm.toml)")
		return
	}
	var where []string
	if len(n.Command) > 0 {
		name := n.Command[0]
		path, why := "", ""
		if strings.ContainsRune(name, os.PathSeparator) {
			// Run from the repository root, like the supervisor runs it.
			path = name
			if !filepath.IsAbs(path) {
				path = filepath.Join(cfg.Root, path)
			}
			switch fi, err := os.Stat(path); {
			case err != nil:
				why = "does not exist"
			case fi.IsDir():
				why = "is a directory"
			case fi.Mode()&0o111 == 0:
				why = "is not executable"
			}
		} else if p, err := exec.LookPath(name); err != nil {
			why = "is not found on PATH"
		} else {
			path = p
		}
		if why != "" {
			r.add("notify", checkFail, "[notify] command %q %s; escalations would not reach you: fix command in swarm.toml (or chmod +x it)", name, why)
			return
		}
		where = append(where, "command "+path)
	}
	if n.Webhook != "" {
		where = append(where, "webhook "+redactURL(n.Webhook))
	}
	r.add("notify", checkOK, "escalations (%s and up) go to %s", n.MinSeverity, strings.Join(where, " and "))
}

// redactURL hides a password or query (a token) in a URL shown to the user.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unreadable URL)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
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

// doctorDatabase checks the mailbox database: PRAGMA integrity_check on
// the SQLite file; for PostgreSQL, the connection, the server's version and
// the migrations.
func doctorDatabase(ctx context.Context, r *doctorReport, app *App, l repo.Layout, cfg *config.Config) {
	configURL := ""
	if cfg != nil {
		configURL = cfg.Mailbox.URL
	}
	target := open.Choose(app.Env.Getenv, configURL, l.DB)
	if target.URL != "" {
		doctorPostgres(ctx, r, target)
		return
	}
	name := rel(l.Root, l.DB)
	if _, err := os.Stat(l.DB); errors.Is(err, os.ErrNotExist) {
		r.add("database", checkFail, "%s does not exist yet; 'swarm init' (or 'swarm up') creates it", name)
		return
	}
	st, err := target.Open(ctx)
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

// doctorPostgres connects (which migrates), and reports the server's
// version and the schema's.
func doctorPostgres(ctx context.Context, r *doctorReport, target open.Target) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := target.Open(cctx)
	if err != nil {
		r.add("database", checkFail, "%v", err)
		return
	}
	defer st.Close()
	d, err := open.Diagnose(cctx, st)
	switch {
	case err != nil:
		r.add("database", checkFail, "%s: %v", target, err)
	case d.Check != "ok":
		r.add("database", checkFail, "%s (PostgreSQL %s): %s", target, d.Server, d.Check)
	default:
		r.add("database", checkOK, "%s: PostgreSQL %s, schema at migration %d of %d", target, d.Server, d.Schema, d.Want)
	}
}

// doctorHosts checks how work done on several hosts meets: through the
// git remote of [worktree] push. Without one, a swarm on PostgreSQL (the
// multi-host backend) merges only what ran in this clone.
func doctorHosts(ctx context.Context, r *doctorReport, l repo.Layout, cfg *config.Config, target open.Target) {
	remote := cfg.Worktree.Push
	switch {
	case remote == "" && target.URL != "":
		r.add("hosts", checkWarn, "no [worktree] push remote: 'swarm down --merge' here sees only the branches of agents that ran in this clone; on several hosts, set push = \"origin\" (a remote every clone shares) under [worktree]")
	case remote == "":
		r.add("hosts", checkOff, "one host (SQLite); [worktree] push is not set")
	default:
		res, err := proc.Run(ctx, proc.Spec{Dir: l.Root, Timeout: doctorGitTimeout}, "git", "remote", "get-url", remote)
		if err != nil {
			r.add("hosts", checkFail, "[worktree] push = %q, but this clone has no such git remote; add it ('git remote add %s <url>') or fix the name", remote, remote)
			return
		}
		r.add("hosts", checkOK, "agents' branches are pushed to %s (%s) after every session and fetched before a merge", remote, strings.TrimSpace(string(res.Stdout)))
	}
}

// doctorSandbox says, per agent, which sandbox its sessions run in and why
// ([sandbox] mode and a trial run of bwrap, as swarm up decides it).
func doctorSandbox(ctx context.Context, r *doctorReport, app *App, cfg *config.Config) {
	d, err := sandbox.Decide(ctx, cfg.Sandbox.Mode, app.Env.Getenv)
	for _, name := range cfg.AgentNames() {
		switch {
		case err != nil:
			r.add("sandbox", checkFail, "%s: %v", name, err)
		case d.Contained():
			r.add("sandbox", checkOK, "%s: bwrap (mode %s: %s)", name, d.Mode, d.Why)
		case d.Mode == sandbox.None:
			r.add("sandbox", checkWarn, "%s: none (%s); set [sandbox] mode = \"auto\" and %s to contain its sessions", name, d.Why, sandbox.Fix)
		default:
			r.add("sandbox", checkWarn, "%s: none (mode %s: %s): its sessions run with your rights; fix: %s", name, d.Mode, d.Why, sandbox.Fix)
		}
	}
}
