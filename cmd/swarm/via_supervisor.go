package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// A session reaches the swarm only through its door (DESIGN §13.2): the
// supervisor puts the door's socket in the session's environment
// ($SWARM_DOOR), and every swarm command run there is sent through it, on
// SQLite as on PostgreSQL. The supervisor runs the command as that
// session, whatever the request says, with its own store, and the answer
// is printed as the command would have printed it, with its exit code. A
// session never opens the database.

// localCommands run in the session's own process: they reach no swarm
// state (swarm mcp is the MCP server whose tools come back through here).
var localCommands = []string{"version", "completion", "help", "mcp", "__complete", "__completeNoDesc"}

// operatorCommands are the operator's terminal commands: starting,
// stopping and watching the swarm, its health and its setup. A session is
// refused them where it runs, and the door refuses them too.
var operatorCommands = []string{"up", "down", "init", "watch", "doctor", "web", "reload", "logs"}

// doorTimeout bounds one command run through a door.
const doorTimeout = 2 * time.Minute

// forwarded reports whether app runs inside a session, and if so sends
// the command to the session's door and returns its exit code.
func forwarded(ctx context.Context, app *App, args []string) (int, bool) {
	if app.inProcess {
		return 0, false
	}
	door := app.Env.Getenv(control.DoorEnv)
	if door == "" {
		return operatorSend(ctx, app, args)
	}
	name := commandName(args)
	if slices.Contains(localCommands, name) || slices.Contains(args, "--help") || slices.Contains(args, "-h") {
		return 0, false
	}
	if slices.Contains(operatorCommands, name) {
		fmt.Fprintf(app.Stderr, "swarm: 'swarm %s' is the operator's, and this runs inside an agent's session; ask the operator instead: swarm escalate \"<what you need>\"\n", name)
		return exitError, true
	}
	req := control.RunRequest{Args: args, Dir: app.Cwd}
	// Input only from a pipe or a file: a terminal, or the /dev/null the
	// tools give commands, has nothing to send.
	if f, ok := app.Stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == os.ModeNamedPipe || err == nil && fi.Mode().IsRegular() {
			if b, err := io.ReadAll(io.LimitReader(f, 1<<20)); err == nil {
				req.Stdin = b
			}
		}
	} else if app.Stdin != nil {
		if b, err := io.ReadAll(io.LimitReader(app.Stdin, 1<<20)); err == nil {
			req.Stdin = b
		}
	}
	cctx, cancel := context.WithTimeout(ctx, doorTimeout)
	defer cancel()
	res, err := control.RunAt(cctx, door, req)
	if err != nil {
		if errors.Is(err, control.ErrNoSupervisor) {
			fmt.Fprintf(app.Stderr, "swarm: this session's door (%s) is closed: the session has ended, or the supervisor stopped; nothing was done\n", door)
			return exitError, true
		}
		fmt.Fprintf(app.Stderr, "swarm: this session's commands go through its door, and the supervisor refused or did not answer: %v\n", err)
		return exitError, true
	}
	return relay(app, res), true
}

// commandName is the subcommand args name: the first argument that is not
// a flag (the global flags before it take no value but --dir's).
func commandName(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--dir":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// relay prints what the supervisor's run of a command printed, and returns
// its exit code, as if the command had run here.
func relay(app *App, res control.RunResult) int {
	io.WriteString(app.Stdout, res.Stdout)
	io.WriteString(app.Stderr, res.Stderr)
	return res.Code
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
	if caller.IsSession() && slices.Contains(operatorCommands, commandName(req.Args)) {
		err := caller.OperatorOnly("'swarm " + commandName(req.Args) + "'")
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

// operatorSend hands the operator's `swarm send` to this host's running
// supervisor, through the operator's socket: it stores the mail with its
// open, warm store and wakes the recipient at once, wherever it runs. So
// the command's process neither opens nor migrates the database (on
// SQLite a fresh open costs more than the send), and on PostgreSQL it
// needs no connection of its own. It reports false, having done nothing,
// when there is no such supervisor (or it declines: another database);
// then the command runs here as usual.
func operatorSend(ctx context.Context, app *App, args []string) (int, bool) {
	if commandName(args) != "send" || slices.ContainsFunc(args, func(a string) bool {
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
	if t.URL == "" {
		// A file deleted under the supervisor: the command, run here,
		// says so and stores nothing (a stat, not an open).
		if _, err := os.Stat(t.Path); err != nil {
			return 0, false
		}
	}
	req := control.RunRequest{Args: args, Dir: app.Cwd, Target: t.String()}
	if slices.Contains(args, "-") {
		b, err := io.ReadAll(io.LimitReader(app.Stdin, message.MaxBody+1))
		if err != nil {
			return 0, false
		}
		req.Stdin = b
		app.Stdin = bytes.NewReader(b) // still there if the command runs here
	}
	cctx, cancel := context.WithTimeout(ctx, doorTimeout)
	defer cancel()
	res, err := control.Run(cctx, l, req)
	var refused *control.RunRefused
	switch {
	case errors.Is(err, control.ErrNoSupervisor), errors.Is(err, control.ErrRunDeclined), errors.As(err, &refused):
		// Nothing was done (a busy supervisor at its connection cap says
		// so): the command runs here, as with no supervisor.
		return 0, false
	case err != nil:
		fmt.Fprintf(app.Stderr, "swarm: the supervisor took the message but did not answer: %v; check 'swarm inbox --sent' before sending it again\n", err)
		return exitError, true
	}
	return relay(app, res), true
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
