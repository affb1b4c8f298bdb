-- Modes, strategies and capabilities (DESIGN §9.4): each session keeps the
-- capability vector derived when it started, which the swarm commands run
-- from inside it check; and agents' reports are kept for status and sent
-- as status mail. PostgreSQL has the same numbers: postgres/0007.

-- JSON {"can_...": bool, ...}; NULL for sessions started before this
-- migration.
ALTER TABLE sessions ADD COLUMN capabilities TEXT;

CREATE TABLE reports (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent       TEXT NOT NULL,
    session_seq INTEGER NOT NULL DEFAULT 0 CHECK (session_seq >= 0), -- 0: not from a session
    kind        TEXT NOT NULL CHECK (kind IN ('progress', 'blocked', 'complete', 'session')),
    task        TEXT NOT NULL DEFAULT '',
    message     TEXT NOT NULL CHECK (length(message) > 0),
    at          INTEGER NOT NULL,
    CHECK ((kind = 'session') = (task = ''))
);

CREATE INDEX reports_agent ON reports (agent, id);
