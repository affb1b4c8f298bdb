package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// execProgram replaces this process with bin: swarmd keeps the pid, the
// terminal, the signals and the streams, as if it had been run itself.
func execProgram(bin string, args []string) int {
	err := syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "swarm: run %s: %v\n", bin, err)
	return 1
}

// restoreStdin puts what the front read from stdin back as swarmd's
// stdin: an unlinked temporary file holding it, at its start.
func restoreStdin(r io.Reader) error {
	f, err := os.CreateTemp("", "swarm-stdin-")
	if err != nil {
		return err
	}
	defer f.Close()
	os.Remove(f.Name())
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return unix.Dup2(int(f.Fd()), 0)
}
