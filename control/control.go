// Package control is the supervisor's control socket: a unix socket in
// .swarm/ over which short-lived swarm commands reach the running
// supervisor. `swarm send` pokes it after every commit so mail is noticed at
// once rather than at the next data_version poll.
//
// The wire format is one JSON object per line each way. A unix socket path
// longer than the kernel allows (104–108 bytes) cannot be bound, so when
// .swarm/ is too deep the socket goes under $XDG_RUNTIME_DIR or the temp
// dir and its path is written to .swarm/control.addr.
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
