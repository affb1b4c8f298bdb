package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/swarmhq/swarm/internal/front"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/proc"
)

// swarmToolTimeout bounds one swarm or bd command run by the swarm tool.
const swarmToolTimeout = 2 * time.Minute

// executable is the running binary, for the swarm tool (a variable for
// tests).
var executable = os.Executable

// swarm runs one swarm or bd command line from an argv list: no shell,
// and only a line the session's capability vector allows (mode.Vector.
// Match). The swarm binary is this process's own executable (or
// Session.SwarmBin), run in the worktree with the session environment, so
// the command's own capability check sees the same session.
func (tb *toolbox) swarm(ctx context.Context, a swarmArgs) (string, error) {
	beads := tb.s.Tasks != nil
	if _, err := tb.s.Vector().Match(a.Argv, beads); err != nil {
		return "", err
	}
	bin := a.Argv[0]
	switch bin {
	case "swarm":
		bin = tb.s.SwarmBin
		if bin == "" {
			exe, err := executable()
			if err != nil {
				return "", fmt.Errorf("cannot find the swarm binary: %v", err)
			}
			bin = front.Beside(exe)
		}
	case "bd":
		p, err := exec.LookPath("bd")
		if err != nil {
			return "", errors.New("bd is not installed (not on PATH)")
		}
		bin = p
	}
	tctx, cancel := context.WithTimeoutCause(ctx, swarmToolTimeout, errBashTimeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, bin, a.Argv[1:]...)
	proc.Configure(cmd, tb.bashGrace())
	cmd.Dir = tb.sb.raw
	cmd.Env = tb.env
	out := newHeadTail(MaxToolOutput)
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), errCancelled
	}
	text := out.String()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	var ee *exec.ExitError
	switch {
	case tctx.Err() != nil:
		return text, fmt.Errorf("%s timed out after %s and was killed", strings.Join(a.Argv, " "), swarmToolTimeout)
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		if text == "" {
			text = "(no output)\n"
		}
		return text + "[exit status 0]\n", nil
	case errors.As(err, &ee):
		return text, fmt.Errorf("%s failed (exit status %d)", strings.Join(a.Argv, " "), ee.ExitCode())
	}
	return text, fmt.Errorf("could not run %s: %v", a.Argv[0], err)
}

func enabledNames(v mode.Vector) string {
	var out []string
	for _, c := range v.Enabled() {
		out = append(out, string(c))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
