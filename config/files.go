package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// systemDirs hold the kernel's and devices' files, which look like files
// but are not text anyone wrote: /proc/self/environ is the environment with
// every credential in it, and a role goes into every prompt.
var systemDirs = []string{"/proc", "/sys", "/dev"}

// systemDir returns the system directory path is in, or "".
func systemDir(path string) string {
	for _, d := range systemDirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return d
		}
	}
	return ""
}

// maxRoleFile bounds a role file: it goes into every prompt.
const maxRoleFile = 256 << 10

// readRoleFile reads a role file. It refuses what resolves, through any
// symlinks, to a place under /proc, /sys or /dev or on a kernel file system;
// what is not a regular file (a FIFO would block, /dev/zero would never
// end), without opening it; and what is too large.
func readRoleFile(path string) ([]byte, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%w; write the role in a regular file in the repository", err)
	}
	defer f.Close()
	if fi.Size() > maxRoleFile {
		return nil, fmt.Errorf("%d bytes, more than the %d KiB a role may have; shorten it", fi.Size(), maxRoleFile>>10)
	}
	text, err := io.ReadAll(io.LimitReader(f, maxRoleFile+1))
	if err != nil {
		return nil, err
	}
	if len(text) > maxRoleFile {
		return nil, fmt.Errorf("more than the %d KiB a role may have; shorten it", maxRoleFile>>10)
	}
	return text, nil
}

var errNotRegular = errors.New("not a regular file")

// openRegular opens path for reading if it is a regular file outside the
// system directories and kernel file systems, after resolving symlinks.
// Its errors say why not, without naming path.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	if d := systemDir(abs); d != "" {
		return nil, nil, fmt.Errorf("under %s, where the files are the system's, not text you wrote", d)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	if d := systemDir(real); d != "" {
		return nil, nil, fmt.Errorf("links to %s, under %s, where the files are the system's, not text you wrote", real, d)
	}
	// Stat before opening: opening a device can itself do something.
	if fi, err := os.Stat(real); err != nil {
		return nil, nil, unwrapPathError(err)
	} else if !fi.Mode().IsRegular() {
		return nil, nil, errNotRegular
	}
	// O_NOFOLLOW and O_NONBLOCK: what was checked cannot become a symlink
	// or a FIFO that blocks the open; the open file is checked again.
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errNotRegular
	}
	if err == nil {
		if fs := kernelFS(f); fs != "" {
			err = fmt.Errorf("on the kernel's %s file system, where the files are the system's, not text you wrote", fs)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
