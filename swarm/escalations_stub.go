package swarm

// TEMPORARY: the smallest part of h-escal's raise API (swarm/escalations.go
// on branch h-escal) that the protocol layer calls, with the same names
// and signatures, until that branch lands; the merge deletes this file.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
)

// Raise stores an escalation, or counts its unresolved twin.
func Raise(ctx context.Context, st mailbox.Store, d escalation.Draft) (esc escalation.Escalation, created bool, err error) {
	d = d.Normalize()
	if err := d.Validate(); err != nil {
		return esc, false, err
	}
	err = st.InTx(ctx, func(tx mailbox.Tx) error {
		twin, ok, err := tx.UnresolvedTwin(d.DedupeKey)
		if err != nil {
			return err
		}
		if ok {
			esc, err = tx.CountEscalation(twin.ID)
			return err
		}
		if esc, err = tx.InsertEscalation(d); err != nil {
			return err
		}
		created = true
		_, err = fsm.Apply(tx, escalation.Table, fsm.SubjectEscalation, escalation.Subject(esc.ID), "", escalation.Raise, escalation.Open, "raised: "+esc.Summary, 0)
		return err
	})
	if err != nil {
		return escalation.Escalation{}, false, fmt.Errorf("raise escalation: %w", err)
	}
	return esc, created, nil
}

// Raise raises an escalation in the supervisor.
func (s *Supervisor) Raise(ctx context.Context, d escalation.Draft) (escalation.Escalation, bool, error) {
	return Raise(ctx, s.store, d)
}

func details(kv map[string]any) json.RawMessage {
	b, err := json.Marshal(kv)
	if err != nil {
		return nil
	}
	return b
}
