//go:build !linux

package proc

// StartTime needs /proc: without it, ok is false.
func StartTime(pid int) (uint64, bool) { return 0, false }

// Running needs /proc to tell the process from one that reused its pid:
// without it, false.
func Running(pid int, start uint64) bool { return false }

// Exited reports whether process pid has ended; without /proc a zombie
// still counts as alive.
func Exited(pid int) bool { return !Alive(pid) }
