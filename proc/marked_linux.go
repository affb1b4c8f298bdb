package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const prSetChildSubreaper = 36

// BecomeSubreaper makes this process a child subreaper: the orphans of its
// descendants (a process whose parent exited, one that double-forked or
// called setsid and was left behind) are reparented to it instead of to
// init, so they stay its descendants, and ReapOrphans can reap them.
func BecomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// ReapWhile reaps orphans (ReapOrphans) each time a child exits
// (SIGCHLD) until ctx ends: a subreaper's orphans would otherwise stay
// zombies, and a zombie keeps its process group alive to kill(2).
func ReapWhile(ctx context.Context) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(c)
		reapLoop(ctx, c, func() { ReapOrphans() }, time.After)
	}()
}

// reapEvery spaces the passes of reapLoop: a pass reads the stat of every
// child, and 500 agents' sessions starting made thousands of SIGCHLDs (a
// git per step), so a pass per signal was quadratic in the agents. An
// orphan waits at most this long to be reaped.
const reapEvery = 50 * time.Millisecond

// reapLoop runs reap once, then once per signal on sigs, at most once per
// reapEvery: the signals that come in between coalesce into one pass.
func reapLoop(ctx context.Context, sigs <-chan os.Signal, reap func(), after func(time.Duration) <-chan time.Time) {
	reap()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		}
		reap()
		select {
		case <-ctx.Done():
			return
		case <-after(reapEvery):
		}
	}
}

// procStat is what KillMarked and ReapOrphans read of /proc/<pid>/stat.
type procStat struct {
	state           string
	ppid, pgid, sid int
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: the fields
	// after it start at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	sid, _ := strconv.Atoi(f[3])
	return procStat{state: f[0], ppid: ppid, pgid: pgid, sid: sid}, true
}

// hasMarkers reports whether pid's environment (as it was at exec) holds
// every one of markers exactly.
func hasMarkers(pid int, markers [][]byte) bool {
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	found := 0
	for _, kv := range bytes.Split(env, []byte{0}) {
		for _, m := range markers {
			if bytes.Equal(kv, m) {
				found++
			}
		}
	}
	return found >= len(markers)
}

// Marked lists the live processes (not zombies) whose environment holds
// every one of markers (KEY=VALUE), this process excepted. known is false
// when /proc cannot be read.
func Marked(markers ...string) (pids []int, known bool) {
	if len(markers) == 0 {
		return nil, true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	want := make([][]byte, len(markers))
	for i, m := range markers {
		want[i] = []byte(m)
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if st, ok := readStat(pid); !ok || st.state == "Z" {
			continue
		}
		if hasMarkers(pid, want) {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// KillMarked sends SIGKILL to every process whose environment holds all
// of markers: every process a session started carries
// SWARM_SESSION_ID=<id> and SWARM_ROOT=<root> (the id alone repeats across
// repositories), including those that left its process group with setsid
// or by double-forking, which a group kill misses. It returns the pids it
// signalled.
func KillMarked(markers ...string) []int {
	pids, _ := Marked(markers...)
	var sent []int
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil || errors.Is(err, syscall.EPERM) {
			sent = append(sent, pid)
		}
	}
	return sent
}

// children lists this process's children, from every thread's
// /proc/self/task/<tid>/children (orphans are reparented to any thread of
// a subreaper), falling back to a scan of /proc.
func children() []int {
	self := os.Getpid()
	tasks, err := os.ReadDir("/proc/self/task")
	var out []int
	if err == nil {
		ok := false
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
			if err != nil {
				continue
			}
			ok = true
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					out = append(out, pid)
				}
			}
		}
		if ok {
			return out
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// ReapOrphans reaps the zombie children of this process that it did not
// start itself: orphans reparented to it as a subreaper. Nobody else will:
// os/exec waits only for the processes it started. Those are told apart
// without a registry: every child swarm starts stays in this process's
// session, and leads its own process group (Configure) or stays in this
// process's; an orphan either left the session (setsid) or belongs to a
// group it does not lead (the dead leader's). It returns how many it
// reaped.
func ReapOrphans() int {
	self, _ := readStat(os.Getpid())
	n := 0
	for _, pid := range children() {
		st, ok := readStat(pid)
		if !ok || st.state != "Z" {
			continue
		}
		orphan := st.sid != self.sid || (st.pgid != pid && st.pgid != self.pgid)
		if !orphan {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// AwaitGone waits until none of pids is running (zombies count as gone),
// checking every poll, for at most max; it reports whether they went.
func AwaitGone(pids []int, poll, max time.Duration, sleep func(time.Duration)) bool {
	for waited := time.Duration(0); ; waited += poll {
		alive := false
		for _, pid := range pids {
			if st, ok := readStat(pid); ok && st.state != "Z" {
				alive = true
				break
			}
		}
		if !alive {
			return true
		}
		if waited >= max {
			return false
		}
		sleep(poll)
	}
}
