package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/team"
)

const teamCols = `name, state, pings, breaches, relaunches, escalation, updated_at`

func scanTeam(sc pgx.Row) (team.Launch, error) {
	var l team.Launch
	var state, pings, breaches string
	var relaunches, at int64
	if err := sc.Scan(&l.Name, &state, &pings, &breaches, &relaunches, &l.Escalation, &at); err != nil {
		return l, err
	}
	l.State, l.Relaunches, l.UpdatedAt = team.State(state), int(relaunches), fromNanos(at)
	if err := json.Unmarshal([]byte(pings), &l.Pings); err != nil {
		return l, fmt.Errorf("team %s: read its pings: %w", l.Name, err)
	}
	if err := json.Unmarshal([]byte(breaches), &l.Breaches); err != nil {
		return l, fmt.Errorf("team %s: read its breaches: %w", l.Name, err)
	}
	if l.Pings == nil {
		l.Pings = map[string]team.Ping{}
	}
	return l, nil
}

func getTeam(ctx context.Context, q querier, name string) (team.Launch, error) {
	l, err := scanTeam(q.QueryRow(ctx, `SELECT `+teamCols+` FROM teams WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("team %s: %w", name, mailbox.ErrNoSuchTeam)
	}
	if err != nil {
		return l, fmt.Errorf("read team %s: %w", name, err)
	}
	return l, nil
}

// Team returns the team's launch row.
func (s *Store) Team(ctx context.Context, name string) (team.Launch, error) {
	return getTeam(ctx, s.pool, name)
}

// Team returns the team's launch row inside the transaction.
func (t *txn) Team(name string) (team.Launch, error) { return getTeam(t.ctx, t.tx, name) }

// SaveTeam writes everything of a launch row but its state.
func (t *txn) SaveTeam(l team.Launch) error {
	if l.Pings == nil {
		l.Pings = map[string]team.Ping{}
	}
	if l.Breaches == nil {
		l.Breaches = []team.BreachRecord{}
	}
	pings, err := json.Marshal(l.Pings)
	if err != nil {
		return err
	}
	breaches, err := json.Marshal(l.Breaches)
	if err != nil {
		return err
	}
	tag, err := t.tx.Exec(t.ctx, `UPDATE teams SET pings = $1, breaches = $2, relaunches = $3, escalation = $4, updated_at = $5
		WHERE name = $6`, string(pings), string(breaches), int64(l.Relaunches), l.Escalation, t.now(), l.Name)
	if err != nil {
		return fmt.Errorf("save team %s: %w", l.Name, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("save team %s: %w", l.Name, mailbox.ErrNoSuchTeam)
	}
	return nil
}

// moveTeam is Transition's compare-and-set for team subjects.
func (t *txn) moveTeam(c fsm.Change) error {
	var err error
	var n int64
	if c.From == "" {
		tag, e := t.tx.Exec(t.ctx, `INSERT INTO teams (name, state, updated_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
			c.Subject, c.To, t.now())
		n, err = tag.RowsAffected(), e
	} else {
		tag, e := t.tx.Exec(t.ctx, `UPDATE teams SET state = $1, updated_at = $2 WHERE name = $3 AND state = $4`,
			c.To, t.now(), c.Subject, c.From)
		n, err = tag.RowsAffected(), e
	}
	if err != nil {
		return fmt.Errorf("move team %s from %q to %s: %w", c.Subject, c.From, c.To, err)
	}
	if n != 1 {
		return fmt.Errorf("move team %s from %q to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
	}
	return nil
}

const spawnedCols = `name, role, mode, strategy, engine, task, ephemeral, configured, spawned_by, spawned_at, retired_at`

func spawnedAgents(ctx context.Context, q querier) ([]mailbox.Spawned, error) {
	rows, err := q.Query(ctx, `SELECT name, role, mode, strategy, engine, task, ephemeral <> 0, configured <> 0,
		spawned_by, spawned_at, retired_at FROM spawned_agents ORDER BY spawned_at, name`)
	if err != nil {
		return nil, fmt.Errorf("read spawned agents: %w", err)
	}
	defer rows.Close()
	var out []mailbox.Spawned
	for rows.Next() {
		var s mailbox.Spawned
		var at int64
		var retired *int64
		if err := rows.Scan(&s.Name, &s.Role, &s.Mode, &s.Strategy, &s.Engine, &s.Task, &s.Ephemeral, &s.Configured,
			&s.SpawnedBy, &at, &retired); err != nil {
			return nil, err
		}
		s.SpawnedAt = fromNanos(at)
		if retired != nil {
			t := fromNanos(*retired)
			s.RetiredAt = &t
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SpawnedAgents returns every spawned agent, oldest first.
func (s *Store) SpawnedAgents(ctx context.Context) ([]mailbox.Spawned, error) {
	return spawnedAgents(ctx, s.pool)
}

// SpawnedAgents returns every spawned agent inside the transaction.
func (t *txn) SpawnedAgents() ([]mailbox.Spawned, error) { return spawnedAgents(t.ctx, t.tx) }

// AddSpawned stores a spawned agent, replacing a retired row.
func (t *txn) AddSpawned(s mailbox.Spawned) error {
	tag, err := t.tx.Exec(t.ctx, `INSERT INTO spawned_agents (`+spawnedCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::boolean THEN 1 ELSE 0 END, CASE WHEN $8::boolean THEN 1 ELSE 0 END, $9, $10, NULL)
		ON CONFLICT (name) DO UPDATE SET role = excluded.role, mode = excluded.mode, strategy = excluded.strategy,
			engine = excluded.engine, task = excluded.task, ephemeral = excluded.ephemeral, configured = excluded.configured,
			spawned_by = excluded.spawned_by, spawned_at = excluded.spawned_at, retired_at = NULL
		WHERE spawned_agents.retired_at IS NOT NULL`,
		s.Name, s.Role, s.Mode, s.Strategy, s.Engine, s.Task, s.Ephemeral, s.Configured, s.SpawnedBy, nanos(s.SpawnedAt))
	if err != nil {
		return fmt.Errorf("store spawned agent %s: %w", s.Name, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("spawn %s: %w", s.Name, mailbox.ErrAgentExists)
	}
	return nil
}

// RetireSpawned marks a spawned agent retired.
func (s *Store) RetireSpawned(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE spawned_agents SET retired_at = coalesce(retired_at, $1) WHERE name = $2`, nanos(s.now()), name)
	if err != nil {
		return fmt.Errorf("retire %s: %w", name, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("retire %s: %w", name, mailbox.ErrNoSuchAgent)
	}
	return nil
}
