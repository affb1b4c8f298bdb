-- The whole state of a swarm: agents and their lifecycle, sessions, mail and
-- the event log. States and kinds are enforced here, not only in Go, so a
-- bug or a hand edit cannot store a word the code does not know.
-- Times are Unix nanoseconds (UTC).

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE agents (
    name               TEXT PRIMARY KEY,
    state              TEXT NOT NULL DEFAULT 'Stopped' CHECK (state IN (
                           'Stopped', 'Initializing', 'BuildingPrompt', 'Spawning', 'Running',
                           'Interrupting', 'SessionComplete', 'Idle', 'CoolingDown', 'Paused')),
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

CREATE TABLE sessions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent       TEXT NOT NULL,
    seq         INTEGER NOT NULL CHECK (seq >= 1),
    state       TEXT NOT NULL CHECK (state IN (
                    'running', 'completed', 'interrupted', 'failed', 'timeout', 'crashed')),
    engine      TEXT NOT NULL DEFAULT '',
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    prompt      TEXT NOT NULL DEFAULT '',
    tasks       TEXT NOT NULL DEFAULT '[]',
    tokens_in   INTEGER NOT NULL DEFAULT 0,
    tokens_out  INTEGER NOT NULL DEFAULT 0,
    pgids       TEXT NOT NULL DEFAULT '[]', -- process groups to kill after a crash
    error       TEXT NOT NULL DEFAULT '',
    UNIQUE (agent, seq),
    CHECK ((state = 'running') = (ended_at IS NULL))
);

CREATE TABLE messages (
    -- Ids are never reused: pruning always keeps the newest row, so the
    -- rowid keeps growing without AUTOINCREMENT's extra write per insert.
    id           INTEGER PRIMARY KEY,
    -- NULL: the message starts its own thread (read as coalesce(thread_id, id)),
    -- so a send is a single INSERT.
    thread_id    INTEGER,
    reply_to     INTEGER REFERENCES messages (id) ON DELETE SET NULL,
    sender       TEXT NOT NULL,
    recipient    TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('message', 'task', 'status', 'nudge', 'protocol')),
    urgency      TEXT NOT NULL CHECK (urgency IN ('normal', 'urgent')),
    body         TEXT NOT NULL CHECK (length(body) > 0),
    payload      TEXT,
    created_at   INTEGER NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'delivered', 'done')),
    session_seq  INTEGER,
    shown        INTEGER NOT NULL DEFAULT 0 CHECK (shown >= 0),
    delivered_at INTEGER,
    done_at      INTEGER,
    CHECK (sender <> recipient),
    CHECK ((state = 'queued') = (session_seq IS NULL))
);

CREATE INDEX messages_inbox ON messages (recipient, state, id);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    agent       TEXT NOT NULL,
    from_state  TEXT,
    to_state    TEXT NOT NULL,
    cause       TEXT NOT NULL DEFAULT '',
    session_seq INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX events_agent ON events (agent, id);
