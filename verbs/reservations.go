package verbs

import (
	"context"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/swarm"
)

// The file reservation verbs (reserve, release, reservations). The glob
// rules and the runtime's side (expiry, crossings) stay in swarm.

// ReserveRequest is one `swarm reserve`.
type ReserveRequest = swarm.ReserveRequest

// ReserveResult is what `swarm reserve --json` prints.
type ReserveResult = swarm.ReserveResult

// ReleaseRequest is one `swarm release`.
type ReleaseRequest = swarm.ReleaseRequest

// ReleaseResult is what `swarm release --json` prints.
type ReleaseResult = swarm.ReleaseResult

// ReservationsRequest is one `swarm reservations`.
type ReservationsRequest = swarm.ReservationsRequest

// Reserve is the reserve verb: a session reserves for its own agent (with
// can_edit_files), the operator for the agent req.Agent names.
func Reserve(ctx context.Context, c identity.Caller, req ReserveRequest) (ReserveResult, error) {
	req.Caller = c
	return swarm.Reserve(ctx, req)
}

// Release is the release verb: a session releases its own agent's
// reservations, the operator anyone's.
func Release(ctx context.Context, c identity.Caller, req ReleaseRequest) (ReleaseResult, error) {
	req.Caller = c
	return swarm.Release(ctx, req)
}

// Reservations lists the reservations: a read any caller the door knows
// may make.
func Reservations(ctx context.Context, c identity.Caller, req ReservationsRequest) ([]mailbox.Reservation, error) {
	req.Caller = c
	return swarm.Reservations(ctx, req)
}
