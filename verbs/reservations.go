package verbs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/swarm"
)

// The file reservation verbs (reserve, release, reservations). The glob
// rules and the runtime's side (expiry, crossings, a retired agent's
// release) stay in swarm.

// ReserveRequest is one `swarm reserve`.
type ReserveRequest struct {
	Store     mailbox.Store
	Agent     string // the operator's --agent; a session's own agent when empty
	Globs     []string
	Exclusive bool
	TTL       time.Duration // 0: until released
	Reason    string
	Now       time.Time
	// Known reports whether an agent is one of the swarm's; nil accepts
	// any.
	Known func(agent string) bool
	// Tracked lists the files tracked on the agent's branch, to warn of a
	// glob that matches none; nil skips the warning.
	Tracked func(ctx context.Context, agent string) ([]string, error)
}

// ReserveResult is what `swarm reserve --json` prints.
type ReserveResult struct {
	Reservations []mailbox.Reservation `json:"reservations"`
	// Warnings are said but refuse nothing: a glob that matches no
	// tracked file, an overlap with a teammate's reservation.
	Warnings []string `json:"warnings"`
}

// ReservationConflictError refuses an exclusive reservation that overlaps
// another agent's exclusive one: nothing was reserved.
type ReservationConflictError struct {
	Glob   string
	Holder mailbox.Reservation
	Now    time.Time
}

func (e *ReservationConflictError) Error() string {
	return fmt.Sprintf("%s overlaps %s's exclusive reservation of %s%s: nothing was reserved; ask %s to release it (swarm send %s \"...\"), reserve it without --exclusive, or wait for it to lapse",
		e.Glob, e.Holder.Agent, e.Holder.Glob, swarm.Holding(e.Holder, e.Now), e.Holder.Agent, e.Holder.Agent)
}

