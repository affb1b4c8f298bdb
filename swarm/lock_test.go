package swarm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLockIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swarm.lock")
	l, err := AcquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(path)
	var ar *AlreadyRunningError
	if !errors.As(err, &ar) || ar.Pid != os.Getpid() {
		t.Fatalf("second acquire = %v, want AlreadyRunningError naming pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := AcquireLock(path)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	l2.Release()
}
