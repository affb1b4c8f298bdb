package config

import (
	"os"
	"testing"
)

// TestKernelFS checks the file-system check that catches procfs and sysfs
// mounted outside /proc and /sys, where the path check cannot see them.
func TestKernelFS(t *testing.T) {
	for path, want := range map[string]string{"/proc/self/status": "proc", "/sys/kernel": "sysfs"} {
		f, err := os.Open(path)
		if err != nil {
			t.Skip(err)
		}
		if got := kernelFS(f); got != want {
			t.Errorf("kernelFS(%s) = %q, want %q", path, got, want)
		}
		f.Close()
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := kernelFS(f); got != "" {
		t.Errorf("kernelFS(temp file) = %q", got)
	}
}
