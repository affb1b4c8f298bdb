// Command rusage runs a command several times and prints, as JSON, each
// run's CPU (user+sys) and peak RSS. swarmbench measures start-up through
// it because a process's peak RSS counts the memory of whoever started it:
// Go starts children with vfork, and at exec Linux records the parent's
// peak as the child's (the bench's 30 MiB). This small program's is about
// 2 MiB, well under anything it measures.
//
// Usage: rusage <runs> <dir> <command> [args...]
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

type run struct {
	CPUNanos int64 `json:"cpu_ns"`
	MaxRSSKB int64 `json:"max_rss_kb"`
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: rusage <runs> <dir> <command> [args...]")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "rusage: runs must be a positive number")
		os.Exit(2)
	}
	var out []run
	for range n {
		cmd := exec.Command(os.Args[3], os.Args[4:]...)
		cmd.Dir = os.Args[2]
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "rusage: %v: %v: %s\n", os.Args[3:], err, b)
			os.Exit(1)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		out = append(out, run{CPUNanos: ru.Utime.Nano() + ru.Stime.Nano(), MaxRSSKB: ru.Maxrss})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
