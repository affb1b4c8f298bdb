package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// groupRunning reports whether a process of group pgid exists that is not
// a zombie (a dead process its parent has not reaped). known is false
// when /proc cannot be read.
func groupRunning(pgid int) (known, running bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := statFields(pid); ok && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return true, true
		}
	}
	return true, false
}

// groupHas reports whether a process of group pgid has marker (KEY=VALUE)
// in its environment. It reads /proc: the group's processes are the ones
// whose stat names pgid as their process group.
func groupHas(pgid int, marker string) (known, has bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	want := []byte(marker)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses: the fields
		// after it start at the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		// f[0] state, f[1] ppid, f[2] pgrp.
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				return true, true
			}
		}
	}
	return true, false
}
