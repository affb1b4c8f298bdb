package main

import (
	"bytes"
	"context"
	"os"
	"strconv"

	"github.com/swarmhq/swarm/internal/front"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
)

// A session reaches the swarm only through its door (DESIGN §13.2): the
// supervisor puts the door's socket in the session's environment
// ($SWARM_DOOR), and every swarm command run there is sent through it, on
// SQLite as on PostgreSQL. The supervisor runs the command as that
// session, whatever the request says, with its own store, and the answer
// is printed as the command would have printed it, with its exit code. A
// session never opens the database.

// forwarded reports whether app's command is one the front answers (see
// internal/front): in a session, through its door; the operator's send,
// through this host's running supervisor. swarmd asks too, for when it is
// run directly rather than through the swarm front.
func forwarded(ctx context.Context, app *App, args []string) (int, bool) {
	if app.inProcess {
		return 0, false
	}
	c := &front.Call{Args: args, Stdin: app.Stdin, Stdout: app.Stdout, Stderr: app.Stderr, Env: app.Env, Cwd: app.Cwd}
	code, ok := front.Answer(ctx, c)
	app.Stdin = c.Stdin // what the front read, if it read anything
	return code, ok
}

// swarmCommands runs swarm commands inside the supervisor (control.OpRun)
// for its sessions, through their doors, and for the operator's `swarm
// send` on this host: with the supervisor's own store, whose connections
// are open and warm (a fresh PostgreSQL connection costs tens of
// milliseconds before its first insert, and opening SQLite more than the
// send itself).
type swarmCommands struct {
	store  mailbox.Store
	target string // the database, as open.Target.String names it
	root   string // the repository
}

// run runs one command as caller, in the caller's directory. A session's
// command sees the session's variables as the door established them,
// whatever its request said.
func (c *swarmCommands) run(ctx context.Context, caller identity.Caller, req control.RunRequest) control.RunResult {
	// The operator's command names the database it would have opened; a
	// different one (another SWARM_DB_URL) is not this supervisor's to
	// write, so the caller runs the command itself.
	if req.Target != "" && req.Target != c.target {
		return control.RunResult{Declined: true}
	}
	if caller.IsSession() && front.IsOperatorCommand(front.CommandName(req.Args)) {
		err := caller.OperatorOnly("'swarm " + front.CommandName(req.Args) + "'")
		return control.RunResult{Stderr: "swarm: " + err.Error() + "\n", Code: exitError}
	}
	var stdout, stderr bytes.Buffer
	app := c.app(caller, req.Dir, req.Stdin, &stdout, &stderr)
	code := run(ctx, app, req.Args)
	return control.RunResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// app is the App of one command or verb run as caller in dir: the
// session's variables as the door established them, whatever the request
// said, and the supervisor's own store.
func (c *swarmCommands) app(caller identity.Caller, dir string, stdin []byte, stdout, stderr *bytes.Buffer) *App {
	env := overlayEnv{set: map[string]string{}, drop: map[string]bool{"SWARM_DB_URL": true, control.DoorEnv: true}}
	for _, k := range []string{"SWARM_AGENT", "SWARM_SESSION_ID", "SWARM_SESSION_SEQ"} {
		env.drop[k] = true
	}
	if caller.IsSession() {
		env.set["SWARM_AGENT"] = caller.Agent()
		env.set["SWARM_SESSION_ID"] = caller.SessionID()
		env.set["SWARM_SESSION_SEQ"] = strconv.FormatInt(caller.Seq(), 10)
		env.set["BD_ACTOR"] = caller.Agent()
	}
	env.set["SWARM_ROOT"] = c.root
	return &App{
		Stdin:     bytes.NewReader(stdin),
		Stdout:    stdout,
		Stderr:    stderr,
		Env:       env,
		Cwd:       dir,
		inProcess: true,
		shared:    c.store,
		caller:    &caller,
	}
}

// overlayEnv is the process environment with the caller's variables set
// over it and others removed.
type overlayEnv struct {
	set  map[string]string
	drop map[string]bool
}

func (e overlayEnv) Getenv(k string) string {
	if v, ok := e.set[k]; ok {
		return v
	}
	if e.drop[k] {
		return ""
	}
	if v, ok := e.set[k]; ok {
		return v
	}
	return os.Getenv(k)
}
