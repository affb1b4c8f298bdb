//go:build !linux

package proc

// StartTime needs /proc: without it, ok is false.
func StartTime(pid int) (uint64, bool) { return 0, false }

// Exited reports whether process pid has ended; without /proc a zombie
// still counts as alive.
func Exited(pid int) bool { return !Alive(pid) }
