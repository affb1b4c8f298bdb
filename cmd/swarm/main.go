// Command swarm is swarm's front: the command users and agents' sessions
// type. It answers what needs only a running supervisor's socket itself
// (a session's commands through its door, the operator's `swarm send`,
// `swarm version`) and hands every other command, unchanged, to swarmd,
// the whole program installed beside it (see internal/front for why there
// are two binaries). Exit codes are swarmd's: 0 success, 1 a runtime
// error, 2 a usage error.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/swarmhq/swarm/internal/front"
	"github.com/swarmhq/swarm/repo"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() { os.Exit(run()) }

func run() int {
	args := os.Args[1:]
	if front.IsVersion(args) {
		io.WriteString(os.Stdout, front.VersionLine(version))
		return 0
	}
	cwd, err := os.Getwd()
	if err != nil {
		return handOff(&front.Call{Args: args}) // swarmd says what is wrong
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	c := &front.Call{Args: args, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Env: repo.OSEnv{}, Cwd: cwd}
	code, ok := front.Answer(ctx, c)
	stop()
	if ok {
		return code
	}
	return handOff(c)
}

// handOff runs c in swarmd, in this process's place where the system
// allows it, and returns an exit code only when that failed.
func handOff(c *front.Call) int {
	bin, err := front.FindProgram()
	if err != nil {
		fmt.Fprintln(os.Stderr, "swarm:", err)
		return 1
	}
	if c.StdinRead {
		if err := restoreStdin(c.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "swarm: cannot pass the message read from stdin on to "+front.Program+":", err, "; nothing was sent")
			return 1
		}
	}
	return execProgram(bin, c.Args)
}
