package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestHardenSupervisor(t *testing.T) {
	if err := hardenSupervisor(); err != nil {
		t.Fatal(err)
	}
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d != 0 {
		t.Fatalf("dumpable = %d after hardening, want 0", d)
	}
}
