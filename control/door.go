package control

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/swarmhq/swarm/repo"
)

// A door is one session's own control socket (DESIGN §13.2): the
// supervisor opens it before the session starts and closes it after, and a
// connection to it is that session. It lives in a private directory of its
// own (mode 0700, an unguessable name) under .swarm/doors, or under the
// user's runtime directory when .swarm/ is too deep for a socket path, so
// a sandbox can bind that one directory into the session and hide the rest
// of .swarm/.

// DoorEnv names the session environment variable holding its door's path.
const DoorEnv = "SWARM_DOOR"

// ListenDoor binds a door for session id of the swarm at l. The Server
// removes the socket and its directory when Serve returns (or Close).
func ListenDoor(l repo.Layout, id string) (*Server, error) {
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("door for %s: %w", id, err)
	}
	base, name := filepath.Join(l.State, "doors"), id+"-"+hex.EncodeToString(nonce[:])
	if !doorFits(filepath.Join(base, name)) {
		// Too deep for a socket path: the user's private runtime
		// directory, which serves every repository (the hash of .swarm/
		// tells theirs apart); the nonce alone names the session.
		dir, err := privateRuntimeDir()
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(l.State))
		base, name = dir, "d"+hex.EncodeToString(sum[:4])+hex.EncodeToString(nonce[:])
		if !doorFits(filepath.Join(base, name)) {
			return nil, fmt.Errorf("door socket path under %s is longer than %d bytes; set XDG_RUNTIME_DIR to a shorter directory", base, maxSocketPath)
		}
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("door directory: %w", err)
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("door directory: %w", err)
	}
	// The umask may have taken bits away, never added any: the directory
	// was never more open than 0700, so nobody else can reach the socket
	// bound in it, whatever its own mode.
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("door directory: %w", err)
	}
	path := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("listen on the door of %s: %w", id, err)
	}
	ln.SetUnlinkOnClose(false) // Serve removes the whole directory
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("door of %s: %w", id, err)
	}
	s := newServer(ln, path)
	s.dir = dir
	return s, nil
}

// doorFits reports whether a door's socket in dir can be bound.
func doorFits(dir string) bool { return len(dir)+len("/s") <= maxSocketPath }

// RemoveDoors removes the doors a crashed supervisor left in .swarm/doors
// (their sessions ended with it). Called under the supervisor lock, before
// any session starts.
func RemoveDoors(l repo.Layout) error {
	if dir, err := privateRuntimeDir(); err == nil {
		sum := sha256.Sum256([]byte(l.State))
		stale, _ := filepath.Glob(filepath.Join(dir, "d"+hex.EncodeToString(sum[:4])+"*"))
		for _, d := range stale {
			os.RemoveAll(d)
		}
	}
	return os.RemoveAll(filepath.Join(l.State, "doors"))
}

// RunAt asks the server at path (a session's door) to run a swarm command
// and returns what it printed.
func RunAt(ctx context.Context, path string, req RunRequest) (RunResult, error) {
	return runOn(ctx, path, req)
}

// CallVerbAt asks the server at path (a session's door) to run one verb
// with its typed request (OpCall) and returns what it printed.
func CallVerbAt(ctx context.Context, path string, req CallRequest) (RunResult, error) {
	var res RunResult
	resp, err := callPath(ctx, path, Request{Op: OpCall, Call: &req})
	if err != nil {
		if !resp.OK && resp.Error != "" {
			return res, &RunRefused{Reason: resp.Error}
		}
		return res, err
	}
	if err := json.Unmarshal(resp.Data, &res); err != nil {
		return res, fmt.Errorf("control %s: bad answer: %w", OpCall, err)
	}
	return res, nil
}

// CallAt sends one request to the server at path and waits for the answer.
func CallAt(ctx context.Context, path string, req Request) (Response, error) {
	return callPath(ctx, path, req)
}
