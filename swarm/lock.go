package swarm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Lock is the flock on .swarm/swarm.lock that makes one supervisor per repo.
// An flock dies with its process, so a lock left by a crashed supervisor is
// simply taken; a pid file alone could not tell that, and two supervisors
// started together could both think they won.
type Lock struct {
	f *os.File
}

// AlreadyRunningError means another supervisor holds the lock.
type AlreadyRunningError struct{ Pid int }

func (e *AlreadyRunningError) Error() string {
	if e.Pid > 0 {
		return fmt.Sprintf("swarm is already running (pid %d); stop it with 'swarm down' or Ctrl-C in its terminal", e.Pid)
	}
	return "swarm is already running; stop it with 'swarm down' or Ctrl-C in its terminal"
}

// AcquireLock takes the lock without waiting and writes our pid into it.
func AcquireLock(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &AlreadyRunningError{Pid: readPid(f)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. The pid is cleared so readers do not name a
// process that no longer holds it.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

func readPid(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}

// LockHolder reports whether a live process holds the supervisor lock at
// path, and the pid it wrote there. It asks for a shared lock without
// waiting and lets go at once, so it never truncates the file or keeps a
// starting supervisor out for longer than an instant. A lock left by a
// crashed supervisor died with it, so a stale pid is never mistaken for a
// running supervisor.
func LockHolder(path string) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return 0, false
	}
	return readPid(f), true
}
