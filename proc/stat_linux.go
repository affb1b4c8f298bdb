package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// StartTime is when process pid started, in clock ticks since boot, from
// /proc/<pid>/stat: with the pid, it names one process, whatever reuses
// the pid later. ok is false when there is no such process, when it has
// ended and waits for its parent to reap it (a zombie: it runs nothing
// and holds nothing, and under a PID 1 that never reaps it stays so), or
// without /proc.
func StartTime(pid int) (start uint64, ok bool) {
	f, ok := statFields(pid)
	if !ok || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, err == nil
}

// Running reports whether the process that had pid and started at start
// still runs: not gone, not a zombie, and its pid not reused since.
func Running(pid int, start uint64) bool {
	now, ok := StartTime(pid)
	return ok && start != 0 && now == start
}

// Exited reports whether process pid has ended: gone, or a zombie.
func Exited(pid int) bool {
	if f, ok := statFields(pid); ok {
		return f[0] == "Z" || f[0] == "X"
	}
	return !Alive(pid)
}

// statFields are the fields of /proc/<pid>/stat from the third (the
// state) on; ok is false when it does not read. The command name, in
// parentheses, may hold spaces and parentheses: the fields start after
// the last ')'.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, false
	}
	return f, true
}
