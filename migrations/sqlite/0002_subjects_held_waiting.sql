-- Events about any subject (agents now; workflow items, escalations and the
-- team launch next), and the Held and Waiting lifecycle states.
--
-- SQLite cannot change a CHECK or drop a NOT NULL in place: each table is
-- rebuilt (create the new shape, copy, drop, rename), inside this
-- migration's transaction. No foreign key points at either table.

CREATE TABLE agents_new (
    name               TEXT PRIMARY KEY,
    state              TEXT NOT NULL DEFAULT 'Stopped' CHECK (state IN (
                           'Stopped', 'Initializing', 'BuildingPrompt', 'Spawning', 'Running',
                           'Interrupting', 'SessionComplete', 'Idle', 'CoolingDown', 'Paused',
                           'Held', 'Waiting')),
    session_seq        INTEGER NOT NULL DEFAULT 0 CHECK (session_seq >= 0),
    mode               TEXT NOT NULL DEFAULT '',
    engine             TEXT NOT NULL DEFAULT '',
    branch             TEXT NOT NULL DEFAULT '',
    worktree           TEXT NOT NULL DEFAULT '',
    consecutive_errors INTEGER NOT NULL DEFAULT 0 CHECK (consecutive_errors >= 0),
    total_errors       INTEGER NOT NULL DEFAULT 0 CHECK (total_errors >= 0),
    tokens             INTEGER NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    nudges             INTEGER NOT NULL DEFAULT 0 CHECK (nudges >= 0),
    state_since        INTEGER,
    heartbeat_at       INTEGER,
    activity           TEXT NOT NULL DEFAULT ''
);
INSERT INTO agents_new SELECT name, state, session_seq, mode, engine, branch, worktree, consecutive_errors,
    total_errors, tokens, nudges, state_since, heartbeat_at, activity FROM agents;
DROP TABLE agents;
ALTER TABLE agents_new RENAME TO agents;

CREATE TABLE events_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           INTEGER NOT NULL,
    subject_kind TEXT NOT NULL CHECK (subject_kind IN ('agent', 'item', 'escalation', 'team')),
    subject      TEXT NOT NULL,
    agent        TEXT, -- set for agent events (= subject), and for subjects that belong to one agent
    from_state   TEXT,
    to_state     TEXT NOT NULL,
    cause        TEXT NOT NULL DEFAULT '',
    session_seq  INTEGER NOT NULL DEFAULT 0,
    CHECK (subject_kind <> 'agent' OR agent = subject)
);
INSERT INTO events_new (id, at, subject_kind, subject, agent, from_state, to_state, cause, session_seq)
    SELECT id, at, 'agent', agent, agent, from_state, to_state, cause, session_seq FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_agent ON events (agent, id);
CREATE INDEX events_subject ON events (subject_kind, subject, id);
