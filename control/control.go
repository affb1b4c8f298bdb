// Package control is the supervisor's control socket: a unix socket in
// .swarm/ over which short-lived swarm commands reach the running
// supervisor. `swarm send` pokes it after every commit so mail is noticed at
// once rather than at the next data_version poll.
//
// The wire format is one JSON object per line each way. A unix socket path
// longer than the kernel allows (104–108 bytes) cannot be bound, so when
// .swarm/ is too deep the socket goes into a private directory,
// swarm-<uid> under $XDG_RUNTIME_DIR or the temp dir, and its path is
// written to .swarm/control.addr.
//
// Only the user may connect, and no client can take the supervisor down:
//   - The socket has mode 0600 whatever the umask: it is bound in a private
//     directory and renamed into place, so it is never reachable with a
//     wider mode. The fallback directory is created with Mkdir and used
//     only if it is a real directory owned by the user with mode 0700, so
//     another user cannot squat it in a shared temp dir.
//   - The server holds at most 256 connections; at the cap it closes the
//     oldest idle one (a watch stream is busy, never closed for room). A
//     connection must send each request line within 10 s, lines are at
//     most 1 MiB (a longer one is refused without being buffered whole and
//     its connection closed), and a client that stops reading its answers
//     is cut after 10 s.
//   - Failing to accept (EMFILE) is logged and retried with backoff, 5 ms
//     doubling to 1 s; when out of descriptors with a client waiting, the
//     oldest idle connection is closed to free one. Only the supervisor
//     stopping ends Serve.
//   - A refused client (every connection busy) is told why, even when the
//     refusal beats its request.
package control

import (
	"os"
	"strings"

	"github.com/swarmhq/swarm/repo"
)

// SocketPath returns where the running supervisor listens: the path written
// in control.addr if present, else the default in .swarm/.
func SocketPath(l repo.Layout) string {
	if b, err := os.ReadFile(l.ControlAddr()); err == nil {
		if p := strings.TrimSpace(string(b)); p != "" {
			return p
		}
	}
	return l.Socket()
}
