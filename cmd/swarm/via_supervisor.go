package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
)

// On a PostgreSQL swarm the sessions hold no database credential: the
// supervisor sets $SWARM_VIA_SUPERVISOR in their environment, and the
// commands an agent runs there (swarm send, inbox, ack, escalate, ...)
// are run by the supervisor, which has one, through the control socket.
// The answer is printed as the command would have printed it, with its
// exit code.

// viaSupervisorCommands are the commands a session may have the
// supervisor run: the ones that read or post mail and escalations. The
// others (up, down, init, watch, logs -f, mcp) either must not run inside
// the supervisor or run fine where they are.
var viaSupervisorCommands = []string{"send", "inbox", "ack", "escalate", "status", "escalations", "escalation", "events", "prompt", "tasks", "queue", "report", "workflow", "spawn", "team"}

// viaSupervisorTimeout bounds one command run by the supervisor.
const viaSupervisorTimeout = 2 * time.Minute

// forwarded reports whether app runs inside a session whose commands go
// through the supervisor, and if args name one of those commands, runs it
// there and returns its exit code.
func forwarded(ctx context.Context, app *App, args []string) (int, bool) {
	if app.inProcess {
		return 0, false
	}
	if app.Env.Getenv(swarm.ViaSupervisorEnv) != "1" || app.Env.Getenv("SWARM_SESSION_ID") == "" {
		return operatorSend(ctx, app, args)
	}
	if len(args) == 0 || !slices.Contains(viaSupervisorCommands, args[0]) || slices.Contains(args, "--help") || slices.Contains(args, "-h") {
		return 0, false
	}
	root := app.Env.Getenv("SWARM_ROOT")
	if root == "" {
		return 0, false
	}
	req := control.RunRequest{Args: args, Dir: app.Cwd,
		Env: sessionVars(app, "SWARM_AGENT", "SWARM_SESSION_ID", "SWARM_SESSION_SEQ", "SWARM_ROOT", "SWARM_AGENTS")}
	// Input only from a pipe or a file: a terminal, or the /dev/null the
	// tools give commands, has nothing to send.
	if f, ok := app.Stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == os.ModeNamedPipe || err == nil && fi.Mode().IsRegular() {
			if b, err := io.ReadAll(io.LimitReader(f, 1<<20)); err == nil {
				req.Stdin = b
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, viaSupervisorTimeout)
	defer cancel()
	res, err := control.Run(cctx, repo.At(root, app.Env.Getenv("SWARM_DB")), req)
	if err != nil {
		fmt.Fprintf(app.Stderr, "swarm: this session's commands go through the supervisor, which did not answer: %v; try again in a moment (the supervisor may be restarting)\n", err)
		return exitError, true
	}
	return relay(app, res), true
}

// relay prints what the supervisor's run of a command printed, and returns
// its exit code, as if the command had run here.
func relay(app *App, res control.RunResult) int {
	io.WriteString(app.Stdout, res.Stdout)
	io.WriteString(app.Stderr, res.Stderr)
	return res.Code
}

// sessionVars copies the named variables of app's environment into a run
// request: the identity the supervisor runs the command with.
func sessionVars(app *App, keys ...string) map[string]string {
	env := make(map[string]string, len(keys))
	for _, k := range keys {
		env[k] = app.Env.Getenv(k)
	}
	return env
}

// swarmCommands runs swarm commands inside the supervisor (control.OpRun)
// for its sessions, and for the operator's `swarm send` on this host: with
// the supervisor's own store, whose connections are open and warm (a fresh
// PostgreSQL connection costs tens of milliseconds before its first
// insert).
type swarmCommands struct {
	store  mailbox.Store
	target string // the database, as open.Target.String names it
}

// run runs one command: in the caller's directory, with its identity.
func (c *swarmCommands) run(ctx context.Context, req control.RunRequest) control.RunResult {
	// The operator's command names the database it would have opened; a
	// different one (another SWARM_DB_URL) is not this supervisor's to
	// write, so the caller runs the command itself.
	if req.Target != "" && req.Target != c.target {
		return control.RunResult{Declined: true}
	}
	var stdout, stderr bytes.Buffer
	app := &App{
		Stdin:     bytes.NewReader(req.Stdin),
		Stdout:    &stdout,
		Stderr:    &stderr,
		Env:       overlayEnv{set: req.Env, drop: swarm.ViaSupervisorEnv},
		Cwd:       req.Dir,
		inProcess: true,
		shared:    c.store,
	}
	code := run(ctx, app, req.Args)
	return control.RunResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// operatorSend hands the operator's `swarm send` to this host's running
// supervisor when the swarm's database is PostgreSQL: it stores the mail
// through its warm connections and wakes the recipient at once, wherever
// it runs. It reports false, having done nothing, when there is no such
// supervisor (or it declines); then the command runs here as usual.
func operatorSend(ctx context.Context, app *App, args []string) (int, bool) {
	if len(args) == 0 || args[0] != "send" || slices.ContainsFunc(args, func(a string) bool {
		return a == "--help" || a == "-h" || a == "--dir" || strings.HasPrefix(a, "--dir=")
	}) {
		return 0, false
	}
	l, err := app.layout()
	if err != nil {
		return 0, false
	}
	cfg, err := config.Load(l.Config, l.Root)
	if err != nil {
		return 0, false // the command itself says what is wrong
	}
	t := app.storeTarget(l, cfg)
	if t.Backend() != "postgres" {
		return 0, false
	}
	req := control.RunRequest{Args: args, Dir: app.Cwd, Target: t.String(),
		Env: sessionVars(app, "SWARM_AGENT", "SWARM_SESSION_ID", "SWARM_SESSION_SEQ", "SWARM_ROOT")}
	if slices.Contains(args, "-") {
		b, err := io.ReadAll(io.LimitReader(app.Stdin, message.MaxBody+1))
		if err != nil {
			return 0, false
		}
		req.Stdin = b
		app.Stdin = bytes.NewReader(b) // still there if the command runs here
	}
	cctx, cancel := context.WithTimeout(ctx, viaSupervisorTimeout)
	defer cancel()
	res, err := control.Run(cctx, l, req)
	switch {
	case errors.Is(err, control.ErrNoSupervisor), errors.Is(err, control.ErrRunDeclined):
		return 0, false
	case err != nil:
		fmt.Fprintf(app.Stderr, "swarm: the supervisor took the message but did not answer: %v; check 'swarm inbox --sent' before sending it again\n", err)
		return exitError, true
	}
	return relay(app, res), true
}

// overlayEnv is the process environment with the session's variables set
// over it and one removed.
type overlayEnv struct {
	set  map[string]string
	drop string
}

func (e overlayEnv) Getenv(k string) string {
	if k == e.drop {
		return ""
	}
	if v, ok := e.set[k]; ok {
		return v
	}
	return os.Getenv(k)
}
