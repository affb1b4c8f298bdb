package control

import "context"

type peerKey struct{}

// PeerPID is the process id of the client whose request ctx carries, as
// the kernel reported it when it connected (SO_PEERCRED); false where the
// platform does not say.
func PeerPID(ctx context.Context) (int, bool) {
	pid, ok := ctx.Value(peerKey{}).(int)
	return pid, ok && pid > 0
}
