-- Teams and spawned agents (DESIGN §9.5). PostgreSQL has the same numbers:
-- postgres/0009.
--
-- A team launch moves INIT -> ... -> RUNNING (or FALLBACK) through the fsm
-- table in package team; each move is an event (subject_kind 'team').
-- pings and breaches are JSON the store keeps as given.
CREATE TABLE teams (
    name       TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('INIT', 'TEAM_PROBED', 'TEAM_READY', 'MEMBERS_READY',
                   'CORE_READY', 'RUNNING', 'FALLBACK')),
    pings      TEXT NOT NULL DEFAULT '{}', -- {"<core agent>": {"msg_id", "acked", ...}}
    breaches   TEXT NOT NULL DEFAULT '[]', -- [{"code", "at", "agent"}]
    relaunches INTEGER NOT NULL DEFAULT 0 CHECK (relaunches >= 0),
    escalation INTEGER NOT NULL DEFAULT 0,  -- the fallback's protocol_breach escalation; 0: none
    updated_at INTEGER NOT NULL
);

-- Agents added at run time by `swarm spawn`, with who spawned them. A row
-- whose configured is 1 starts an agent swarm.toml configures, with its
-- settings; the others carry their own.
CREATE TABLE spawned_agents (
    name       TEXT PRIMARY KEY,
    role       TEXT NOT NULL DEFAULT '',
    mode       TEXT NOT NULL DEFAULT '',
    strategy   TEXT NOT NULL DEFAULT '',
    engine     TEXT NOT NULL DEFAULT '',
    task       TEXT NOT NULL DEFAULT '',
    ephemeral  INTEGER NOT NULL DEFAULT 0 CHECK (ephemeral IN (0, 1)),
    configured INTEGER NOT NULL DEFAULT 0 CHECK (configured IN (0, 1)),
    spawned_by TEXT NOT NULL CHECK (length(spawned_by) > 0),
    spawned_at INTEGER NOT NULL,
    retired_at INTEGER
);
