package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/workflow"
)

const itemCols = `id, workflow, kind, title, criteria, risk, complex, state, reject_count, ci_failures, agent,
	dispatch_msg, request_msg, result_msg, inputs, review_commit, stage_at, notified, created_at, updated_at`

func scanItem(sc Row) (workflow.Item, error) {
	var it workflow.Item
	var criteria, inputs string
	var complex int
	var stage sql.NullInt64
	var created, updated int64
	err := sc.Scan(&it.ID, &it.Workflow, &it.Kind, &it.Title, &criteria, &it.Risk, &complex, &it.State, &it.RejectCount,
		&it.CIFailures, &it.Agent, &it.Dispatch, &it.Request, &it.ResultMsg, &inputs, &it.ReviewCommit, &stage, &it.Notified,
		&created, &updated)
	if err != nil {
		return it, err
	}
	it.Complex = complex == 1
	it.CreatedAt, it.UpdatedAt = fromNanos(created), fromNanos(updated)
	if stage.Valid {
		t := fromNanos(stage.Int64)
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Item returns one workflow item.
func (s *Store) Item(ctx context.Context, id string) (workflow.Item, error) {
	it, err := scanItem(s.db.QueryRowContext(ctx, `SELECT `+itemCols+` FROM workflow_items WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return it, fmt.Errorf("item %s: %w", id, mailbox.ErrNoSuchItem)
	}
	return it, err
}

// Items lists a workflow's items, first in, first out.
func (s *Store) Items(ctx context.Context, name string) ([]workflow.Item, error) {
	q := `SELECT ` + itemCols + ` FROM workflow_items`
	var args []any
	if name != "" {
		q += ` WHERE workflow = ?`
		args = append(args, name)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	out, err := list(rows, err, scanItem)
	if err != nil {
		return nil, fmt.Errorf("read work items: %w", err)
	}
	return out, nil
}

// InsertItem stores a new item in its first state.
func (t *Tx) InsertItem(it workflow.Item) error {
	now := t.now()
	_, err := t.q.ExecContext(t.ctx, `INSERT INTO workflow_items (id, workflow, kind, title, criteria, risk, complex, state,
		agent, inputs, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		it.ID, it.Workflow, it.Kind, it.Title, jsonList(it.Criteria), it.Risk, b2i(it.Complex), it.State, it.Agent,
		jsonList(it.Inputs), now, now)
	if _, unique := t.s.dialect.Unique(err); unique {
		return fmt.Errorf("item %s: %w", it.ID, mailbox.ErrItemExists)
	}
	if err != nil {
		return fmt.Errorf("store item %s: %w", it.ID, err)
	}
	return nil
}

// Item returns one workflow item inside the transaction.
func (t *Tx) Item(id string) (workflow.Item, error) {
	it, err := scanItem(t.q.QueryRowContext(t.ctx, `SELECT `+itemCols+` FROM workflow_items WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return it, fmt.Errorf("item %s: %w", id, mailbox.ErrNoSuchItem)
	}
	return it, err
}

// UpdateItem writes everything but the state.
func (t *Tx) UpdateItem(it workflow.Item) error {
	var stage any
	if it.StageAt != nil {
		stage = nanos(*it.StageAt)
	}
	res, err := t.q.ExecContext(t.ctx, `UPDATE workflow_items SET reject_count = ?, ci_failures = ?, agent = ?, dispatch_msg = ?,
		request_msg = ?, result_msg = ?, inputs = ?, review_commit = ?, stage_at = ?, notified = ?, updated_at = ? WHERE id = ?`,
		it.RejectCount, it.CIFailures, it.Agent, it.Dispatch, it.Request, it.ResultMsg, jsonList(it.Inputs), it.ReviewCommit,
		stage, it.Notified, t.now(), it.ID)
	if err != nil {
		return fmt.Errorf("update item %s: %w", it.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("update item %s: %w", it.ID, mailbox.ErrNoSuchItem)
	}
	return nil
}

// moveItem is Transition's compare-and-set for item subjects.
func (t *Tx) moveItem(c fsm.Change) error {
	var err error
	var n int64
	if c.From == "" {
		err = t.q.QueryRowContext(t.ctx, `SELECT count(*) FROM workflow_items WHERE id = ? AND state = ?
			AND NOT EXISTS (SELECT 1 FROM events WHERE subject_kind = 'item' AND subject = ?)`, c.Subject, c.To, c.Subject).Scan(&n)
	} else {
		var res Result
		res, err = t.q.ExecContext(t.ctx, `UPDATE workflow_items SET state = ?, updated_at = ? WHERE id = ? AND state = ?`,
			c.To, t.now(), c.Subject, c.From)
		if err == nil {
			n, err = res.RowsAffected()
		}
	}
	if err != nil {
		return fmt.Errorf("move item %s from %q to %s: %w", c.Subject, c.From, c.To, err)
	}
	if n != 1 {
		return fmt.Errorf("move item %s from %q to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
	}
	return nil
}
