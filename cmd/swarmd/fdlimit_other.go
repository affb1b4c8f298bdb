//go:build !unix

package main

// ensureFDLimit has no open-file limit to check where there is no rlimit.
func ensureFDLimit(int) error { return nil }
