package main

import "golang.org/x/sys/unix"

// hardenSupervisor makes the supervisor non-dumpable: other processes of
// the same user, such as a command an agent runs, can then no longer read
// its environment (and the API keys in it) from /proc/<pid>/environ, or
// ptrace it. Root still can. Children get their own dumpable state at exec.
func hardenSupervisor() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
