// Package sandbox decides and builds the containment of a session's
// processes (DESIGN §13.3): whether bubblewrap is in force ([sandbox] mode
// and a probe of the installed bwrap), and the bwrap command line that
// wraps each process a session starts, so that it runs in its own mount
// and PID namespaces:
//
//   - / read-only, a private /tmp (one directory per session, so files
//     outlive one bash call but not the session), /dev, /proc, the network
//     kept;
//   - writable: the agent's worktree; what git needs to commit on the
//     agent's own branch (the objects, the worktree's admin directory
//     .git/worktrees/<name>, the branch's ref directory and its reflogs);
//     and, for CLI agents, per-session copies of their state directories
//     in the home directory (~/.claude, ~/.codex, ~/.gemini), with the
//     login and settings files bound read-only into them;
//   - hidden (an empty tmpfs): .swarm/ (database, operator socket, journal,
//     other sessions' logs), except the session's own door, bound back at
//     its path;
//   - read-only: the operator's checkout, .git/hooks and .git/config.
//
// --unshare-pid makes the wrapped process the namespace's first child, so
// when it ends (or bwrap is killed, or its parent dies: --die-with-parent)
// every process of the namespace ends, including those that called setsid
// or double-forked. --new-session keeps them off the supervisor's
// terminal.
//
// Paths under /tmp that a session needs to run anything (the repository
// when it lives there, $HOME, the directories on $PATH, and what a caller
// passes in Extra.ReadOnly) are bound back read-only: test suites and
// `npm install --prefix /tmp/...` put programs there.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Mode is [sandbox] mode.
type Mode string

// The modes. Auto is the default: bubblewrap when installed and usable,
// else none (with a warning).
const (
	Auto  Mode = "auto"
	Bwrap Mode = "bwrap"
	None  Mode = "none"
)

// Modes lists the valid modes.
var Modes = []Mode{Auto, Bwrap, None}

// Fix is the one line that installs bubblewrap.
const Fix = "apt-get install bubblewrap"

// BwrapEnv names a variable that points at the bwrap binary to use instead
// of bwrap on PATH.
const BwrapEnv = "SWARM_BWRAP"

// Decision is the containment in force and why.
type Decision struct {
	Mode  Mode   // as configured
	Bwrap string // the bwrap binary; "" when no sandbox is in force
	Why   string // one line: what was found
}

// Contained reports whether sessions run under bubblewrap.
func (d Decision) Contained() bool { return d.Bwrap != "" }

// In is the mode in force: Bwrap or None.
func (d Decision) In() Mode {
	if d.Contained() {
		return Bwrap
	}
	return None
}

// ErrUnavailable is returned by Decide when mode = "bwrap" cannot be kept.
var ErrUnavailable = errors.New("bubblewrap is not usable")

// probeTimeout bounds the one trial run of bwrap.
const probeTimeout = 10 * time.Second

type probeResult struct {
	once sync.Once
	err  error
}

// probes caches one trial run per bwrap binary for the process's life:
// what the kernel allows does not change while swarm runs.
var probes sync.Map

// Decide decides the containment for mode m (empty means Auto). getenv
// reads the environment (BwrapEnv). With m = Bwrap and bubblewrap missing
// or failing, it returns an error wrapping ErrUnavailable that says why
// and what to do; with Auto it falls back to none, and Why says why.
func Decide(ctx context.Context, m Mode, getenv func(string) string) (Decision, error) {
	if m == "" {
		m = Auto
	}
	d := Decision{Mode: m}
	if m == None {
		d.Why = `[sandbox] mode = "none": sessions run with your rights, unconfined`
		return d, nil
	}
	path, err := find(getenv)
	if err == nil {
		err = probe(ctx, path)
	}
	if err != nil {
		d.Why = err.Error()
		if m == Bwrap {
			return d, fmt.Errorf(`%w: [sandbox] mode = "bwrap", but %v; install it (%s) and make sure user namespaces are enabled, or set [sandbox] mode = "auto"`, ErrUnavailable, err, Fix)
		}
		return d, nil
	}
	d.Bwrap = path
	d.Why = "bubblewrap " + path + " works here"
	return d, nil
}

func find(getenv func(string) string) (string, error) {
	if p := getenv(BwrapEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %v", BwrapEnv, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("bwrap is not installed (not on PATH)")
	}
	return p, nil
}

// probe runs bwrap once with the namespaces a session uses: user
// namespaces may be off (kernel.unprivileged_userns_clone = 0, or a
// container without them), and then every session would fail.
func probe(ctx context.Context, path string) error {
	v, _ := probes.LoadOrStore(path, &probeResult{})
	p := v.(*probeResult)
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--unshare-pid", "--die-with-parent", "--new-session", "--", "true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			msg := strings.TrimSpace(string(out))
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i]
			}
			if msg == "" {
				msg = err.Error()
			}
			p.err = fmt.Errorf("bwrap (%s) fails to start a sandbox: %s", path, msg)
		}
	})
	return p.err
}
