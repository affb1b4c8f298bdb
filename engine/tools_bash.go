package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/swarmhq/swarm/proc"
	contain "github.com/swarmhq/swarm/sandbox"
)

// osEnviron is the base environment when a session has none of its own.
var osEnviron = os.Environ

// errBashTimeout is the cause of a bash call's own timeout, so it can be
// told from the session ending.
var errBashTimeout = errors.New("bash tool timeout")

// shell is bash when installed (the tool is called bash), else sh.
var shell = sync.OnceValue(func() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
})

// bashGrace is how long a cancelled command gets between SIGTERM and
// SIGKILL. It is short on purpose: a cancelled session must return
// promptly, and the supervisor's own interrupt_grace covers the session as
// a whole.
func (tb *toolbox) bashGrace() time.Duration {
	if g := tb.s.Grace; g > 0 && g < proc.DefaultGrace {
		return g
	}
	return proc.DefaultGrace
}

func (tb *toolbox) bash(ctx context.Context, a bashArgs) (string, error) {
	tctx, cancel := context.WithTimeoutCause(ctx, a.Timeout, errBashTimeout)
	defer cancel()
	argv := []string{shell(), "-c", a.Command}
	if box := tb.s.Sandbox; box != nil {
		var err error
		if argv, err = box.Command(argv, contain.Extra{Dir: tb.sb.raw}); err != nil {
			return "", err
		}
	}
	cmd := exec.CommandContext(tctx, argv[0], argv[1:]...)
	proc.Configure(cmd, tb.bashGrace())
	tb.s.Sandbox.Attach(cmd) // nil-safe: no sandbox, nothing to attach
	cmd.Dir = tb.sb.raw
	cmd.Env = tb.env
	out := newHeadTail(MaxToolOutput)
	// One writer for both streams: exec then uses a single pipe, so the
	// two interleave as they would on a terminal.
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("could not start %s: %v", shell(), err)
	}
	pgid := cmd.Process.Pid
	if tb.s.OnProcess != nil {
		tb.s.OnProcess(pgid)
	}
	err := cmd.Wait()
	// Nothing the command started outlives the call: background jobs
	// would escape the session's control and recovery.
	_ = proc.KillGroup(pgid)

	if ctx.Err() != nil {
		return out.String(), errCancelled
	}
	text := out.String()
	if text == "" {
		text = "(no output)\n"
	} else if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if tctx.Err() != nil {
		return text, fmt.Errorf("command timed out after %s and was killed with its whole process group; pass a larger timeout_seconds (at most %d) or run something shorter", a.Timeout, int(MaxBashTimeout/time.Second))
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: the command exited but a background process it
		// left held the output open; that process has been killed.
	case errors.As(err, &ee):
	default:
		return text, fmt.Errorf("running the command failed: %v", err)
	}
	st := cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return text + fmt.Sprintf("[killed by signal %s]\n", ws.Signal()), nil
	}
	return text + fmt.Sprintf("[exit status %d]\n", st.ExitCode()), nil
}

// headTail keeps the first and the last bytes written to it, up to limit
// in all, and counts what it dropped in between. Build and test output
// puts its summary at the end and its first error near the start, so both
// ends matter.
type headTail struct {
	mu      sync.Mutex
	limit   int
	head    []byte
	tail    []byte
	dropped int64
}

func newHeadTail(limit int) *headTail { return &headTail{limit: limit} }

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	half := h.limit / 2
	if room := half - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	h.tail = append(h.tail, p...)
	// Trim lazily, so the copying is amortised over many writes.
	if keep := h.limit - half; len(h.tail) > 2*keep {
		cut := len(h.tail) - keep
		h.dropped += int64(cut)
		h.tail = append(h.tail[:0], h.tail[cut:]...)
	}
	return n, nil
}

func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keep := h.limit - h.limit/2
	tail, dropped := h.tail, h.dropped
	if dropped == 0 && len(h.head)+len(tail) <= h.limit {
		return string(h.head) + string(tail)
	}
	if len(tail) > keep {
		dropped += int64(len(tail) - keep)
		tail = tail[len(tail)-keep:]
	}
	// Do not show half a character at either side of the cut.
	head := trimPartialRune(h.head)
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s\n[... %d bytes omitted: output is capped at %d KiB, keeping the head and the tail ...]\n%s", head, dropped, h.limit>>10, tail)
}

// trimPartialRune drops an incomplete UTF-8 sequence from the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
