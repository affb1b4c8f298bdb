package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/workflow"
)

const itemCols = `id, workflow, kind, title, criteria, risk, complex, state, reject_count, ci_failures, agent,
	dispatch_msg, request_msg, result_msg, inputs, review_commit, stage_at, notified, created_at, updated_at`

func scanItem(sc interface{ Scan(...any) error }) (workflow.Item, error) {
	var it workflow.Item
	var criteria, inputs, kind, risk, state, notified string
	var complex int64
	var reject, ci int64
	var stage *int64
	var created, updated int64
	err := sc.Scan(&it.ID, &it.Workflow, &kind, &it.Title, &criteria, &risk, &complex, &state, &reject,
		&ci, &it.Agent, &it.Dispatch, &it.Request, &it.ResultMsg, &inputs, &it.ReviewCommit, &stage, &notified,
		&created, &updated)
	if err != nil {
		return it, err
	}
	it.Kind, it.Risk, it.State, it.Notified = workflow.Kind(kind), workflow.Risk(risk), workflow.State(state), workflow.State(notified)
	it.RejectCount, it.CIFailures = int(reject), int(ci)
	it.Complex = complex == 1
	it.CreatedAt, it.UpdatedAt = fromNanos(created), fromNanos(updated)
	if stage != nil {
		t := fromNanos(*stage)
		it.StageAt = &t
	}
	if err := json.Unmarshal([]byte(criteria), &it.Criteria); err != nil {
		return it, fmt.Errorf("item %s: criteria: %w", it.ID, err)
	}
	if err := json.Unmarshal([]byte(inputs), &it.Inputs); err != nil {
		return it, fmt.Errorf("item %s: inputs: %w", it.ID, err)
	}
	return it, nil
}

func jsonList(v []string) string {
	if v == nil {
		v = []string{}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Item returns one workflow item.
func (s *Store) Item(ctx context.Context, id string) (workflow.Item, error) {
	it, err := scanItem(s.pool.QueryRow(ctx, `SELECT `+itemCols+` FROM workflow_items WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return it, fmt.Errorf("item %s: %w", id, mailbox.ErrNoSuchItem)
	}
	return it, err
}

// Items lists a workflow's items, first in, first out.
func (s *Store) Items(ctx context.Context, name string) ([]workflow.Item, error) {
	q := `SELECT ` + itemCols + ` FROM workflow_items`
	var args []any
	if name != "" {
		q += ` WHERE workflow = $1`
		args = append(args, name)
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read work items: %w", err)
	}
	defer rows.Close()
	var out []workflow.Item
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// InsertItem stores a new item in its first state.
func (t *txn) InsertItem(it workflow.Item) error {
	now := t.now()
	_, err := t.tx.Exec(t.ctx, `INSERT INTO workflow_items (id, workflow, kind, title, criteria, risk, complex, state,
		agent, inputs, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
		it.ID, it.Workflow, string(it.Kind), it.Title, jsonList(it.Criteria), string(it.Risk), b2i(it.Complex), string(it.State), it.Agent,
		jsonList(it.Inputs), now)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("item %s: %w", it.ID, mailbox.ErrItemExists)
	}
	if err != nil {
		return fmt.Errorf("store item %s: %w", it.ID, err)
	}
	return nil
}

// Item returns one workflow item inside the transaction.
func (t *txn) Item(id string) (workflow.Item, error) {
	it, err := scanItem(t.tx.QueryRow(t.ctx, `SELECT `+itemCols+` FROM workflow_items WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return it, fmt.Errorf("item %s: %w", id, mailbox.ErrNoSuchItem)
	}
	return it, err
}

// UpdateItem writes everything but the state.
func (t *txn) UpdateItem(it workflow.Item) error {
	var stage *int64
	if it.StageAt != nil {
		n := nanos(*it.StageAt)
		stage = &n
	}
	tag, err := t.tx.Exec(t.ctx, `UPDATE workflow_items SET reject_count = $1, ci_failures = $2, agent = $3, dispatch_msg = $4,
		request_msg = $5, result_msg = $6, inputs = $7, review_commit = $8, stage_at = $9, notified = $10, updated_at = $11 WHERE id = $12`,
		int64(it.RejectCount), int64(it.CIFailures), it.Agent, it.Dispatch, it.Request, it.ResultMsg, jsonList(it.Inputs), it.ReviewCommit,
		stage, string(it.Notified), t.now(), it.ID)
	if err != nil {
		return fmt.Errorf("update item %s: %w", it.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("update item %s: %w", it.ID, mailbox.ErrNoSuchItem)
	}
	return nil
}

// moveItem is Transition's compare-and-set for item subjects.
func (t *txn) moveItem(c fsm.Change) error {
	var n int64
	var err error
	if c.From == "" {
		err = t.tx.QueryRow(t.ctx, `SELECT count(*) FROM workflow_items WHERE id = $1 AND state = $2
			AND NOT EXISTS (SELECT 1 FROM events WHERE subject_kind = 'item' AND subject = $1)`, c.Subject, c.To).Scan(&n)
	} else {
		var tag pgconn.CommandTag
		tag, err = t.tx.Exec(t.ctx, `UPDATE workflow_items SET state = $1, updated_at = $2 WHERE id = $3 AND state = $4`,
			c.To, t.now(), c.Subject, c.From)
		n = tag.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("move item %s from %q to %s: %w", c.Subject, c.From, c.To, err)
	}
	if n != 1 {
		return fmt.Errorf("move item %s from %q to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
	}
	return nil
}
