package control

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/swarmhq/swarm/repo"
)

// maxSocketPath is the longest socket path bound in place; macOS allows 104
// bytes including the terminating NUL, Linux 108.
const maxSocketPath = 100

// stageSuffix names the private directory a socket is bound in before it
// is renamed into place (see bindPrivate); the socket inside it is "s".
const stageSuffix = ".new"

// fits reports whether path, and the staging path bindPrivate binds first,
// are short enough to bind.
func fits(path string) bool {
	return len(path)+len(stageSuffix)+len("/s") <= maxSocketPath
}

// socketPath returns where Listen binds for l, and whether that is the
// fallback (then its path goes into control.addr). The fallback directory
// is created or checked here.
func socketPath(l repo.Layout) (path string, fallback bool, err error) {
	if path = l.Socket(); fits(path) {
		return path, false, nil
	}
	dir, err := privateRuntimeDir()
	if err != nil {
		return "", false, err
	}
	// One private directory serves every repo of the user: the name tells
	// their sockets apart.
	sum := sha256.Sum256([]byte(l.State))
	path = filepath.Join(dir, hex.EncodeToString(sum[:6])+".sock")
	if !fits(path) {
		return "", false, fmt.Errorf("control socket path %s is longer than %d bytes; set XDG_RUNTIME_DIR to a shorter directory", path, maxSocketPath)
	}
	return path, true, nil
}

// privateRuntimeDir returns swarm-<uid> under $XDG_RUNTIME_DIR, or under
// the temp dir when that is unset, creating it 0700. The temp dir is shared
// with every user, so another one could create the directory first (to
// read or replace the socket, or to plant a symlink to a directory of
// theirs): it is made with Mkdir, never MkdirAll, and whatever is there is
// used only if it is a real directory owned by us with mode 0700.
func privateRuntimeDir() (string, error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "swarm-"+strconv.Itoa(os.Getuid()))
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		// The umask may have taken bits away; it can never add any, so
		// the directory was never more open than 0700.
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", fmt.Errorf("control socket directory: %w", err)
		}
	case !errors.Is(err, fs.ErrExist):
		return "", fmt.Errorf("control socket directory: %w", err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// checkPrivateDir returns an error unless dir is a directory (not a
// symlink to one) owned by the current user with mode 0700.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control socket directory: %w", err)
	}
	problem := ""
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		problem = "it is a symlink"
	case !fi.IsDir():
		problem = "it is not a directory"
	case st == nil:
		problem = "its owner cannot be read"
	case int(st.Uid) != os.Getuid():
		problem = fmt.Sprintf("it is owned by uid %d, not by you (uid %d)", st.Uid, os.Getuid())
	case fi.Mode().Perm() != 0o700:
		problem = fmt.Sprintf("its mode is %#o, not 0700", fi.Mode().Perm())
	}
	if problem != "" {
		return fmt.Errorf("refusing control socket directory %s: %s; remove it, or set XDG_RUNTIME_DIR to a directory only you can use", dir, problem)
	}
	return nil
}

// bindPrivate listens on a unix socket at path with mode 0600, whatever the
// umask, and with no moment at which anyone else could connect.
//
// Binding at path and then chmod-ing leaves a window in which the socket
// has the umask's mode (0775 under umask 002) and a connection made then
// survives the chmod. Setting the umask around bind is no cure:
// syscall.Umask is process-wide, and every file the other goroutines create
// meanwhile would get it. So the socket is bound inside a fresh 0700
// directory next to path (path+".new", which only the caller can enter),
// chmod-ed and checked there, and renamed into place. Rename keeps the
// inode, which is what clients connect to, and replaces a stale socket (or
// a planted symlink) at path atomically.
//
// The caller holds the supervisor lock, so no one else binds for the same
// path; a staging directory a crash left behind is removed first.
func bindPrivate(path string) (*net.UnixListener, error) {
	stage := path + stageSuffix
	if err := os.RemoveAll(stage); err != nil {
		return nil, fmt.Errorf("control socket: remove stale %s: %w", stage, err)
	}
	if err := os.Mkdir(stage, 0o700); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	defer os.RemoveAll(stage)
	if err := os.Chmod(stage, 0o700); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	tmp := filepath.Join(stage, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	// The file moves; Serve removes it at its final path.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, error) {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(tmp)
	if err != nil {
		return fail(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		return fail(fmt.Errorf("bound socket has mode %v, want 0600", fi.Mode()))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return ln, nil
}
