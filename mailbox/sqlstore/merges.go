package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
)

const candidateCols = `id, agent, commit_sha, source, item, requested_by, state, reason, files, ci_tail, batch, ci_runs,
	claim, claimed_at, landed_as, created_at, updated_at`

func scanCandidate(sc Row) (merge.Candidate, error) {
	var c merge.Candidate
	var files string
	var claimed sql.NullInt64
	var created, updated int64
	err := sc.Scan(&c.ID, &c.Agent, &c.Commit, &c.Source, &c.Item, &c.By, &c.State, &c.Reason, &files, &c.CITail, &c.Batch,
		&c.CIRuns, &c.Claim, &claimed, &c.LandedAs, &created, &updated)
	if err != nil {
		return c, err
	}
	c.CreatedAt, c.UpdatedAt = fromNanos(created), fromNanos(updated)
	if claimed.Valid {
		t := fromNanos(claimed.Int64)
		c.ClaimedAt = &t
	}
	if err := json.Unmarshal([]byte(files), &c.Files); err != nil {
		return c, fmt.Errorf("merge candidate %d: files: %w", c.ID, err)
	}
	return c, nil
}

func getCandidate(ctx context.Context, q Querier, id int64) (merge.Candidate, error) {
	c, err := scanCandidate(q.QueryRowContext(ctx, `SELECT `+candidateCols+` FROM merge_candidates WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("merge candidate %d: %w", id, mailbox.ErrNoSuchCandidate)
	}
	if err != nil {
		return c, fmt.Errorf("read merge candidate %d: %w", id, err)
	}
	return c, nil
}

func listCandidates(ctx context.Context, q Querier, where string, args []any, newest int) ([]merge.Candidate, error) {
	query := `SELECT ` + candidateCols + ` FROM merge_candidates` + where + ` ORDER BY id`
	if newest > 0 {
		query = `SELECT * FROM (SELECT ` + candidateCols + ` FROM merge_candidates` + where + ` ORDER BY id DESC LIMIT ?) AS newest ORDER BY id`
		args = append(args, newest)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	out, err := list(rows, err, scanCandidate)
	if err != nil {
		return nil, fmt.Errorf("read the merge queue: %w", err)
	}
	return out, nil
}

// Candidate returns one merge queue candidate.
func (s *Store) Candidate(ctx context.Context, id int64) (merge.Candidate, error) {
	return getCandidate(ctx, s.db, id)
}

// Candidates lists merge queue candidates, first in, first out.
func (s *Store) Candidates(ctx context.Context, f mailbox.CandidateFilter) ([]merge.Candidate, error) {
	var conds []string
	var args []any
	if f.Agent != "" {
		conds = append(conds, `agent = ?`)
		args = append(args, f.Agent)
	}
	if len(f.States) > 0 {
		conds = append(conds, `state IN (?`+strings.Repeat(`, ?`, len(f.States)-1)+`)`)
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	where := ""
	if len(conds) > 0 {
		where = ` WHERE ` + strings.Join(conds, ` AND `)
	}
	return listCandidates(ctx, s.db, where, args, f.Newest)
}

// EnqueueCandidate stores a new candidate in queued.
func (t *Tx) EnqueueCandidate(c merge.Candidate) (merge.Candidate, error) {
	// A twin queued by another process at the same moment: on PostgreSQL
	// the insert waits for that transaction and, once it committed,
	// inserts nothing (ON CONFLICT on the live index; a unique violation
	// would abort this transaction instead), and the next look finds the
	// twin. Twice at most: a twin that left the queue in between lets the
	// insert through. (SQLite's transactions never overlap.)
	for range 2 {
		var twin int64
		err := t.q.QueryRowContext(t.ctx, `SELECT id FROM merge_candidates WHERE agent = ? AND commit_sha = ? AND state IN ('queued', 'testing')`,
			c.Agent, c.Commit).Scan(&twin)
		switch {
		case err == nil:
			live, err := getCandidate(t.ctx, t.q, twin)
			if err != nil {
				return c, err
			}
			return c, &mailbox.QueuedError{Candidate: live}
		case !errors.Is(err, sql.ErrNoRows):
			return c, fmt.Errorf("queue %s's commit: %w", c.Agent, err)
		}
		now := t.now()
		var id int64
		err = t.q.QueryRowContext(t.ctx, `INSERT INTO merge_candidates (agent, commit_sha, source, item, requested_by, state,
			created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?)
			ON CONFLICT (agent, commit_sha) WHERE state IN ('queued', 'testing') DO NOTHING RETURNING id`,
			c.Agent, c.Commit, string(c.Source), c.Item, c.By, now, now).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue // the twin committed meanwhile: look again
		}
		if err != nil {
			return c, fmt.Errorf("queue %s's commit %s: %w", c.Agent, merge.Short(c.Commit), err)
		}
		return getCandidate(t.ctx, t.q, id)
	}
	return c, fmt.Errorf("queue %s's commit %s: %w (another host queued and moved it meanwhile); run again", c.Agent, merge.Short(c.Commit), mailbox.ErrCandidateQueued)
}

// Candidate returns one candidate inside the transaction.
func (t *Tx) Candidate(id int64) (merge.Candidate, error) { return getCandidate(t.ctx, t.q, id) }

// QueuedCandidates returns the next queued candidates.
func (t *Tx) QueuedCandidates(limit int) ([]merge.Candidate, error) {
	if limit <= 0 {
		return nil, nil // SQLite takes a negative LIMIT for none at all
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, err := t.q.QueryContext(t.ctx, `SELECT `+candidateCols+` FROM merge_candidates WHERE state = 'queued' ORDER BY id LIMIT ?`, limit)
	out, err := list(rows, err, scanCandidate)
	if err != nil {
		return nil, fmt.Errorf("read the merge queue: %w", err)
	}
	return out, nil
}

// SaveCandidate writes everything but the state.
func (t *Tx) SaveCandidate(c merge.Candidate) error {
	files := c.Files
	if files == nil {
		files = []string{}
	}
	fb, _ := json.Marshal(files)
	var claimed any
	if c.ClaimedAt != nil {
		claimed = nanos(*c.ClaimedAt)
	}
	res, err := t.q.ExecContext(t.ctx, `UPDATE merge_candidates SET reason = ?, files = ?, ci_tail = ?, batch = ?, ci_runs = ?,
		claim = ?, claimed_at = ?, landed_as = ?, updated_at = ? WHERE id = ?`,
		c.Reason, string(fb), c.CITail, c.Batch, c.CIRuns, c.Claim, claimed, c.LandedAs, t.now(), c.ID)
	if err != nil {
		return fmt.Errorf("save merge candidate %d: %w", c.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("save merge candidate %d: %w", c.ID, mailbox.ErrNoSuchCandidate)
	}
	return nil
}

// moveCandidate is Transition's compare-and-set for merge subjects; it
// returns the candidate's agent.
func (t *Tx) moveCandidate(c fsm.Change) (string, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil {
		return "", fmt.Errorf("move merge candidate %q: not an id", c.Subject)
	}
	var agent string
	if c.From == "" {
		err = t.q.QueryRowContext(t.ctx, `SELECT agent FROM merge_candidates WHERE id = ? AND state = ?
			AND NOT EXISTS (SELECT 1 FROM events WHERE subject_kind = 'merge' AND subject = ?)`, id, c.To, c.Subject).Scan(&agent)
	} else {
		// PostgreSQL's second claim of a candidate waits for the first
		// to commit, then finds the row no longer queued: one claim wins.
		err = t.q.QueryRowContext(t.ctx, `UPDATE merge_candidates SET state = ?, updated_at = ?,
			claim = CASE WHEN ? = 'testing' THEN claim ELSE '' END,
			claimed_at = CASE WHEN ? = 'testing' THEN claimed_at ELSE NULL END
			WHERE id = ? AND state = ? RETURNING agent`,
			c.To, t.now(), c.To, c.To, id, c.From).Scan(&agent)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("move merge candidate %s from %q to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
	}
	if err != nil {
		return "", fmt.Errorf("move merge candidate %s from %q to %s: %w", c.Subject, c.From, c.To, err)
	}
	return agent, nil
}
