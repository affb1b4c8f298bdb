//go:build !linux

package proc

// groupHas cannot look into other processes' environments without /proc.
func groupHas(pgid int, marker string) (known, has bool) { return false, false }

// groupRunning cannot tell zombies apart without /proc.
func groupRunning(pgid int) (known, running bool) { return false, false }
