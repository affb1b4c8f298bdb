// Package front is what runs first when someone types swarm: the answers
// that need nothing but a running supervisor's socket. A session's
// commands go through its door (DESIGN §13.2), the operator's `swarm send`
// goes to this host's supervisor, and `swarm version` prints a line; the
// supervisor does the work with its own warm store. Everything else is
// handed to swarmd, the whole program.
//
// It is a package of its own because every process pays the initialisers
// of everything its binary links, before main: the swarm front links this
// package, control, repo and a TOML reader, and starts in under 2 ms and
// 4 MiB, where swarmd, with the engines, the stores and git, takes 6–7 ms
// and 23 MiB before main. internal/deptest keeps the front that small. swarmd
// calls the same functions when it is run directly, so a command behaves
// the same through either binary.
package front

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

	"github.com/pelletier/go-toml/v2"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox/dburl"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/repo"
)

// Call is one command line and the streams and environment it runs with.
type Call struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    repo.Env
	Cwd    string

	// StdinRead is set when Answer read stdin and then did not answer:
	// Stdin now holds what it read, and whoever runs the command next
	// must be given that instead of the process's own stdin.
	StdinRead bool
}

// localCommands run in the session's own process: they reach no swarm
// state (swarm mcp is the MCP server whose tools come back through the
// door).
var localCommands = []string{"version", "completion", "help", "mcp", "__complete", "__completeNoDesc"}

// operatorCommands are the operator's terminal commands: starting,
// stopping and watching the swarm, its health and its setup. A session is
// refused them where it runs, and the door refuses them too.
var operatorCommands = []string{"up", "down", "init", "watch", "doctor", "web", "reload", "logs"}

// IsOperatorCommand reports whether name is one of the operator's terminal
// commands, which no session may run.
func IsOperatorCommand(name string) bool { return slices.Contains(operatorCommands, name) }

// Timeout bounds one command run through a socket.
const Timeout = 2 * time.Minute

// Answer runs c here when the front can: in a session, through the
// session's door; the operator's `swarm send`, through this host's
// running supervisor. It reports false when the command must run in the
// whole program; it has then done nothing but, perhaps, read stdin (see
// Call.StdinRead).
func Answer(ctx context.Context, c *Call) (int, bool) {
	if door := c.Env.Getenv(control.DoorEnv); door != "" {
		return throughDoor(ctx, c, door)
	}
	return operatorSend(ctx, c)
}

// throughDoor sends a session's command to its door: the supervisor runs
// it as that session, whatever the request says, with its own store, and
// the answer is printed as the command would have printed it, with its
// exit code. A session never opens the database.
func throughDoor(ctx context.Context, c *Call, door string) (int, bool) {
	name := CommandName(c.Args)
	if slices.Contains(localCommands, name) || slices.Contains(c.Args, "--help") || slices.Contains(c.Args, "-h") {
		return 0, false
	}
	if IsOperatorCommand(name) {
		fmt.Fprintf(c.Stderr, "swarm: 'swarm %s' is the operator's, and this runs inside an agent's session; ask the operator instead: swarm escalate \"<what you need>\"\n", name)
		return 1, true
	}
	req := control.RunRequest{Args: c.Args, Dir: c.Cwd, Stdin: sessionInput(c.Stdin)}
	cctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	res, err := control.RunAt(cctx, door, req)
	if err != nil {
		if errors.Is(err, control.ErrNoSupervisor) {
			fmt.Fprintf(c.Stderr, "swarm: this session's door (%s) is closed: the session has ended, or the supervisor stopped; nothing was done\n", door)
			return 1, true
		}
		fmt.Fprintf(c.Stderr, "swarm: this session's commands go through its door, and the supervisor refused or did not answer: %v\n", err)
		return 1, true
	}
	return relay(c, res), true
}

// sessionInput is what a session's command sends as its stdin: up to
// 1 MiB from a pipe or a file. A terminal, or the /dev/null the tools give
// commands, has nothing to send.
func sessionInput(r io.Reader) []byte {
	if r == nil {
		return nil
	}
	if f, ok := r.(*os.File); ok {
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() && fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != os.ModeNamedPipe {
			return nil
		}
	}
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil
	}
	return b
}

// operatorSend hands the operator's `swarm send` to this host's running
// supervisor, through the operator's socket: it stores the mail with its
// open, warm store and wakes the recipient at once, wherever it runs. So
// the command's process neither opens nor migrates the database (on
// SQLite a fresh open costs more than the send), and on PostgreSQL it
// needs no connection of its own. It reports false, having done nothing,
// when there is no such supervisor (or it declines: another database);
// then the command runs in the whole program as usual.
func operatorSend(ctx context.Context, c *Call) (int, bool) {
	if CommandName(c.Args) != "send" || slices.ContainsFunc(c.Args, func(a string) bool {
		return a == "--help" || a == "-h" || a == "--dir" || strings.HasPrefix(a, "--dir=")
	}) {
		return 0, false
	}
	l, err := repo.Find("", c.Cwd, c.Env)
	if err != nil {
		return 0, false
	}
	configured, ok := configuredURL(l.Config)
	if !ok {
		return 0, false // the command itself says what is wrong
	}
	url := dburl.Choose(c.Env.Getenv, configured)
	if url == "" {
		// A file deleted under the supervisor: the command, run in the
		// whole program, says so and stores nothing (a stat, not an open).
		if _, err := os.Stat(l.DB); err != nil {
			return 0, false
		}
	}
	req := control.RunRequest{Args: c.Args, Dir: c.Cwd, Target: dburl.Name(url, l.DB)}
	if slices.Contains(c.Args, "-") {
		b, err := io.ReadAll(io.LimitReader(c.Stdin, message.MaxBody+1))
		if err != nil {
			return 0, false
		}
		req.Stdin = b
		// Still there if the command runs in the whole program.
		c.Stdin, c.StdinRead = bytes.NewReader(b), true
	}
	cctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	res, err := control.Run(cctx, l, req)
	var refused *control.RunRefused
	switch {
	case errors.Is(err, control.ErrNoSupervisor), errors.Is(err, control.ErrRunDeclined), errors.As(err, &refused):
		// Nothing was done (a busy supervisor at its connection cap says
		// so): the command runs in the whole program, as with no
		// supervisor.
		return 0, false
	case err != nil:
		fmt.Fprintf(c.Stderr, "swarm: the supervisor took the message but did not answer: %v; check 'swarm inbox --sent' before sending it again\n", err)
		return 1, true
	}
	return relay(c, res), true
}

// configuredURL is swarm.toml's [mailbox] url, read without the rest of
// package config (whose validation the supervisor's run of the command
// does anyway, and whose dependencies would double the front's start-up).
// ok is false when the file is missing or is not TOML: then the whole
// program runs the command and says what is wrong. A URL that config
// would refuse names a database the supervisor does not have, so it
// declines, and the whole program says that too.
func configuredURL(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	var cfg struct {
		Mailbox struct {
			URL string `toml:"url"`
		} `toml:"mailbox"`
	}
	if err := toml.Unmarshal(b, &cfg); err != nil {
		return "", false
	}
	return cfg.Mailbox.URL, true
}

// CommandName is the subcommand args name: the first argument that is not
// a flag (the global flags before it take no value but --dir's).
func CommandName(args []string) string {
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

// relay prints what the supervisor's run of a command printed, and
// returns its exit code, as if the command had run here.
func relay(c *Call, res control.RunResult) int {
	io.WriteString(c.Stdout, res.Stdout)
	io.WriteString(c.Stderr, res.Stderr)
	return res.Code
}
