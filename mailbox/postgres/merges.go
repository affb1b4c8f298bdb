package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
)

const candidateCols = `id, agent, commit_sha, source, item, requested_by, state, reason, files, ci_tail, batch, ci_runs,
	claim, claimed_at, landed_as, created_at, updated_at`

func scanCandidate(sc interface{ Scan(...any) error }) (merge.Candidate, error) {
	var c merge.Candidate
	var files, source, state string
	var claimed *int64
	var runs, created, updated int64
	err := sc.Scan(&c.ID, &c.Agent, &c.Commit, &source, &c.Item, &c.By, &state, &c.Reason, &files, &c.CITail, &c.Batch,
		&runs, &c.Claim, &claimed, &c.LandedAs, &created, &updated)
	if err != nil {
		return c, err
	}
	c.Source, c.State, c.CIRuns = merge.Source(source), merge.State(state), int(runs)
	c.CreatedAt, c.UpdatedAt = fromNanos(created), fromNanos(updated)
	if claimed != nil {
		t := fromNanos(*claimed)
		c.ClaimedAt = &t
	}
	if err := json.Unmarshal([]byte(files), &c.Files); err != nil {
		return c, fmt.Errorf("merge candidate %d: files: %w", c.ID, err)
	}
	return c, nil
}

func getCandidate(ctx context.Context, q querier, id int64) (merge.Candidate, error) {
	c, err := scanCandidate(q.QueryRow(ctx, `SELECT `+candidateCols+` FROM merge_candidates WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("merge candidate %d: %w", id, mailbox.ErrNoSuchCandidate)
	}
	if err != nil {
		return c, fmt.Errorf("read merge candidate %d: %w", id, err)
	}
	return c, nil
}

func listCandidates(ctx context.Context, q querier, query string, args ...any) ([]merge.Candidate, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the merge queue: %w", err)
	}
	defer rows.Close()
	var out []merge.Candidate
	for rows.Next() {
		c, err := scanCandidate(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Candidate returns one merge queue candidate.
func (s *Store) Candidate(ctx context.Context, id int64) (merge.Candidate, error) {
	return getCandidate(ctx, s.pool, id)
}

// Candidates lists merge queue candidates, first in, first out.
func (s *Store) Candidates(ctx context.Context, f mailbox.CandidateFilter) ([]merge.Candidate, error) {
	var conds []string
	var args []any
	if f.Agent != "" {
		args = append(args, f.Agent)
		conds = append(conds, fmt.Sprintf(`agent = $%d`, len(args)))
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		args = append(args, states)
		conds = append(conds, fmt.Sprintf(`state = ANY($%d)`, len(args)))
	}
	where := ""
	if len(conds) > 0 {
		where = ` WHERE ` + strings.Join(conds, ` AND `)
	}
	q := `SELECT ` + candidateCols + ` FROM merge_candidates` + where + ` ORDER BY id`
	if f.Newest > 0 {
		args = append(args, f.Newest)
		q = fmt.Sprintf(`SELECT * FROM (SELECT `+candidateCols+` FROM merge_candidates`+where+` ORDER BY id DESC LIMIT $%d) newest ORDER BY id`, len(args))
	}
	return listCandidates(ctx, s.pool, q, args...)
}

// EnqueueCandidate stores a new candidate in queued.
func (t *txn) EnqueueCandidate(c merge.Candidate) (merge.Candidate, error) {
	// A twin queued by another host at the same moment: the insert waits
	// for that transaction and, once it committed, inserts nothing (ON
	// CONFLICT on the live index; a unique violation would abort this
	// transaction instead), and the next look finds the twin. Twice at
	// most: a twin that left the queue in between lets the insert through.
	for range 2 {
		var twin int64
		err := t.tx.QueryRow(t.ctx, `SELECT id FROM merge_candidates WHERE agent = $1 AND commit_sha = $2 AND state IN ('queued', 'testing')`,
			c.Agent, c.Commit).Scan(&twin)
		switch {
		case err == nil:
			live, err := getCandidate(t.ctx, t.tx, twin)
			if err != nil {
				return c, err
			}
			return c, &mailbox.QueuedError{Candidate: live}
		case !errors.Is(err, pgx.ErrNoRows):
			return c, fmt.Errorf("queue %s's commit: %w", c.Agent, err)
		}
		now := t.now()
		var id int64
		err = t.tx.QueryRow(t.ctx, `INSERT INTO merge_candidates (agent, commit_sha, source, item, requested_by, state,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'queued', $6, $6)
			ON CONFLICT (agent, commit_sha) WHERE state IN ('queued', 'testing') DO NOTHING RETURNING id`,
			c.Agent, c.Commit, string(c.Source), c.Item, c.By, now).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // the twin committed meanwhile: look again
		}
		if err != nil {
			return c, fmt.Errorf("queue %s's commit %s: %w", c.Agent, merge.Short(c.Commit), err)
		}
		return getCandidate(t.ctx, t.tx, id)
	}
	return c, fmt.Errorf("queue %s's commit %s: %w (another host queued and moved it meanwhile); run again", c.Agent, merge.Short(c.Commit), mailbox.ErrCandidateQueued)
}

// Candidate returns one candidate inside the transaction.
func (t *txn) Candidate(id int64) (merge.Candidate, error) { return getCandidate(t.ctx, t.tx, id) }

// QueuedCandidates returns the next queued candidates.
func (t *txn) QueuedCandidates(limit int) ([]merge.Candidate, error) {
	if limit <= 0 {
		return nil, nil
	}
	return listCandidates(t.ctx, t.tx, `SELECT `+candidateCols+` FROM merge_candidates WHERE state = 'queued' ORDER BY id LIMIT $1`, limit)
}

// SaveCandidate writes everything but the state.
func (t *txn) SaveCandidate(c merge.Candidate) error {
	files := c.Files
	if files == nil {
		files = []string{}
	}
	fb, _ := json.Marshal(files)
	var claimed *int64
	if c.ClaimedAt != nil {
		n := nanos(*c.ClaimedAt)
		claimed = &n
	}
	tag, err := t.tx.Exec(t.ctx, `UPDATE merge_candidates SET reason = $1, files = $2, ci_tail = $3, batch = $4, ci_runs = $5,
		claim = $6, claimed_at = $7, landed_as = $8, updated_at = $9 WHERE id = $10`,
		c.Reason, string(fb), c.CITail, c.Batch, int64(c.CIRuns), c.Claim, claimed, c.LandedAs, t.now(), c.ID)
	if err != nil {
		return fmt.Errorf("save merge candidate %d: %w", c.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("save merge candidate %d: %w", c.ID, mailbox.ErrNoSuchCandidate)
	}
	return nil
}

// moveCandidate is Transition's compare-and-set for merge subjects; it
// returns the candidate's agent.
func (t *txn) moveCandidate(c fsm.Change) (string, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil {
		return "", fmt.Errorf("move merge candidate %q: not an id", c.Subject)
	}
	var agent string
	if c.From == "" {
		err = t.tx.QueryRow(t.ctx, `SELECT agent FROM merge_candidates WHERE id = $1 AND state = $2
			AND NOT EXISTS (SELECT 1 FROM events WHERE subject_kind = 'merge' AND subject = $3)`, id, c.To, c.Subject).Scan(&agent)
	} else {
		// Under READ COMMITTED a second host's claim waits for the first
		// to commit, then finds the row no longer queued: one claim wins.
		err = t.tx.QueryRow(t.ctx, `UPDATE merge_candidates SET state = $1, updated_at = $2,
			claim = CASE WHEN $1 = 'testing' THEN claim ELSE '' END,
			claimed_at = CASE WHEN $1 = 'testing' THEN claimed_at ELSE NULL END
			WHERE id = $3 AND state = $4 RETURNING agent`,
			c.To, t.now(), id, c.From).Scan(&agent)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("move merge candidate %s from %q to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
	}
	if err != nil {
		return "", fmt.Errorf("move merge candidate %s from %q to %s: %w", c.Subject, c.From, c.To, err)
	}
	return agent, nil
}
