-- Teams and spawned agents (DESIGN §9.5). The translation of sqlite/0009.
CREATE TABLE teams (
    name       TEXT PRIMARY KEY,
    state      TEXT NOT NULL CONSTRAINT teams_state_check CHECK (state IN ('INIT', 'TEAM_PROBED', 'TEAM_READY',
                   'MEMBERS_READY', 'CORE_READY', 'RUNNING', 'FALLBACK')),
    pings      TEXT NOT NULL DEFAULT '{}',
    breaches   TEXT NOT NULL DEFAULT '[]',
    relaunches BIGINT NOT NULL DEFAULT 0 CONSTRAINT teams_relaunches_check CHECK (relaunches >= 0),
    escalation BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL
);

CREATE TRIGGER teams_notify AFTER INSERT OR UPDATE OR DELETE ON teams
    FOR EACH STATEMENT EXECUTE FUNCTION swarm_notify_change();

CREATE TABLE spawned_agents (
    name       TEXT PRIMARY KEY,
    role       TEXT NOT NULL DEFAULT '',
    mode       TEXT NOT NULL DEFAULT '',
    strategy   TEXT NOT NULL DEFAULT '',
    engine     TEXT NOT NULL DEFAULT '',
    task       TEXT NOT NULL DEFAULT '',
    ephemeral  BIGINT NOT NULL DEFAULT 0 CONSTRAINT spawned_agents_ephemeral_check CHECK (ephemeral IN (0, 1)),
    configured BIGINT NOT NULL DEFAULT 0 CONSTRAINT spawned_agents_configured_check CHECK (configured IN (0, 1)),
    spawned_by TEXT NOT NULL CONSTRAINT spawned_agents_spawned_by_check CHECK (length(spawned_by) > 0),
    spawned_at BIGINT NOT NULL,
    retired_at BIGINT
);

CREATE TRIGGER spawned_agents_notify AFTER INSERT OR UPDATE OR DELETE ON spawned_agents
    FOR EACH STATEMENT EXECUTE FUNCTION swarm_notify_change();
