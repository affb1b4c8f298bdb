//go:build !linux

package main

// hardenSupervisor has nothing to do where /proc/<pid>/environ does not
// exist.
func hardenSupervisor() error { return nil }