// Reserve is the reserve verb: a session reserves for its own agent
// (with can_edit_files), the operator for the agent req.Agent names. It
// stores the caller's reservations of req.Globs, all or none: each
// glob checked, an exclusive one refused when it overlaps another agent's
// exclusive reservation (checked against what is live in the same
// transaction as the write), and a glob the agent holds already refreshed.
func Reserve(ctx context.Context, c identity.Caller, req ReserveRequest) (ReserveResult, error) {
	var res ReserveResult
	if err := c.Require(mode.CanEditFiles, "swarm reserve"); err != nil {
		return res, err
	}
	if err := c.ForAgent(req.Agent, "swarm reserve --agent "+req.Agent); err != nil {
		return res, err
	}
	agent := req.Agent
	if c.IsSession() {
		agent = c.Agent()
	}
	switch {
	case agent == "":
		return res, fmt.Errorf("whose reservation? run it from an agent's session, or pass --agent <name>")
	case req.Known != nil && !req.Known(agent):
		return res, fmt.Errorf("unknown agent %q: 'swarm status' lists the agents", agent)
	case len(req.Globs) == 0:
		return res, fmt.Errorf("reserve what? give one or more globs, such as: swarm reserve 'api/**' --exclusive")
	case req.TTL < 0:
		return res, fmt.Errorf("--ttl %s is negative: give how long the reservation lasts, such as 2h", req.TTL)
	case len(req.Reason) > swarm.MaxReservationReason:
		return res, fmt.Errorf("the reason is %d bytes, more than %d: say it in one short line", len(req.Reason), swarm.MaxReservationReason)
	case strings.ContainsAny(req.Reason, "\n\r"):
		return res, fmt.Errorf("the reason has a line break: say it in one line")
	}
	var globs []string
	for _, g := range req.Globs {
		n, err := swarm.NormalizeGlob(g)
		if err != nil {
			return res, err
		}
		if !slices.Contains(globs, n) {
			globs = append(globs, n)
		}
	}
	now := req.Now
	var expires *time.Time
	if req.TTL > 0 {
		t := now.Add(req.TTL)
		expires = &t
	}
	rs := make([]mailbox.Reservation, len(globs))
	for i, g := range globs {
		rs[i] = mailbox.Reservation{Agent: agent, Glob: g, Exclusive: req.Exclusive, Reason: strings.TrimSpace(req.Reason), ExpiresAt: expires}
	}
	var overlaps []string
	stored, err := req.Store.Reserve(ctx, now, rs, func(live []mailbox.Reservation) error {
		overlaps = overlaps[:0]
		for _, g := range globs {
			for _, h := range live {
				if h.Agent == agent || !swarm.GlobsOverlap(g, h.Glob) {
					continue
				}
				if req.Exclusive && h.Exclusive {
					return &ReservationConflictError{Glob: g, Holder: h, Now: now}
				}
				kind := "shared"
				if h.Exclusive {
					kind = "exclusive"
				}
				overlaps = append(overlaps, fmt.Sprintf("%s overlaps %s's %s reservation of %s%s", g, h.Agent, kind, h.Glob, swarm.Holding(h, now)))
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Reservations = stored
	res.Warnings = append([]string{}, overlaps...)
	if req.Tracked != nil {
		files, err := req.Tracked(ctx, agent)
		if err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("could not list the tracked files to check the globs: %v", err))
		}
		for _, g := range globs {
			if err == nil && !slices.ContainsFunc(files, func(f string) bool { return swarm.GlobMatch(g, f) }) {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s matches no file tracked on %s's branch yet: reserved anyway (check the spelling; a glob is %s)", g, agent, swarm.GlobHelp))
			}
		}
	}
	return res, nil
}

// ReleaseRequest is one `swarm release`.
type ReleaseRequest struct {
	Store mailbox.Store
	Agent string   // the operator's --agent; a session's own agent when empty
	Globs []string // empty: every one of the agent's
	Now   time.Time
}

// ReleaseResult is what `swarm release --json` prints.
type ReleaseResult struct {
	Released []mailbox.Reservation `json:"released"`
	Warnings []string              `json:"warnings"` // globs the agent did not hold
}

// Release is the release verb: it releases the caller's reservations of req.Globs, or all of them.
// Anyone may release its own; the operator releases anyone's.
func Release(ctx context.Context, c identity.Caller, req ReleaseRequest) (ReleaseResult, error) {
	res := ReleaseResult{Released: []mailbox.Reservation{}, Warnings: []string{}}
	if err := c.ForAgent(req.Agent, "swarm release --agent "+req.Agent); err != nil {
		return res, err
	}
	agent := req.Agent
	if c.IsSession() {
		agent = c.Agent()
	}
	if agent == "" {
		return res, fmt.Errorf("whose reservations? run it from an agent's session, or pass --agent <name>")
	}
	var globs []string
	for _, g := range req.Globs {
		n, err := swarm.NormalizeGlob(g)
		if err != nil {
			return res, err
		}
		globs = append(globs, n)
	}
	out, err := req.Store.ReleaseReservations(ctx, agent, globs, req.Now)
	if err != nil {
		return res, err
	}
	res.Released = append(res.Released, out...)
	for _, g := range globs {
		if !slices.ContainsFunc(out, func(r mailbox.Reservation) bool { return r.Glob == g }) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s held no reservation of %s: 'swarm reservations' lists them", agent, g))
		}
	}
	return res, nil
}

// ReservationsRequest is one `swarm reservations`.
type ReservationsRequest struct {
	Store mailbox.Store
	All   bool // released and expired ones too
	Now   time.Time
}

// Reservations is the reservations verb, a read any caller the door
// knows may make: it lists the live reservations (every one with All), oldest
// first.
func Reservations(ctx context.Context, c identity.Caller, req ReservationsRequest) ([]mailbox.Reservation, error) {
	if !c.Known() {
		return nil, c.OperatorOnly("swarm reservations")
	}
	rs, err := req.Store.Reservations(ctx, req.Now, req.All)
	if rs == nil {
		rs = []mailbox.Reservation{}
	}
	return rs, err
}
