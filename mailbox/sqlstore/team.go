package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/team"
)

const teamCols = `name, state, pings, breaches, relaunches, escalation, updated_at`

func scanTeam(sc Row) (team.Launch, error) {
	var l team.Launch
	var pings, breaches string
	var at int64
	if err := sc.Scan(&l.Name, &l.State, &pings, &breaches, &l.Relaunches, &l.Escalation, &at); err != nil {
		return l, err
	}
	l.UpdatedAt = fromNanos(at)
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

func getTeam(ctx context.Context, q Querier, name string) (team.Launch, error) {
	l, err := scanTeam(q.QueryRowContext(ctx, `SELECT `+teamCols+` FROM teams WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return l, fmt.Errorf("team %s: %w", name, mailbox.ErrNoSuchTeam)
	}
	if err != nil {
		return l, fmt.Errorf("read team %s: %w", name, err)
	}
	return l, nil
}

// Team returns the team's launch row.
func (s *Store) Team(ctx context.Context, name string) (team.Launch, error) {
	return getTeam(ctx, s.db, name)
}

// Team returns the team's launch row inside the transaction.
func (t *Tx) Team(name string) (team.Launch, error) { return getTeam(t.ctx, t.q, name) }

// SaveTeam writes everything of a launch row but its state.
func (t *Tx) SaveTeam(l team.Launch) error {
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
	res, err := t.q.ExecContext(t.ctx, `UPDATE teams SET pings = ?, breaches = ?, relaunches = ?, escalation = ?, updated_at = ?
		WHERE name = ?`, string(pings), string(breaches), l.Relaunches, l.Escalation, t.now(), l.Name)
	if err != nil {
		return fmt.Errorf("save team %s: %w", l.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("save team %s: %w", l.Name, mailbox.ErrNoSuchTeam)
	}
	return nil
}

// moveTeam is Transition's compare-and-set for team subjects.
func (t *Tx) moveTeam(c fsm.Change) error {
	var res Result
	var err error
	if c.From == "" {
		res, err = t.q.ExecContext(t.ctx, `INSERT INTO teams (name, state, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			c.Subject, c.To, t.now())
	} else {
		res, err = t.q.ExecContext(t.ctx, `UPDATE teams SET state = ?, updated_at = ? WHERE name = ? AND state = ?`,
			c.To, t.now(), c.Subject, c.From)
	}
	if err != nil {
		return fmt.Errorf("move team %s from %q to %s: %w", c.Subject, c.From, c.To, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("move team %s from %q to %s: %w", c.Subject, c.From, c.To, mailbox.ErrStateConflict)
	}
	return nil
}

const spawnedCols = `name, role, mode, strategy, engine, task, ephemeral, configured, spawned_by, spawned_at, retired_at`

// spawnedRead is spawnedCols as read: the flags as booleans.
const spawnedRead = `name, role, mode, strategy, engine, task, ephemeral <> 0, configured <> 0, spawned_by, spawned_at, retired_at`

func spawnedAgents(ctx context.Context, q Querier) ([]mailbox.Spawned, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+spawnedRead+` FROM spawned_agents ORDER BY spawned_at, name`)
	if err != nil {
		return nil, fmt.Errorf("read spawned agents: %w", err)
	}
	defer rows.Close()
	var out []mailbox.Spawned
	for rows.Next() {
		var s mailbox.Spawned
		var at int64
		var retired sql.NullInt64
		if err := rows.Scan(&s.Name, &s.Role, &s.Mode, &s.Strategy, &s.Engine, &s.Task, &s.Ephemeral, &s.Configured,
			&s.SpawnedBy, &at, &retired); err != nil {
			return nil, err
		}
		s.SpawnedAt = fromNanos(at)
		if retired.Valid {
			t := fromNanos(retired.Int64)
			s.RetiredAt = &t
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SpawnedAgents returns every spawned agent, oldest first.
func (s *Store) SpawnedAgents(ctx context.Context) ([]mailbox.Spawned, error) {
	return spawnedAgents(ctx, s.db)
}

// SpawnedAgents returns every spawned agent inside the transaction.
func (t *Tx) SpawnedAgents() ([]mailbox.Spawned, error) { return spawnedAgents(t.ctx, t.q) }

// AddSpawned stores a spawned agent, replacing a retired row.
func (t *Tx) AddSpawned(s mailbox.Spawned) error {
	res, err := t.q.ExecContext(t.ctx, `INSERT INTO spawned_agents (`+spawnedCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
		ON CONFLICT (name) DO UPDATE SET role = excluded.role, mode = excluded.mode, strategy = excluded.strategy,
			engine = excluded.engine, task = excluded.task, ephemeral = excluded.ephemeral, configured = excluded.configured,
			spawned_by = excluded.spawned_by, spawned_at = excluded.spawned_at, retired_at = NULL
		WHERE spawned_agents.retired_at IS NOT NULL`,
		s.Name, s.Role, s.Mode, s.Strategy, s.Engine, s.Task, s.Ephemeral, s.Configured, s.SpawnedBy, nanos(s.SpawnedAt))
	if err != nil {
		return fmt.Errorf("store spawned agent %s: %w", s.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("spawn %s: %w", s.Name, mailbox.ErrAgentExists)
	}
	return nil
}

// RetireSpawned marks a spawned agent retired.
func (s *Store) RetireSpawned(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE spawned_agents SET retired_at = coalesce(retired_at, ?) WHERE name = ?`, nanos(s.Now()), name)
	if err != nil {
		return fmt.Errorf("retire %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("retire %s: %w", name, mailbox.ErrNoSuchAgent)
	}
	return nil
}
