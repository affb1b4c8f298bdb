// Command swarmd is swarm's whole program: the supervisor, the engines,
// the stores and every command. Users and sessions type swarm, the front
// (cmd/swarm), which answers what needs only a running supervisor's socket
// and hands everything else to swarmd; swarmd run directly behaves the same.
//
// Exit codes: 0 success, 1 a runtime error, 2 a usage error (bad flags or
// arguments). Errors go to stderr as one line saying what went wrong and what
// to do, in text and --json mode alike.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/termsafe"
)

// Exit codes, documented in `swarm --help`.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() { os.Exit(Main()) }

// Main runs the CLI with the process's arguments and streams. It is the
// entry point of the testscript tests too.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "swarm: cannot read the working directory:", err)
		return exitError
	}
	app := &App{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Env:    repo.OSEnv{},
		Cwd:    cwd,
	}
	return run(ctx, app, os.Args[1:])
}

func run(ctx context.Context, app *App, args []string) int {
	if code, ok := forwarded(ctx, app, args); ok {
		return code
	}
	return execute(ctx, app, newRootCmd(app), args)
}

// execute runs root with args and returns the exit code; the flag tests
// run a root of one command through it.
func execute(ctx context.Context, app *App, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	root.SetIn(app.Stdin)
	root.SetOut(app.Stdout)
	root.SetErr(app.Stderr)
	err := root.ExecuteContext(ctx)
	app.flushOutput()
	err = app.explainDamage(err)
	if err == nil {
		return exitOK
	}
	// cobra reports these mistakes in the command line as plain errors.
	for _, prefix := range []string{"unknown command ", "if any flags in the group ", "required flag"} {
		if strings.HasPrefix(err.Error(), prefix) {
			err = &usageError{err: err, help: "swarm"}
			break
		}
	}
	return report(app.Stderr, err)
}

// report prints err as one line and returns the exit code. An error may
// quote what swarm did not write (a CLI's stderr, git's output), so it
// reaches the terminal through termsafe.
func report(out io.Writer, err error) int {
	var b strings.Builder
	code := reportTo(&b, err)
	io.WriteString(out, termsafe.String(b.String()))
	return code
}

func reportTo(w io.Writer, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "swarm: %v\n", ue.err)
		if ue.help != "" {
			fmt.Fprintf(w, "Run '%s --help' for usage.\n", ue.help)
		}
		return exitUsage
	}
	var ce *codeError
	if errors.As(err, &ce) {
		if ce.err != nil {
			fmt.Fprintf(w, "swarm: %v\n", ce.err)
		}
		return ce.code
	}
	// Several problems (a swarm.toml with more than one mistake) come one
	// per line, each prefixed like the first.
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "swarm: %s\n", line)
	}
	return exitError
}

// usageError is a mistake in the command line: exit 2.
type usageError struct {
	err  error
	help string // the command path to suggest --help for
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// codeError carries a specific exit code; a nil err prints nothing (the
// command already reported).
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *codeError) Unwrap() error { return e.err }
